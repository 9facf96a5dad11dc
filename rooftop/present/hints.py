"""What would fill an empty column, for this kind of file: the recording option or profiler section
that adds what is missing (issue 40: every empty or partial screen says why and what would fill it).

Per-kernel bytes and FLOPs come from two places: hardware counters (Nsight Compute's
SpeedOfLight / MemoryWorkloadAnalysis sections, `rooftop collect --counters`) and op shapes (the
PyTorch profiler's `record_shapes=True`, which gives each GEMM and SDPA its `Input Dims`). A trace
with neither has no per-kernel costs; `--model` gives the model-level bytes of each step instead."""
from __future__ import annotations


def costs_hint(source: dict | None) -> str:
    """The one sentence that says how to get per-kernel bytes and FLOPs for a file from `source`
    (the trace metadata's `source`: its `tool` and, for Kineto, its `record_shapes` flag)."""
    src = source or {}
    tool = str(src.get("tool") or "")
    if tool == "kineto":
        if not src.get("record_shapes"):
            return ("record the profile with torch.profiler.profile(record_shapes=True): each GEMM and "
                    "attention op then carries its input shapes, from which rooftop costs its kernels; "
                    "or pass --model for the steps' model bytes")
        return ("these kernels' ops have no cost model (custom or fused kernels): Nsight Compute counters "
                "measure them (ncu --section SpeedOfLight --section MemoryWorkloadAnalysis), or pass --model")
    if tool == "nsys":
        return ("Nsight Systems records times, not per-kernel bytes or FLOPs: profile the kernels with "
                "ncu --set full, or pass --model for the steps' model bytes")
    if tool == "ncu":
        return ("this report lacks the sections that count them: profile with ncu --section SpeedOfLight "
                "--section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis (or --set full)")
    return "collect with rooftop collect --counters, or pass --model for the steps' model bytes"
