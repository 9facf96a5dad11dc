"""Turn a torch.profiler session into rooftop rows (kernels, ops and ranges).

The conversion works on plain `RawEvent`s, so it is tested without a GPU on fabricated events;
`events_from_profiler` adapts the profiler's Kineto results (`prof.profiler.kineto_results.events()`,
whose `activity_type()` strings are Kineto's categories: `cpu_op`, `user_annotation`, `kernel`,
`gpu_memcpy`, `gpu_memset`, `cuda_runtime`, ...). torch is never imported here.

Rules:
- `range` rows: one per record_function range, its path including itself (`decode/step=3/layer=1/attn`).
- With GPU activity: one row per kernel/memcpy/memset, attributed to the CPU event that launched it.
  CUPTI links each GPU activity to the innermost RecordFunction active at launch (the activity's
  linked correlation id is that op's or range's correlation id). When the link is missing, the
  runtime call with the same CUPTI correlation is placed in the CPU nesting by time instead.
  Kernels replayed by `cudaGraphLaunch` link to whatever encloses the replay: the step range.
  An op's `model_flops`/`model_bytes` (rooftop.opmodel) are split across its kernels by duration.
- CPU only: one `op` row per *outermost* aten op under the range stack (an op with no aten
  ancestor). Not the innermost: on CPU `aten::mm` itself has children (`aten::resolve_conj`), so
  "no aten children" would keep the trivial view ops and drop the GEMMs. Outermost ops never
  overlap, so no time is counted twice, and each is costed from its own shapes (`aten::linear`,
  `aten::scaled_dot_product_attention`, ...). torch reports 0 FLOPs for SDPA; we compute it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable

from rooftop.opmodel import copy_hbm_bytes, op_cost, split_by_duration

GPU_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
_RUNTIME = ("cuda_runtime", "cuda_driver")


@dataclass
class RawEvent:
    """One profiler event with only what the conversion needs (times in ns, absolute)."""

    name: str
    kind: str  # Kineto activity type: cpu_op, user_annotation, kernel, gpu_memcpy, cuda_runtime, ...
    start_ns: int
    dur_ns: int
    thread: int | None = None
    correlation: int | None = None  # CPU: the id GPU activities link to; GPU/runtime: CUPTI's
    linked: int | None = None  # GPU activity: the correlation id of the CPU op/range that launched it
    device: int | None = None
    stream: int | None = None
    shapes: list | None = None
    dtypes: list | None = None
    concrete: list | None = None
    metadata: dict = field(default_factory=dict)


@dataclass
class _Node:
    ev: RawEvent
    parent: "_Node | None" = None

    def annotations(self) -> list[str]:
        out, node = [], self
        while node is not None:
            if node.ev.kind == "user_annotation":
                out.append(node.ev.name)
            node = node.parent
        return out[::-1]

    def path(self) -> str | None:
        names = self.annotations()
        return "/".join(names) if names else None

    def outermost_op(self) -> bool:
        node = self.parent
        while node is not None:
            if node.ev.kind == "cpu_op":
                return False
            node = node.parent
        return True


# --- adapting torch.profiler ------------------------------------------------------------------

def _call(obj: Any, name: str, default: Any = None) -> Any:
    fn = getattr(obj, name, None)
    if fn is None:
        return default
    try:
        return fn() if callable(fn) else fn
    except (RuntimeError, TypeError, ValueError):
        return default


def _metadata(text: Any) -> dict:
    """Kineto's CUPTI fields come as a JSON object body without braces (`"grid": [1, 1, 1], ...`)."""
    if not text or not isinstance(text, str):
        return {}
    for candidate in (text, "{" + text + "}"):
        try:
            doc = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(doc, dict):
            return doc
    return {}


def events_from_profiler(prof: Any) -> list[RawEvent]:
    """RawEvents from a finished `torch.profiler.profile` (its Kineto results)."""
    results = prof.profiler.kineto_results
    out = []
    for e in results.events():
        kind = str(_call(e, "activity_type", "") or "")
        if not kind:
            kind = "user_annotation" if _call(e, "is_user_annotation", False) else "cpu_op"
        gpu = kind in GPU_KINDS
        out.append(RawEvent(
            name=str(_call(e, "name", "")),
            kind=kind,
            start_ns=int(_call(e, "start_ns", 0)),
            dur_ns=max(0, int(_call(e, "duration_ns", 0))),
            thread=_call(e, "start_thread_id"),
            correlation=_call(e, "correlation_id"),
            linked=_call(e, "linked_correlation_id") or None,
            device=_call(e, "device_index") if gpu else None,
            stream=_call(e, "device_resource_id") if gpu else None,
            shapes=_call(e, "shapes"),
            dtypes=_call(e, "dtypes"),
            concrete=_call(e, "concrete_inputs"),
            metadata=_metadata(_call(e, "metadata_json")) if gpu else {},
        ))
    return out


# --- conversion -------------------------------------------------------------------------------

def _nest(cpu: list[RawEvent]) -> list[_Node]:
    """Parent links from time containment, per thread (the profiler's own nesting rule)."""
    nodes = [_Node(e) for e in cpu]
    by_thread: dict[Any, list[_Node]] = {}
    for n in nodes:
        by_thread.setdefault(n.ev.thread, []).append(n)
    for group in by_thread.values():
        group.sort(key=lambda n: (n.ev.start_ns, -n.ev.dur_ns, n.ev.kind in _RUNTIME))
        stack: list[_Node] = []
        for n in group:
            end = n.ev.start_ns + n.ev.dur_ns
            # Sorted by start, so the top contains n unless it ends before n does.
            while stack and stack[-1].ev.start_ns + stack[-1].ev.dur_ns < end:
                stack.pop()
            n.parent = stack[-1] if stack else None
            if n.ev.kind not in _RUNTIME:
                stack.append(n)
    return nodes


def _gpu_meta(meta: dict) -> dict:
    def shape(v):
        if isinstance(v, (list, tuple)) and len(v) == 3:
            try:
                return [int(x) for x in v]
            except (TypeError, ValueError):
                return None
        return None

    def num(v):
        try:
            return int(v)
        except (TypeError, ValueError):
            return None

    return {"grid": shape(meta.get("grid")), "block": shape(meta.get("block")),
            "registers": num(meta.get("registers per thread")), "shared_mem": num(meta.get("shared memory"))}


def _number(v: Any) -> float | None:
    try:
        return float(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def _launcher(ev: RawEvent, by_corr: dict, runtime: dict) -> _Node | None:
    """The op or range a GPU activity belongs to: linked correlation first, then the runtime call."""
    if ev.linked is not None and ev.linked in by_corr:
        return by_corr[ev.linked]
    call = runtime.get(ev.correlation)
    return call.parent if call is not None else None


def convert(events: Iterable[RawEvent], origin_ns: int | None = None) -> tuple[list[dict], list[str]]:
    """Rooftop rows (dicts in the v1 column names) and warnings, from a session's events."""
    events = [e for e in events if e.kind != "gpu_user_annotation" and e.kind != "python_function"]
    if not events:
        return [], ["the profiler recorded no events"]
    origin = min(e.start_ns for e in events) if origin_ns is None else origin_ns
    gpu = [e for e in events if e.kind in GPU_KINDS]
    cpu = [e for e in events if e.kind in ("cpu_op", "user_annotation") or e.kind in _RUNTIME]
    nodes = _nest(cpu)
    rows: list[dict] = []
    for n in nodes:
        if n.ev.kind == "user_annotation":
            rows.append(_row(n.ev, origin, "range", path=n.path()))
    warnings: list[str] = []
    if gpu:
        rows += _gpu_rows(gpu, nodes, origin, warnings)
    else:
        for n in nodes:
            if n.ev.kind == "cpu_op" and n.outermost_op():
                cost = op_cost(n.ev.name, n.ev.shapes, n.ev.dtypes, n.ev.concrete)
                rows.append(_row(n.ev, origin, "op", path=n.path(), op=n.ev.name,
                                 model_flops=cost[0] if cost else None, model_bytes=cost[1] if cost else None))
    rows.sort(key=lambda r: (r["start_ns"], r["kind"] != "range"))
    for i, r in enumerate(rows):
        r["id"] = i
    return rows, warnings


def _gpu_rows(gpu: list[RawEvent], nodes: list[_Node], origin: int, warnings: list[str]) -> list[dict]:
    by_corr = {n.ev.correlation: n for n in nodes
               if n.ev.kind in ("cpu_op", "user_annotation") and n.ev.correlation is not None}
    runtime = {n.ev.correlation: n for n in nodes if n.ev.kind in _RUNTIME and n.ev.correlation is not None}
    launched: dict[int, list[tuple[RawEvent, dict]]] = {}
    rows, unattributed = [], 0
    for ev in sorted(gpu, key=lambda e: e.start_ns):
        owner = _launcher(ev, by_corr, runtime)
        if owner is None:
            unattributed += 1
        op = owner.ev.name if owner is not None and owner.ev.kind == "cpu_op" else None
        if owner is not None and owner.ev.kind == "user_annotation":
            call = runtime.get(ev.correlation)  # e.g. cudaGraphLaunch under the step range
            op = call.ev.name if call is not None else None
        row = _row(ev, origin, GPU_KINDS[ev.kind], path=owner.path() if owner else None, op=op,
                   device=ev.device, stream=ev.stream, correlation=ev.correlation, **_gpu_meta(ev.metadata))
        if ev.kind != "kernel":  # memcpy/memset: HBM bytes of what CUPTI recorded (DtoD moves 2N)
            row["model_bytes"] = copy_hbm_bytes(ev.name, _number(ev.metadata.get("bytes")))
        rows.append(row)
        if owner is not None and owner.ev.kind == "cpu_op" and ev.kind == "kernel":
            launched.setdefault(id(owner), []).append((owner.ev, row))
    for group in launched.values():
        op_ev = group[0][0]
        cost = op_cost(op_ev.name, op_ev.shapes, op_ev.dtypes, op_ev.concrete)
        if cost is None:
            continue
        durs = [r["dur_ns"] for _, r in group]
        for (_, r), f, b in zip(group, split_by_duration(cost[0], durs), split_by_duration(cost[1], durs)):
            r["model_flops"], r["model_bytes"] = f, b
    if unattributed:
        warnings.append(f"{unattributed} GPU activities could not be linked to the op or range that launched them")
    return rows


def _row(ev: RawEvent, origin: int, kind: str, **extra: Any) -> dict:
    row = {"kind": kind, "name": ev.name, "start_ns": int(ev.start_ns - origin), "dur_ns": int(ev.dur_ns),
           "correlation": ev.correlation}
    row.update(extra)
    return row


def rows_from_profiler(prof: Any) -> tuple[list[dict], list[str]]:
    """Convert a finished torch.profiler session into rooftop rows."""
    results = prof.profiler.kineto_results
    origin = _call(results, "trace_start_ns")
    events = events_from_profiler(prof)
    if events and origin is not None:
        origin = min(int(origin), min(e.start_ns for e in events))
    return convert(events, origin)
