"""The v1 trace schema: event columns and their types, the metadata key, `Trace` and `TraceError`.

A file is one run (or one rank of a run): one Parquet table of events and a JSON metadata document
under the key `rooftop`. Unknown is null, never 0.
"""
from __future__ import annotations

import re

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pyarrow as pa

from rooftop.errors import TraceError, one_line  # noqa: F401  (re-exported: the trace package's error)

FORMAT_VERSION = 1
META_KEY = b"rooftop"

# `runtime`: a CUDA runtime/driver call on a host thread (cudaLaunchKernel, cudaGraphLaunch,
# cudaStreamSynchronize, cudaMemcpyAsync ...), joined to what it launched by `correlation`. It says
# what the host was doing while the GPU sat idle; it is never a timed (GPU) row.
KINDS = ("kernel", "memcpy", "memset", "range", "op", "runtime")
# The importers' words for a file that ends early (kineto.py: "truncated trace ...", "... the rest
# of the file is not read"; ncu_rep: "truncated report ...").
_CUT = re.compile(r"\btruncated\b|the rest of the file is not read")
# The GPU work: the rows that carry a run's time when it has any (`Trace.timed`).
GPU_KINDS = ("kernel", "memcpy", "memset")

# The 19 warp stall reasons of Hopper's WarpStateStats section, in Nsight Compute's order.
STALL_REASONS = (
    "long_scoreboard", "short_scoreboard", "mio_throttle", "lg_throttle", "wait", "barrier",
    "membar", "math_pipe_throttle", "tex_throttle", "not_selected", "selected", "dispatch_stall",
    "drain", "imc_miss", "branch_resolving", "no_instruction", "sleeping", "misc", "gmma",
)
STALL_COLUMNS = tuple(f"stall_{r}" for r in STALL_REASONS)

_DICT = pa.dictionary(pa.int32(), pa.string())
_SHAPE = pa.list_(pa.int32(), 3)

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("kind", _DICT),
        ("name", pa.string()),
        ("short_name", pa.string()),
        ("start_ns", pa.int64()),
        ("dur_ns", pa.int64()),
        ("device", pa.int32()),
        ("stream", pa.int32()),
        ("correlation", pa.int64()),
        ("path", pa.string()),
        ("phase", _DICT),
        ("step", pa.int32()),
        ("layer", pa.int32()),
        ("op", pa.string()),
        ("category", _DICT),
        ("grid", _SHAPE),
        ("block", _SHAPE),
        ("registers", pa.int32()),
        ("shared_mem", pa.int32()),
        ("flops", pa.float64()),
        ("dram_read", pa.float64()),
        ("dram_write", pa.float64()),
        ("model_flops", pa.float64()),
        ("model_bytes", pa.float64()),
        ("counters", pa.bool_()),
        ("sm_pct", pa.float32()),
        ("dram_pct", pa.float32()),
        ("occupancy_pct", pa.float32()),
        ("l1_hit_pct", pa.float32()),
        ("l2_hit_pct", pa.float32()),
    ]
    + [(c, pa.float32()) for c in STALL_COLUMNS]
    # The host thread (OS thread id) of a runtime call or a CPU range; null for GPU rows and in
    # files written before it existed.
    + [("thread", pa.int64())]
    # The compute dtype and pipe an importer found for a kernel from the best evidence it had
    # (ncu instruction counters per pipe: fp32/fp64 CUDA cores, tf32/bf16/fp16/fp8/fp4/int8 tensor),
    # and its integer tensor ops (IMMA/IGMMA, never FLOPs); null where unknown and in older files.
    + [("dtype", _DICT), ("int_ops", pa.float64())]
    # `rank` is not written into per-rank files (the directory name carries it, hive style);
    # it exists in memory once a multi-rank run is loaded.
)
COLUMNS = tuple(SCHEMA.names)
REQUIRED = ("id", "kind", "name", "start_ns", "dur_ns")
HOST_COLUMNS = ("start_ns", "dur_ns", "name", "correlation", "thread", "op")
NUMERIC_CHECKED = ("flops", "dram_read", "dram_write", "model_flops", "model_bytes")
# Text columns that repeat (a decode step launches the same kernels in every layer): read as categoricals.
TEXT_COLUMNS = ("name", "short_name", "path", "op")


@dataclass
class Trace:
    """A loaded run: the event rows (pandas, one row per event) and the metadata document."""

    events: pd.DataFrame
    meta: dict[str, Any]
    path: str | None = None
    warnings: list[str] = field(default_factory=list)
    # The `runtime` rows (CUDA calls on host threads), kept apart from `events` in a few columns
    # (HOST_COLUMNS): a Kineto trace has about one per kernel, and as full event rows they would
    # double the memory of a 1M-kernel trace for what only the timeline reads. None: the file has none.
    host: pd.DataFrame | None = None
    # Reads `host` when first asked (`runtime_rows`), for a trace loaded with `lazy_host`: the
    # runtime rows stay on disk until the timeline wants them.
    load_host: Callable[[], pd.DataFrame | None] | None = field(default=None, repr=False, compare=False)

    def runtime_rows(self) -> pd.DataFrame | None:
        """`host`, read from the file first if it was left there (blocking: a thread worker's call)."""
        if self.host is None and self.load_host is not None:
            load, self.load_host = self.load_host, None
            self.host = load()
        return self.host

    @property
    def modeled(self) -> bool:
        return bool(self.meta.get("modeled"))

    @property
    def source(self) -> dict[str, Any]:
        return self.meta.get("source") or {}

    @property
    def device_meta(self) -> dict[str, Any]:
        return self.meta.get("device") or {}

    @property
    def ranks(self) -> list[int]:
        if "rank" not in self.events.columns:
            return []
        return sorted(int(r) for r in self.events["rank"].dropna().unique())

    @property
    def label(self) -> str:
        if self.path:
            return Path(self.path).name
        return self.meta.get("model", {}).get("name") or "trace"

    def timed(self) -> pd.DataFrame:
        """The rows that carry the run's time: kernels/memcpy/memset, or ops on a CPU-only run."""
        ev = self.events
        gpu = ev["kind"].isin(GPU_KINDS)
        if gpu.all():
            return ev  # no copy: a million-kernel trace is mostly kernels
        first = int(gpu.sum())
        if first and gpu.iloc[:first].all():
            return ev.iloc[:first]  # a loaded trace puts its GPU rows first: a view, not a copy
        if gpu.any():
            return ev[gpu]
        if self.cut_before_gpu_rows:
            return ev.iloc[0:0]  # a GPU run's CPU ops are not its kernels
        return ev[ev["kind"] == "op"]

    @property
    def cut_note(self) -> str | None:
        """The warning a file cut before its GPU rows gets (see `cut_before_gpu_rows`)."""
        if not self.cut_before_gpu_rows:
            return None
        ops = int((self.events["kind"] == "op").sum())
        return (f"the file was cut before its GPU events: no kernel or copy survives, and its {ops:,} CPU "
                "op(s) are not counted as kernels; re-export or re-capture the trace")

    @property
    def cut_before_gpu_rows(self) -> bool:
        """A file cut short (truncated, or unreadable past some point) that kept no GPU row: a
        profiler writes its CPU ops before its kernels, so the cut took the GPU events, and the ops
        left are not a CPU-only run's timed units."""
        return bool(self.warnings) and any(_CUT.search(str(w)) for w in self.warnings) and \
            not self.events["kind"].isin(GPU_KINDS).any()
