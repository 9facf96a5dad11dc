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
  - `GPU d busy %`: a counter per device of the share of each window (~2,000 over its span) in which
    at least one of its kernels, copies or memsets runs (their union, DESIGN "Busy"), steps or none;
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
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from rooftop.trace.atomic import replace_atomically
from rooftop.trace import TraceError
from rooftop.trace.schema import GPU_KINDS

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
            for chunk in chunks:  # (each event followed by `,\n` but the last chunk's last)
                fh.write(chunk)
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


def trace_events(a: Any) -> list:
    """The trace's events as chunks (bytes or Arrow buffers) of JSON objects, each followed by `,\\n`
    but the last: written one after the other, they are the `traceEvents` array's body."""
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
        out.extend(_slices(gpu, pid_of[codes], tid_of[codes]))
        out.append(_busy_counters(gpu, layout))

    out.extend(_host_events(t, layout))
    out.extend(_step_events(a, layout))
    layout.pid(None if not layout.pids else next(iter(layout.pids)))  # (an empty trace: its process still named)
    meta = ",\n".join(_dumps(m) for m in layout.meta).encode()
    return [*out, meta]


BUSY_WINDOWS = 2000  # samples of a device's busy counter over its span (about: the window is rounded)


def busy_window_ns(span_ns: int) -> int:
    """The busy counter's window: span / BUSY_WINDOWS rounded up to 1, 2 or 5 x 10^k ns, 1 us at least."""
    raw = max(1000, -(-int(span_ns) // BUSY_WINDOWS))
    exp = 10 ** (len(str(raw)) - 1)
    return next(m * exp for m in (1, 2, 5, 10) if m * exp >= raw)


def busy_fractions(start: np.ndarray, end: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Share of each window [edges[i], edges[i+1]) covered by the union of the intervals
    [start, end) (DESIGN "Busy": the union of a device's GPU rows), vectorised: the intervals are
    merged, and the busy time before each edge read off their running total."""
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]  # an interval that starts after everything before it ended
    firsts = np.flatnonzero(new)
    m_start = s[firsts]
    # the running furthest end at a merged interval's last member is that interval's end (earlier
    # ones ended before it started)
    m_end = reach[np.r_[firsts[1:] - 1, len(s) - 1]] if len(s) else s
    length = m_end - m_start
    before = np.concatenate([[0], np.cumsum(length)])  # busy time before each merged interval
    i = np.searchsorted(m_start, edges, side="right") - 1  # the merged interval at or before each edge
    inside = np.where(i >= 0, np.clip(edges - m_start[np.maximum(i, 0)], 0, length[np.maximum(i, 0)]), 0)
    busy_to = np.where(i >= 0, before[np.maximum(i, 0)] + inside, 0)
    return np.diff(busy_to) / np.diff(edges)


def _busy_counters(gpu: pd.DataFrame, layout: _Layout) -> bytes:
    """Per rank and device, `GPU d busy %`: the share of each window in which at least one kernel,
    copy or memset runs (idle is the rest), sampled at each window's start over the device's span.
    Needs no steps: it is the idle a trace without step markers shows."""
    events = []
    keys = pd.DataFrame({"r": _key(gpu, "rank"), "d": _key(gpu, "device")})
    start_all = gpu["start_ns"].to_numpy(dtype=np.int64)
    end_all = start_all + np.maximum(gpu["dur_ns"].to_numpy(dtype=np.int64), 0)
    for (r, d), idx in keys.groupby(["r", "d"], sort=True).indices.items():  # (one per device)
        start, end = start_all[idx], end_all[idx]
        lo, hi = int(start.min()), int(end.max())
        if hi <= lo:
            continue
        window = busy_window_ns(hi - lo)
        edges = np.arange(lo, hi + window, window, dtype=np.int64)
        frac = busy_fractions(start, end, edges)
        rank = None if r == _NONE else int(r)
        pid = layout.pid(rank)
        name = f"GPU {'?' if d == _NONE else int(d)} busy %"
        for ts, v in zip(edges[:-1].tolist(), (frac * 100).tolist()):  # (~2,000 per device)
            events.append({"ph": "C", "pid": pid, "tid": 0, "ts": _us(ts), "name": name, "args": {"value": round(v, 3)}})
    return "".join(_dumps(e) + END for e in events).encode()


def _host_events(t: Any, layout: _Layout) -> list[pa.Buffer]:
    """NVTX ranges, framework ops and CUDA runtime calls, on their host threads where known."""
    ev = t.events
    ranked = "rank" in ev.columns and ev["rank"].notna().any()
    out = []
    for kind, track in (("range", RANGES_TRACK), ("op", "ops")):
        rows = ev[ev["kind"] == kind]
        if not len(rows):
            continue
        rows = rows.sort_values(["start_ns", "dur_ns"], ascending=[True, False], kind="stable")
        out.extend(_on_threads(rows, layout, track, 2_000_000_000 if kind == "range" else 2_100_000_000, ranked))
    host = t.runtime_rows()
    if host is not None and len(host):
        host = host.assign(kind="runtime")
        out.extend(_on_threads(host, layout, None, 2_200_000_000, ranked))
    return out


def _on_threads(rows: pd.DataFrame, layout: _Layout, track: str | None, order_base: int,
                ranked: bool) -> list[pa.Buffer]:
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

def _dictionary(values: pd.Series, prefix: str = "") -> tuple[pa.Array, np.ndarray]:
    """A text column as (literals, codes): `prefix` + the JSON string of each distinct value the rows
    use, escaped once (a categorical's categories can be many more than these rows use), and each
    row's index into them (-1 where missing)."""
    cat = values if isinstance(values.dtype, pd.CategoricalDtype) else values.astype("category")
    codes = cat.cat.codes.to_numpy().astype(np.int32, copy=False)
    cats = cat.cat.categories
    literals = np.full(len(cats), None, dtype=object)
    used = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(cats)))
    literals[used] = [prefix + encode_basestring_ascii(str(c)) for c in np.asarray(cats[used], dtype=object)]
    return pa.array(literals, type=pa.string()), codes


def _take(dictionary: tuple[pa.Array, np.ndarray], lo: int, hi: int) -> pa.Array:
    literals, codes = dictionary
    part = codes[lo:hi]
    if not len(literals):
        return pa.nulls(len(part), pa.string())
    return literals.take(pa.array(part, mask=part < 0, type=pa.int32()))


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


def _join(parts: list) -> pa.Array:
    """Element-wise concatenation; a null part is left out (`skip`)."""
    return pc.binary_join_element_wise(*parts, "", null_handling="skip")


CHUNK_ROWS = 250_000  # rows formatted at a time: Arrow strings stay under 2 GB, and memory stays flat
END = ",\n"  # after every event of a chunk


def _slices(rows: pd.DataFrame, pid: np.ndarray, tid: np.ndarray) -> list[pa.Buffer]:
    """Complete (`X`) events of `rows` (kind, name, start_ns, dur_ns and what is known of id,
    category, phase, op, path, step, layer) on the given process and thread ids, each followed by
    `END`, as Arrow buffers written as they are (no Python string per row, no copy)."""
    n = len(rows)
    if not n:
        return []
    # The head of an event is the same for every row of one track and kind: one literal per pair.
    kind_lit, kind_code = _dictionary(rows["kind"])
    kinds = [k.as_py() or '"?"' for k in kind_lit]
    head_key = pd.DataFrame({"p": pid, "t": tid, "k": kind_code})
    head_code = head_key.groupby(["p", "t", "k"], sort=False).ngroup().to_numpy().astype(np.int32)
    firsts = head_key.drop_duplicates()
    heads = np.empty(len(firsts), dtype=object)
    for code, (p, t, k) in zip(head_code[firsts.index.to_numpy()], firsts.itertuples(index=False)):
        heads[code] = f'{{"ph":"X","pid":{p},"tid":{t},"cat":{kinds[k] if k >= 0 else chr(34) + "?" + chr(34)},"name":'
    head = (pa.array(heads, type=pa.string()), head_code)
    name = _dictionary(rows["name"])
    texts = [_dictionary(rows[key], f',"{key}":') for key in ("category", "phase", "op", "path")
             if key in rows and rows[key].notna().any()]
    ints = [key for key in ("step", "layer") if key in rows and rows[key].notna().any()]
    ident = "id" if "id" in rows else "correlation"
    start = rows["start_ns"].to_numpy(dtype=np.int64)
    dur = np.maximum(rows["dur_ns"].to_numpy(dtype=np.int64), 0)
    out = []
    for lo in range(0, n, CHUNK_ROWS):
        hi = min(lo + CHUNK_ROWS, n)
        part = rows.iloc[lo:hi]
        fields = [pc.binary_join_element_wise(f',"{key}":', _ints(part[key]), "") for key in ints]
        line = _join([_take(head, lo, hi), pc.fill_null(_take(name, lo, hi), '"?"'),
                      ',"ts":', _micros(start[lo:hi]), ',"dur":', _micros(dur[lo:hi]),
                      f',"args":{{"{ident}":', pc.fill_null(_ints(part[ident]), "null"),
                      *[_take(t, lo, hi) for t in texts], *fields, "}}" + END])
        out.append(_data(line))
    return out


def _data(lines: pa.Array) -> pa.Buffer:
    """The concatenated strings of `lines`: their data buffer, between the first and last offsets."""
    arr = lines.combine_chunks() if isinstance(lines, pa.ChunkedArray) else lines
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=len(arr) + 1, offset=arr.offset * 4)
    return arr.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0]))


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
    """Step and phase slices and the per-step counter samples, each followed by `END`."""
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
    return ["".join(_dumps(e) + END for e in events).encode()]


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
