"""The LLM itself, apart from any trace: `config` (`--model`: a preset or a Hugging Face
`config.json`, read into a `ModelSpec`), `shapes` (model shapes and how their weights are stored:
the presets the collector builds), `op_cost` (the analytic minimum cost of a framework op from its
shapes and dtypes). What a step of the model costs is analysis: rooftop/analysis/step_cost.py."""
