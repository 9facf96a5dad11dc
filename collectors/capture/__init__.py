"""Collection: run a model (torch, imported lazily) under the profiler and, optionally, Nsight Compute.

`Recorder` wraps a user's own model; `collect` runs the built-in workloads; `calibrate` measures
the GPU's achievable ceilings.
"""
