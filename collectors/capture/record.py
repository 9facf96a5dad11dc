"""The Recorder: what a user puts around their own model to get a rooftop trace.

    with Recorder("run.parquet", model=cfg, workload={...}) as rec:
        with rec.step("prefill", 0, batch=1, context=128, new_tokens=128):
            ...
        with rec.phase("decode"):
            for i in range(n):
                with rec.step("decode", i, batch=1, context=129 + i, new_tokens=1):
                    ...

Every range is emitted twice: as an NVTX range (the `nvtx` package, so Nsight tools see it;
`torch.cuda.nvtx` raises on CPU builds) and as `torch.profiler.record_function` (so the profiler's
events carry it). Segments name the path: `prefill`, `decode`, `step=3`, `layer=1`, `attn`.
NVTX ranges go to the default domain, so `ncu --nvtx --nvtx-include "decode/step=0/"` matches.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import platform
import socket
import sys
from pathlib import Path
from typing import Any, Iterator

from rooftop.llm.shapes import ModelConfig
from rooftop.present.summary import write_summarized
from rooftop.trace import TraceError, check_writable

try:  # NVTX is optional: without it only the profiler sees the ranges (and ncu none: see nvtx_available).
    import nvtx as _nvtx
except ImportError:  # pragma: no cover - nvtx is in the collect extra
    _nvtx = None


def nvtx_available() -> bool:
    """Whether the ranges reach NVTX (the `nvtx` package): `--counters` filters ncu on them."""
    return _nvtx is not None


def _rooftop_version() -> str | None:
    try:
        from importlib.metadata import PackageNotFoundError, version
        return version("rooftop")
    except (ImportError, PackageNotFoundError):
        return None


def device_meta(device: str = "cpu") -> dict[str, Any]:
    """Name, compute capability and SM count of the device a run used (torch imported lazily)."""
    import torch

    if str(device).startswith("cuda") and torch.cuda.is_available():
        idx = torch.device(device).index or 0
        props = torch.cuda.get_device_properties(idx)
        return {"name": torch.cuda.get_device_name(idx), "cc": f"{props.major}.{props.minor}",
                "sms": props.multi_processor_count, "memory": getattr(props, "total_memory", None),
                "clocks": None}
    proc = platform.processor() or platform.machine() or "unknown"
    return {"name": f"CPU ({proc})", "cc": None, "sms": None, "clocks": None}


class Recorder:
    """Context manager that owns a torch.profiler session and writes one rooftop trace on exit.

    `path` is checked for writability on entry, before any work. If the block raises (also
    KeyboardInterrupt), what was captured is written with `incomplete: true` and a warning, and
    the exception propagates. `profile=False` emits the ranges only (no profiler, no file): the
    re-run of a workload under Nsight Compute, which needs the NVTX ranges and nothing else.
    The rows come from the profiler's exported Kineto trace, read by the Kineto importer
    (torch_profiler.import_session); `kineto=PATH` keeps that file.
    """

    def __init__(self, path: str | Path, model: ModelConfig | dict | None = None,
                 workload: dict | None = None, meta: dict | None = None, *, device: str | None = None,
                 profile: bool = True, kineto: str | Path | None = None):
        self.path = Path(path)
        self.model = model
        self.workload = dict(workload or {})
        self.meta = dict(meta or {})
        self.device = device or self.workload.get("device")
        self.steps: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self.written: Path | None = None
        self._stack: list[str] = []
        self._prof = None
        from collectors.capture.quiet import NativeLog
        self._native = NativeLog()  # what libkineto prints around the profiler, to a log file
        self._cuda = False
        self.profile = profile
        self.kineto = kineto  # where to keep the profiler's own Kineto JSON (else a temporary file)

    # --- ranges -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def range(self, name: str) -> Iterator[None]:
        """One NVTX range and one record_function range named `name` (a path segment)."""
        from torch.profiler import record_function

        name = str(name)
        self._stack.append(name)
        if _nvtx is not None:
            _nvtx.push_range(name)
        try:
            with record_function(name):
                yield
        finally:
            if _nvtx is not None:
                _nvtx.pop_range()
            self._stack.pop()

    def phase(self, name: str):
        return self.range(name)

    def layer(self, i: int):
        return self.range(f"layer={int(i)}")

    @contextlib.contextmanager
    def step(self, phase: str, i: int, *, batch: int | None = None, context: int | None = None,
             new_tokens: int | None = None) -> Iterator[None]:
        """A step range `step=i`, inside a `phase` range (opened here unless already open).

        The workload, for model-level accounting: `batch` sequences, `new_tokens` made by the step
        over the whole batch, `context` tokens each sequence attends to (its own new ones included)."""
        self.steps.append({"phase": phase, "index": int(i), "batch": batch, "new_tokens": new_tokens,
                           "context": context})
        with contextlib.ExitStack() as stack:
            if phase not in self._stack:
                stack.enter_context(self.range(phase))
            stack.enter_context(self.range(f"step={int(i)}"))
            yield

    @property
    def current_path(self) -> str:
        return "/".join(self._stack)

    # --- the session --------------------------------------------------------------------------

    def __enter__(self) -> "Recorder":
        if not self.profile:
            return self
        check_writable(self.path)  # issue 7: a bad -o path fails before the run, not after it
        import torch
        from torch.profiler import ProfilerActivity, profile

        self._cuda = torch.cuda.is_available() and not str(self.device or "").startswith("cpu")
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self._cuda else [])
        self._prof = profile(activities=activities, record_shapes=True, with_flops=True)
        with self._native.redirect():  # libkineto's `USDT: ... profiler_start` is not ours to print
            self._prof.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        from collectors.capture.torch_profiler import import_session

        if self._prof is None:
            return False
        incomplete = exc_type is not None
        if incomplete:
            self.warnings.append(f"run interrupted by {exc_type.__name__}: the trace holds only what was "
                                 "captured before it")
        try:
            if self._cuda:
                import torch
                torch.cuda.synchronize()  # the kernels in flight belong to the trace
            with self._native.redirect():
                self._prof.__exit__(None, None, None)
            note = self._native.note()
            if note:
                print(note, file=sys.stderr)
            rows, found = import_session(self._prof, self.kineto)
            if "attn" in self.workload:  # the built-in workload: say which SDPA backend really ran
                from collectors.capture.backends import attention_backends
                self.workload["attn_ran"] = attention_backends(rows)
            # with the report's summary in the footer (rooftop/present/summary.py): `report` answers at once
            self.written = write_summarized(self.path, rows, self.build_meta(incomplete, found))
        except (TraceError, OSError, RuntimeError) as err:
            if not incomplete:
                raise
            # The user's exception wins; say why the partial trace is missing.
            note = f"rooftop: could not write the partial trace {self.path}: {err}"
            if hasattr(exc, "add_note"):  # Python >= 3.11
                exc.add_note(note)
            else:
                print(note, file=sys.stderr)
        return False

    def build_meta(self, incomplete: bool = False, found: dict | None = None) -> dict[str, Any]:
        """The trace's metadata: what the importer found in the profiler's file (`found`: steps and
        their GPU windows, origin, rank), with what only the Recorder knows on top (model,
        workload, each step's batch/context/new tokens, the device as torch names it)."""
        import torch

        from collectors.capture.torch_profiler import merge_steps

        found = dict(found or {})
        meta = dict(self.meta)
        dtype = self.workload.get("dtype")
        if isinstance(self.model, ModelConfig):
            meta.setdefault("model", self.model.to_meta(dtype))
        elif isinstance(self.model, dict):
            meta.setdefault("model", dict(self.model))
        if self.workload:
            meta.setdefault("workload", self.workload)
        meta["steps"] = merge_steps(found.get("steps") or [], list(meta.get("steps") or []) + self.steps)
        if "device" not in meta:
            meta["device"] = device_meta("cuda" if self._cuda else "cpu")
        seen = found.get("device") or {}
        meta["device"] = {**{k: v for k, v in seen.items() if v is not None}, **meta["device"]}
        for key in ("origin_ns", "rank", "world_size"):
            if found.get(key) is not None:
                meta.setdefault(key, found[key])
        source = {"tool": "rooftop.Recorder", "version": _rooftop_version(), "torch": torch.__version__,
                  "command": " ".join(sys.argv), "host": socket.gethostname(),
                  "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
        source.update(meta.get("source") or {})
        if found.get("source"):
            source["kineto"] = found["source"]  # the profiler's file, as the importer read it
        meta["source"] = source
        meta["modeled"] = False
        meta["incomplete"] = bool(incomplete)
        meta["warnings"] = list(meta.get("warnings") or []) + self.warnings + list(found.get("warnings") or [])
        return meta
