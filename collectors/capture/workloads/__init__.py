"""Built-in reference workloads (pure torch): see llama.py."""
