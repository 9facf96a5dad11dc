"""A trace and what rooftop found in it as a timeline for Perfetto UI (and chrome://tracing).

Written in the Chrome trace event format (JSON, "Trace Event Format" by Google, the format Perfetto's
JSON importer reads; docs/perfetto.md says why this rather than Perfetto's protobuf):

- one process per rank (a single trace: one process, named by the trace), holding
  - a thread track per device and stream (`GPU 0 · stream 7`): kernels, copies and memsets as
    complete (`X`) slices, their name the kernel's, `cat` the row's kind, `args` the row's id,
    category, phase, step and layer where known;
  - `rooftop · phases` and `rooftop · steps`: one slice per phase (its first step's start to its
    last step's end) and per step (first start to last end of its GPU rows, DESIGN "Step span"),
    whose args hold rooftop's numbers for it (MBU, MFU, bound, idle, coverage, sources; null where
    unknown);
  - `NVTX ranges` (and `thread T · ranges` where the row names its host thread): the trace's ranges;
  - `thread T`: the CUDA runtime calls of each host thread, and framework ops;
  - counter (`C`) tracks of the per-step figures: MBU %, MFU %, model MBU %, idle % and AI / ridge
    (below 1 memory-bound, above compute-bound), sampled at each step's start. A counter holds its
    value until its next sample; a step whose figure is unknown writes no sample (the step slice's
    args say null), never a 0.

Timestamps are microseconds (the format's unit) with three decimals, i.e. the trace's nanoseconds
exactly, counted from the trace's origin as the rooftop trace stores them. The kernel rows are
formatted with Arrow's string kernels, column by column, never a Python loop over rows: a million
kernels are written in seconds. Names are JSON strings (escaped by `json.dumps`), never markup.
"""
from __future__ import annotations

import gzip
import json
import math
import os
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .atomic import replace_atomically
from .trace import TraceError
from .trace.schema import GPU_KINDS

STEPS_TRACK = "rooftop · steps"
PHASES_TRACK = "rooftop · phases"
RANGES_TRACK = "NVTX ranges"
# A run of ranks whose host rows (runtime calls) do not say their rank (a per-rank Kineto file's
# runtime rows are kept without it): their threads go to a process of their own.
HOST_PROCESS = "host threads (rank not recorded)"
# (counter name, step-table column, scale): the per-step figures rooftop adds to the timeline
COUNTERS = (("MBU %", "mbu", 100.0), ("MFU %", "mfu", 100.0), ("model MBU %", "model_mbu", 100.0),
            ("idle %", "idle_frac", 100.0), ("AI / ridge", "ai_over_ridge", 1.0))
# The step-table columns a step slice's args carry (those present).
STEP_ARGS = ("phase", "step", "kernels", "span_ns", "busy_ns", "idle_ns", "idle_frac", "mbu", "mfu",
             "mbu_status", "mfu_status", "bound", "ai", "bytes", "flops", "bytes_source", "flops_source",
             "bytes_coverage", "flops_coverage", "tokens", "tokens_per_s", "model_mbu", "model_mfu")
PHASE_ARGS = ("phase", "steps", "kernels", "span_ns", "busy_ns", "idle_ns", "idle_frac", "mbu", "mfu",
              "mbu_status", "mfu_status", "bound", "tokens_per_s", "model_mbu", "model_mfu")


def write_perfetto(analysis: Any, out: str | os.PathLike) -> Path:
    """Write `analysis`'s trace, steps and phases to `out` (gzipped when it ends in .gz), atomically:
    a temporary file beside it, renamed when complete. Returns the path written."""
    out = Path(out)
    chunks = list(trace_events(analysis))
    head = b'{"displayTimeUnit": "ns", "otherData": ' + _dumps(_other_data(analysis)).encode() + \
        b',\n"traceEvents": [\n'

    def write(tmp: str) -> None:
        with open(tmp, "wb") as raw:
            fh = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1) if out.name.endswith(".gz") else raw
            fh.write(head)
            fh.write(b",\n".join(c for c in chunks if c))
            fh.write(b"\n]}\n")
            if fh is not raw:
                fh.close()

    try:
        return replace_atomically(out, write)
    except OSError as exc:
        raise TraceError(out, f"cannot write: {exc.strerror or exc}") from None


def _other_data(a: Any) -> dict:
    t = a.trace
    p = a.peaks
    return {"producer": "rooftop export --perfetto", "trace": t.label, "modeled": bool(t.modeled),
            "time_origin": "the rooftop trace's origin (start_ns 0)",
            "peaks": {"source": p.source, "bw_bytes_per_s": p.bw, "flops_per_s": p.flops}}


def _dumps(obj: Any) -> str:
    return json.dumps(obj, allow_nan=False, separators=(",", ":"))  # (ASCII: a lone surrogate in a name stays an escape)


# --- the layout ----------------------------------------------------------------------------------

class _Layout:
    """Process and thread ids: one process per rank, threads numbered as they are asked for, with
    their names and sort order written as metadata (`M`) events."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.pids: dict[Any, int] = {}
        self.tids: dict[tuple, int] = {}
        self.meta: list[dict] = []

    def pid(self, rank: Any) -> int:
        if rank not in self.pids:
            pid = len(self.pids) + 1
            self.pids[rank] = pid
            name = self.label if rank is None else HOST_PROCESS if rank == "host" else f"rank {rank}"
            self.meta.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
            self.meta.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                              "args": {"sort_index": int(rank) if isinstance(rank, int) else 1_000_000 + pid}})
        return self.pids[rank]

    def tid(self, rank: Any, key: tuple, name: str, order: int) -> int:
        """The thread of `key` in `rank`'s process; `order` sorts the tracks (GPU streams first)."""
        full = (rank, *key)
        if full not in self.tids:
            tid = len(self.tids) + 1
            self.tids[full] = tid
            pid = self.pid(rank)
            self.meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
            self.meta.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                              "args": {"sort_index": order}})
        return self.tids[full]


_NONE = np.iinfo(np.int64).min  # a missing key (no rank, no stream) while keys are factorized


def _key(frame: pd.DataFrame, column: str) -> np.ndarray:
    """An integer key column as int64 with `_NONE` where missing (or where the column is absent)."""
    if column not in frame.columns:
        return np.full(len(frame), _NONE, dtype=np.int64)
    return frame[column].astype("Int64").to_numpy(dtype=np.int64, na_value=_NONE)


def _factorize(*keys: np.ndarray) -> tuple[np.ndarray, list[tuple]]:
    """Codes of each row's key tuple, and the distinct tuples (None for missing), vectorised."""
    frame = pd.DataFrame({i: k for i, k in enumerate(keys)})
    codes = frame.groupby(list(frame.columns), sort=True).ngroup().to_numpy()
    firsts = frame.drop_duplicates()
    order = codes[firsts.index.to_numpy()] if len(frame) else np.zeros(0, dtype=np.int64)
    uniq: list[tuple] = [()] * len(firsts)
    for c, row in zip(order, firsts.itertuples(index=False)):  # (distinct keys: a handful)
        uniq[c] = tuple(None if v == _NONE else int(v) for v in row)
    return codes, uniq


def _int_or_none(v: Any) -> int | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA else int(v)


def trace_events(a: Any) -> Iterable[bytes]:
    """The trace's events as chunks of JSON objects separated by `,\\n` (no leading or trailing comma)."""
    t = a.trace
    ev = t.events
    layout = _Layout(t.label)
    out: list[bytes] = []

    gpu = ev[ev["kind"].isin(GPU_KINDS)]
    if len(gpu):
        codes, uniques = _factorize(_key(gpu, "rank"), _key(gpu, "device"), _key(gpu, "stream"))
        tid_of = np.empty(len(uniques), dtype=np.int64)
        pid_of = np.empty(len(uniques), dtype=np.int64)
        for i, (r, d, s) in enumerate(uniques):  # (one per device and stream: a handful)
            name = f"GPU {'?' if d is None else d} · stream {'?' if s is None else s}"
            order = (0 if d is None else int(d)) * 1_000_000 + (0 if s is None else int(s))
            tid_of[i] = layout.tid(r, ("gpu", d, s), name, order)
            pid_of[i] = layout.pid(r)
        out.append(_slices(gpu, pid_of[codes], tid_of[codes]))

    out.extend(_host_events(t, layout))
    out.extend(_step_events(a, layout))
    meta = b",\n".join(_dumps(m).encode() for m in layout.meta)
    return [meta, *out]


def _host_events(t: Any, layout: _Layout) -> list[bytes]:
    """NVTX ranges, framework ops and CUDA runtime calls, on their host threads where known."""
    ev = t.events
    ranked = "rank" in ev.columns and ev["rank"].notna().any()
    out = []
    for kind, track in (("range", RANGES_TRACK), ("op", "ops")):
        rows = ev[ev["kind"] == kind]
        if not len(rows):
            continue
        rows = rows.sort_values(["start_ns", "dur_ns"], ascending=[True, False], kind="stable")
        out.append(_on_threads(rows, layout, track, 2_000_000_000 if kind == "range" else 2_100_000_000, ranked))
    host = t.runtime_rows()
    if host is not None and len(host):
        host = host.assign(kind="runtime")
        out.append(_on_threads(host, layout, None, 2_200_000_000, ranked))
    return out


def _on_threads(rows: pd.DataFrame, layout: _Layout, track: str | None, order_base: int, ranked: bool) -> bytes:
    codes, uniques = _factorize(_key(rows, "rank"), _key(rows, "thread"))
    tid_of = np.empty(len(uniques), dtype=np.int64)
    pid_of = np.empty(len(uniques), dtype=np.int64)
    if "rank" not in rows.columns and ranked:
        uniques = [("host", th) for _, th in uniques]
    for i, (r, th) in enumerate(uniques):  # (one per host thread)
        if th is None:
            name, key = track or "CUDA runtime", ("host", track)
        else:
            name = f"thread {th}" if track is None else f"thread {th} · {track}"
            key = ("host", track, th)
        tid_of[i] = layout.tid(r, key, name, order_base + i)
        pid_of[i] = layout.pid(r)
    return _slices(rows, pid_of[codes], tid_of[codes])


# --- the rows as JSON, vectorised --------------------------------------------------------------

def _text_column(values: pd.Series) -> pa.Array:
    """A text column as JSON string literals, null where missing. Each distinct value the rows use is
    escaped once (a categorical's categories can be many more than these rows use: a trace's
    categories, these rows a slice of it)."""
    cat = values if isinstance(values.dtype, pd.CategoricalDtype) else values.astype("category")
    codes = cat.cat.codes.to_numpy()
    cats = cat.cat.categories
    literals = np.full(len(cats), None, dtype=object)
    used = np.unique(codes[codes >= 0])
    literals[used] = [encode_basestring_ascii(str(c)) for c in cats[used]]
    idx = pa.array(codes, mask=codes < 0, type=pa.int32())
    return pa.array(literals, type=pa.string()).take(idx) if len(cats) else pa.nulls(len(values), pa.string())


def _ints(values: pd.Series | np.ndarray) -> pa.Array:
    arr = pa.array(values.astype("Int64") if isinstance(values, pd.Series) else values, type=pa.int64(),
                   from_pandas=True)
    return pc.cast(arr, pa.string())


def _micros(ns: np.ndarray) -> pa.Array:
    """Integer nanoseconds as microseconds with three decimals, exactly (`12.345`, `-0.001`)."""
    ns = np.asarray(ns, dtype=np.int64)
    mag = np.abs(ns)
    whole = pc.cast(pa.array(mag // 1000), pa.string())
    frac = pc.utf8_lpad(pc.cast(pa.array(mag % 1000), pa.string()), 3, "0")
    text = pc.binary_join_element_wise(whole, frac, ".")
    if (ns < 0).any():
        text = pc.if_else(pa.array(ns < 0), pc.binary_join_element_wise("-", text, ""), text)
    return text


def _join(parts: list, sep: str = "") -> pa.Array:
    """Element-wise concatenation; a null part is left out (`skip`)."""
    return pc.binary_join_element_wise(*parts, sep, null_handling="skip")


def _field(key: str, values: pa.Array) -> pa.Array:
    """`,"key":value` where the value is known, else null (left out of the join)."""
    return pc.binary_join_element_wise(f',"{key}":', values, "")


CHUNK_ROWS = 250_000  # rows formatted at a time: Arrow strings stay under 2 GB, and memory stays flat


def _slices(rows: pd.DataFrame, pid: np.ndarray, tid: np.ndarray) -> bytes:
    """Complete (`X`) events of `rows` (kind, name, start_ns, dur_ns and what is known of id,
    category, phase, op, path, step, layer) on the given process and thread ids."""
    parts = []
    for lo in range(0, len(rows), CHUNK_ROWS):
        hi = lo + CHUNK_ROWS
        parts.append(_slice_chunk(rows.iloc[lo:hi], pid[lo:hi], tid[lo:hi]))
    return b",\n".join(p for p in parts if p)


def _slice_chunk(rows: pd.DataFrame, pid: np.ndarray, tid: np.ndarray) -> bytes:
    n = len(rows)
    if not n:
        return b""
    start = rows["start_ns"].to_numpy(dtype=np.int64)
    dur = np.maximum(rows["dur_ns"].to_numpy(dtype=np.int64), 0)
    ident = ("id", rows["id"]) if "id" in rows else ("correlation", rows["correlation"])
    args: list = ["{", f'"{ident[0]}":', pc.fill_null(_ints(ident[1]), "null")]
    for key in ("category", "phase", "op", "path"):
        if key in rows and rows[key].notna().any():
            args.append(_field(key, _text_column(rows[key])))
    for key in ("step", "layer"):
        if key in rows and rows[key].notna().any():
            args.append(_field(key, _ints(rows[key])))
    args.append("}")
    parts = ['{"ph":"X","pid":', _ints(pid), ',"tid":', _ints(tid), ',"ts":', _micros(start),
             ',"dur":', _micros(dur), ',"name":', pc.fill_null(_text_column(rows["name"]), '"?"'),
             ',"cat":', pc.fill_null(_text_column(rows["kind"]), '"?"'), ',"args":', _join(args), "}"]
    return _joined(_join(parts))


def _joined(lines: pa.Array, sep: bytes = b",\n") -> bytes:
    """The strings of `lines` separated by `sep`, through Arrow's buffers (no Python string per row)."""
    if not len(lines):
        return b""
    with_sep = pc.binary_join_element_wise(lines, sep.decode(), "")
    arr = with_sep.combine_chunks() if isinstance(with_sep, pa.ChunkedArray) else with_sep
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=len(arr) + 1, offset=arr.offset * 4)
    data = arr.buffers()[2]
    body = data.to_pybytes()[offsets[0]:offsets[-1]]
    return body[: -len(sep)]


# --- steps, phases, counters ---------------------------------------------------------------------

def _clean(v: Any) -> Any:
    """A JSON value: numbers as they are, NaN/NA as null, numpy scalars as Python ones."""
    if v is None or v is pd.NA:
        return None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if math.isnan(v) or math.isinf(v) else float(v)
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    return v if isinstance(v, (int, str)) else str(v)


def _step_events(a: Any, layout: _Layout) -> list[bytes]:
    steps = a.steps
    if steps is None or not len(steps):
        return []
    steps = steps.copy()
    ridge = a.ridge
    steps["ai_over_ridge"] = steps["ai"] / ridge if ridge and "ai" in steps else np.nan
    has_dev = "device" in steps.columns and steps["device"].notna().any()
    events: list[dict] = []
    per_track: dict[tuple, list] = {}
    for row in steps.to_dict("records"):  # (one per step: thousands at most, not kernel rows)
        rank = _int_or_none(row.get("rank"))
        device = _int_or_none(row.get("device")) if has_dev else None
        where = f" · GPU {device}" if device is not None else ""
        tid = layout.tid(rank, ("steps", device), STEPS_TRACK + where, 1_000_000_000 + (device or 0) * 10)
        pid = layout.pid(rank)
        start, end = int(row["start_ns"]), int(row["end_ns"])
        bound = row.get("bound")
        name = f"{row.get('phase') or 'step'} step {row.get('step')}" + (f" · {bound}-bound" if bound else "")
        events.append({"ph": "X", "pid": pid, "tid": tid, "ts": _us(start), "dur": _us(max(end - start, 0)),
                       "name": name, "cat": "rooftop.step",
                       "args": {k: _clean(row.get(k)) for k in STEP_ARGS if k in row}})
        per_track.setdefault((rank, device, row.get("phase")), []).append((start, end))
        for cname, col, scale in COUNTERS:
            v = _clean(row.get(col))
            if v is None:
                continue  # unknown: no sample (the slice's args say null)
            events.append({"ph": "C", "pid": pid, "tid": 0, "ts": _us(start),
                           "name": f"{cname}{where}", "args": {"value": v * scale}})
    events.extend(_phase_events(a, layout, per_track))
    return [b",\n".join(_dumps(e).encode() for e in events)]


def _phase_events(a: Any, layout: _Layout, spans: dict[tuple, list]) -> list[dict]:
    """A slice per phase (per rank and device): its first step's start to its last step's end,
    with the phase table's numbers (the table is the lowest rank's: other ranks' slices carry
    their extent only)."""
    try:
        table = {r["phase"]: r for r in a.phases.to_dict("records")}
    except (AttributeError, KeyError):
        table = {}
    first_rank = min((k[0] for k in spans if k[0] is not None), default=None)
    out = []
    for (rank, device, phase), pairs in spans.items():
        if phase is None:
            continue
        start = min(s for s, _ in pairs)
        end = max(e for _, e in pairs)
        where = f" · GPU {device}" if device is not None else ""
        tid = layout.tid(rank, ("phases", device), PHASES_TRACK + where, 999_000_000 + (device or 0) * 10)
        row = table.get(phase, {}) if rank == first_rank and device is None else {}
        args = {k: _clean(row.get(k)) for k in PHASE_ARGS if k in row}
        args.update({"phase": phase, "steps_here": len(pairs)})
        out.append({"ph": "X", "pid": layout.pid(rank), "tid": tid, "ts": _us(start), "dur": _us(end - start),
                    "name": str(phase), "cat": "rooftop.phase", "args": args})
    return out


def _us(ns: int) -> float:
    """Nanoseconds as the format's microseconds; exact for spans under ~100 days (float64)."""
    return round(ns / 1000, 3)
