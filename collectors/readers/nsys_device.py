"""Units of the device figures in Nsight Systems exports, by the export's table layout.

nsys 2022 and later write `TARGET_INFO_GPU.memoryBandwidth` in bytes/s and `clockRate` in Hz (the
H100 export in the fixtures: 3,352,320,000,000 and 1,980,000,000). Older exports keep the details
in `TARGET_INFO_CUDA_GPU`, whose columns are CUPTI's `CUpti_ActivityDevice` record fields:
`globalMemoryBandwidth` in kB/s and `coreClockRate` in kHz (CUPTI's documentation of the record;
its samples print `globalMemoryBandwidth / 1024 / 1024` as GB/s). Read as bytes/s, an A100 PCIe's
1.555 TB/s became 0.00156 TB/s and no spec row fitted it. The column name tells the layout, so the
unit follows from it, never from the value.
"""
from __future__ import annotations

KB = 1e3   # CUPTI's kBytes/sec
KHZ = 1e3


def _num(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f > 0 and f == f and f != float("inf") else None


def bandwidth_bps(memory_bandwidth, global_memory_bandwidth) -> float | None:
    """Peak memory bandwidth in bytes/s: `memoryBandwidth` (B/s) where the export has it, else the
    older `globalMemoryBandwidth` (kB/s) x 1000; None where neither is a positive number."""
    new = _num(memory_bandwidth)
    if new is not None:
        return new
    old = _num(global_memory_bandwidth)
    return old * KB if old is not None else None


def clock_hz(clock_rate, core_clock_rate) -> float | None:
    """SM clock in Hz: `clockRate` (Hz) where the export has it, else the older `coreClockRate` (kHz)."""
    new = _num(clock_rate)
    if new is not None:
        return new
    old = _num(core_clock_rate)
    return old * KHZ if old is not None else None
