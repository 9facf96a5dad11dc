"""Steps and phases: which marker starts a step, what the step did, and which GPU work belongs to it.

A *step marker* is a range whose name says "one engine iteration":

| source    | marker (as the tool writes it)                               | phase from              | index from |
|-----------|--------------------------------------------------------------|-------------------------|------------|
| user      | `--steps REGEX` (named groups `phase`, `tokens`, `step`)      | `phase` group           | `step` group, else order |
| vllm      | `execute_context_N(T)_generation_M(U)` (and the `execute_K_context_N(sq..)` detailed form) | N, M | order |
| sglang    | `step[EXTEND|DECODE|MIXED bs=B toks=T ...]`                   | the mode                | order |
| atom      | `prefill[bs=B tok=T ...]`, `decode[bs=B tok=T ...]`            | the word                | order |
| trtllm    | `[Executor] _forward_step I: C ctx reqs, G gen reqs`, `executeStep: C ctx reqs, G gen reqs` | C, G | I, else order |
| recorder  | `step=I` (rooftop's Recorder, inside a `prefill`/`decode` range) | the enclosing path   | I |
| profiler  | `ProfilerStep#I` (torch.profiler's schedule)                  | none                    | I |
| python    | Python-stack frames when nothing above is present: vLLM `gpu_worker.py(L): execute_model`, SGLang `model_runner.py(L): forward_extend/forward_decode`, Hugging Face: the outermost `transformers/models/...: forward` inside `generation/utils.py(L): generate` (the first of each generate is the prefill) | SGLang/HF: the frame | order |

Only the best source present in a trace is used (in the order of the table), and of nested markers
of that source only the outermost: a ProfilerStep around vLLM's annotation is not a second step.
vLLM writes the same name for every step, so a step's identity is its occurrence, never its name.

Which GPU work belongs to a step (`assign`): GPU work runs later than the CPU code that launched it,
so a step's window is on the GPU clock: the hull of the step's `gpu_user_annotation` spans (Kineto
writes them per stream, from the kernels correlated to the annotation) and of the GPU work launched
inside the step's CPU range on its thread, or on a thread without markers while the range was open
(the launch correlation: this covers kernels under nested annotations, which Kineto gives to the
inner span only, CUDA-graph replays, whose kernels carry the cudaGraphLaunch's correlation, and
autograd's or a communication thread's launches). A step with neither has no window (in a trace where
no step has one, the CPU ranges are the windows). Windows that would overlap are cut at the next
step's start.
Every kernel, copy and memset then belongs to the window it *starts in*, whoever launched it (another
thread, a graph, nothing recorded). Work outside every window is not a step: its step is null and its
phase says where it ran (`before first step`, `between steps`, `after last step`), so no analysis
mistakes it for a step.

Everything per row is vectorised (sorted windows, `np.searchsorted`); Python loops run over distinct
names and distinct threads only.

One job per module: `markers` (what a range name says), `paths` (phase, step and layer of an NVTX
path), `find` (the steps of one trace), `windows` (GPU work -> the step window it starts in),
`phases` (a phase from a step's own work).
"""
from rooftop.trace.steps.find import REPEAT_MIN, Steps, find_steps, locate_on_threads, outermost
from rooftop.trace.steps.markers import (PYTHON_FRAME, RULES, SOURCES, WORKLOAD_KEYS, Marker, compile_user_pattern,
                      looks_like_step_marker, parse_marker, phase_of_counts, set_user_pattern, user_pattern,
                      wanted_python_frame)
from rooftop.trace.steps.paths import parse_layer, parse_layers, parse_path, parse_paths
from rooftop.trace.steps.phases import DECODE_MAX_TOKENS, PER_TOKEN_KERNEL, infer_phases
from rooftop.trace.steps.windows import (AFTER_LAST_STEP, BEFORE_FIRST_STEP, BETWEEN_STEPS, OUTSIDE_STEPS, assign, assign_codes,
                      assign_cpu, assign_cpu_codes, attach_windows, gpu_windows)

__all__ = [
    "AFTER_LAST_STEP", "BEFORE_FIRST_STEP", "BETWEEN_STEPS", "DECODE_MAX_TOKENS", "OUTSIDE_STEPS", "PER_TOKEN_KERNEL",
    "PYTHON_FRAME", "REPEAT_MIN", "RULES", "SOURCES", "WORKLOAD_KEYS", "Marker", "Steps", "assign", "assign_codes",
    "assign_cpu", "assign_cpu_codes", "attach_windows", "compile_user_pattern", "find_steps", "gpu_windows",
    "infer_phases", "locate_on_threads", "looks_like_step_marker", "outermost", "parse_layer", "parse_layers",
    "parse_marker", "parse_path", "parse_paths", "phase_of_counts", "set_user_pattern", "user_pattern",
    "wanted_python_frame",
]
