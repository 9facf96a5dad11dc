"""Import PyTorch profiler (Kineto) Chrome-trace JSON: `.json`, `.json.gz`, `.pt.trace.json`.

The file is streamed (a 1M-kernel trace is ~6 GB of JSON; `json.load` of it needs > 20 GB): the
`traceEvents` array is decoded a few MB at a time and only the fields rooftop needs are kept, in
compact arrays. Joins (kernel -> runtime call by `correlation`, runtime call -> cpu_op by
`External id`, launch -> enclosing `user_annotation` ranges on its thread) are done afterwards.
Timestamps are exact: numbers are parsed as decimal text, never through a double, because new
Kineto writes `{us}.{ns:03}` relative to `baseTimeNanoseconds` and old Kineto writes epoch µs.
"""
from __future__ import annotations

import codecs
import json
import os
import re
import zlib
from array import array
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from rooftop.redact import redact, redact_names
from rooftop.trace import TraceError

Progress = Callable[[int, int], None]
CHUNK = 4 << 20
NULL = -(1 << 62)  # "unknown" in the integer accumulators, turned into null when the frame is built

GPU_KINDS = {"kernel": 0, "gpu_memcpy": 1, "gpu_memset": 2, "Kernel": 0}
KIND_NAMES = ("kernel", "memcpy", "memset")
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime"}
WANTED = {"cpu_op", "user_annotation", "gpu_user_annotation"} | RUNTIME_CATS | set(GPU_KINDS)


class KinetoError(TraceError):
    """A Kineto JSON trace could not be read."""


def _ns(v: Any) -> int:
    """µs as JSON text (from `parse_float=str`) or int -> int ns, exactly."""
    if type(v) is int:
        return v * 1000
    if type(v) is str:
        neg = v.startswith("-")
        s = v[1:] if neg else v
        whole, _, frac = s.partition(".")
        if len(frac) <= 3 and whole.isdigit() and (not frac or frac.isdigit()):
            out = int(whole) * 1000 + (int((frac + "00")[:3]) if frac else 0)
        else:  # exponents or sub-ns digits: rare, exact via Decimal
            try:
                out = int((Decimal(s) * 1000).to_integral_value())
            except InvalidOperation:
                return NULL
        return -out if neg else out
    if isinstance(v, float):
        return round(v * 1000)
    return NULL


def _int(v: Any) -> int:
    if type(v) is int:
        return v
    if type(v) is str:
        try:
            return int(float(v))
        except ValueError:
            return NULL
    return NULL


class _Columns:
    """Append-only columnar accumulators: array('q') per numeric field, interned strings."""

    def __init__(self, *fields: str):
        self.fields = fields
        for f in fields:
            setattr(self, f, array("q"))

    def __len__(self) -> int:
        return len(getattr(self, self.fields[0]))

    def np(self, f: str) -> np.ndarray:
        return np.frombuffer(getattr(self, f), dtype=np.int64) if len(self) else np.zeros(0, np.int64)


class _Interner(dict):
    def __missing__(self, key):
        self[key] = n = len(self)
        return n

    def values_list(self) -> list:
        out = [None] * len(self)
        for k, i in self.items():
            out[i] = k
        return out


class _Collector:
    """Keeps only the fields of the events rooftop needs."""

    def __init__(self):
        self.names = _Interner()
        self.threads = _Interner()
        self.shapes: dict[str, int] = {}
        self.shape_inputs: list[tuple] = []
        self.gpu = _Columns("kind", "name", "ts", "dur", "device", "stream", "corr", "ext", "gx", "gy", "gz",
                            "bx", "by", "bz", "regs", "smem", "nbytes")
        self.rt = _Columns("corr", "ext", "thread", "ts", "dur")
        self.ops = _Columns("ext", "thread", "ts", "dur", "name", "shape")
        self.ann = _Columns("thread", "ts", "dur", "name")
        self.gann = _Columns("device", "stream", "ts", "dur", "name")
        self.origin: int | None = None
        self.events = 0

    def add(self, events: list) -> None:
        names, threads = self.names, self.threads
        origin = self.origin
        for e in events:
            if type(e) is not dict or e.get("ph") != "X":
                continue
            cat = e.get("cat")
            if cat not in WANTED:
                continue
            # fast path: new Kineto writes µs with exactly 3 decimals, so dropping the dot gives ns
            ts, dur = e.get("ts"), e.get("dur", 0)
            ts = int(ts.replace(".", "")) if type(ts) is str and ts[-4:-3] == "." else _ns(ts)
            dur = int(dur.replace(".", "")) if type(dur) is str and dur[-4:-3] == "." else _ns(dur)
            if ts == NULL:
                continue
            args = e.get("args") or {}
            if cat == "cpu_op":
                o = self.ops
                o.ext.append(_int(args.get("External id")))
                o.thread.append(threads[(e.get("pid"), e.get("tid"))])
                o.ts.append(ts)
                o.dur.append(dur)
                o.name.append(names[e.get("name") or ""])
                dims = args.get("Input Dims")
                if dims is None:
                    o.shape.append(NULL)
                else:
                    inputs = (dims, args.get("Input type"), args.get("Concrete Inputs"))
                    key = repr(inputs)  # C-speed; equal inputs give equal text
                    sid = self.shapes.get(key)
                    if sid is None:
                        sid = self.shapes[key] = len(self.shapes)
                        self.shape_inputs.append(inputs)
                    o.shape.append(sid)
            elif cat in RUNTIME_CATS:
                corr = args.get("correlation")
                if corr is None:
                    continue
                r = self.rt
                r.corr.append(_int(corr))
                r.ext.append(_int(args.get("External id")))
                r.thread.append(threads[(e.get("pid"), e.get("tid"))])
                r.ts.append(ts)
                r.dur.append(dur)
            elif cat in GPU_KINDS:
                g = self.gpu
                g.kind.append(GPU_KINDS[cat])
                g.name.append(names[e.get("name") or ""])
                g.ts.append(ts)
                g.dur.append(dur)
                dev = args.get("device", e.get("pid"))
                g.device.append(_int(dev))
                g.stream.append(_int(args.get("stream", e.get("tid"))))
                g.corr.append(_int(args.get("correlation")))
                g.ext.append(_int(args.get("External id")))
                grid, block = args.get("grid"), args.get("block")
                for cols, v in (((g.gx, g.gy, g.gz), grid), ((g.bx, g.by, g.bz), block)):
                    ok = type(v) is list and len(v) == 3
                    for c, i in zip(cols, range(3)):
                        c.append(_int(v[i]) if ok else NULL)
                g.regs.append(_int(args.get("registers per thread")))
                g.smem.append(_int(args.get("shared memory")))
                g.nbytes.append(_int(args.get("bytes")))
            elif cat == "user_annotation":
                a = self.ann
                a.thread.append(threads[(e.get("pid"), e.get("tid"))])
                a.ts.append(ts)
                a.dur.append(dur)
                a.name.append(names[e.get("name") or ""])
            elif cat == "gpu_user_annotation":
                a = self.gann
                a.device.append(_int(e.get("pid")))
                a.stream.append(_int(e.get("tid")))
                a.ts.append(ts)
                a.dur.append(dur)
                a.name.append(names[e.get("name") or ""])
            else:
                continue
            self.events += 1
            if origin is None or ts < origin:
                origin = ts
        self.origin = origin


# --- streaming -----------------------------------------------------------------------------------

_WS = re.compile(r"[\s,]*")


class _Stream:
    """Text of a (possibly gzipped) file, refilled chunk by chunk, with the raw position for progress.

    Gzip is inflated with zlib directly: `GzipFile.read` drops what it had inflated when the
    stream turns out truncated, and a truncated trace should keep every complete event."""

    def __init__(self, path: Path, progress: Progress | None):
        self.path = path
        self.raw = open(path, "rb")
        self.total = os.fstat(self.raw.fileno()).st_size
        self.gz = self.raw.read(2) == b"\x1f\x8b"
        self.raw.seek(0)
        self.z = zlib.decompressobj(16 + zlib.MAX_WBITS) if self.gz else None
        self.dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.buf, self.pos, self.eof = "", 0, False
        self.truncated: str | None = None
        self.progress = progress

    def close(self):
        self.raw.close()

    def _bytes(self) -> bytes:
        while True:
            data = self.raw.read(CHUNK if not self.gz else CHUNK // 4)
            if not self.gz:
                return data
            if not data:
                if not self.z.eof:
                    self.truncated = "compressed stream ends early"
                return b""
            try:
                out = self.z.decompress(data)
                while self.z.eof and self.z.unused_data:  # concatenated gzip members
                    rest, self.z = self.z.unused_data, zlib.decompressobj(16 + zlib.MAX_WBITS)
                    out += self.z.decompress(rest)
            except zlib.error as exc:
                self.truncated = f"corrupt compressed data ({exc})"
                return b""
            if out:
                return out

    def more(self) -> bool:
        """Read one more chunk into the buffer; False at end of input."""
        if self.eof:
            return False
        data = self._bytes()
        self.buf = self.buf[self.pos:] + self.dec.decode(data, final=not data)
        self.pos = 0
        if not data:
            self.eof = True
        if self.progress:
            self.progress(min(self.raw.tell(), self.total), self.total)
        return bool(data)

    def skip_ws(self) -> str | None:
        """Skip whitespace and commas; the next character (None at end of input)."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return None


_DECODER = json.JSONDecoder(parse_float=str)
_scan = _DECODER.raw_decode


def _value(s: _Stream) -> Any:
    """Decode one JSON value at the cursor, reading more input until it is complete."""
    if s.skip_ws() is None:
        raise EOFError("file ends early")
    while True:
        try:
            obj, end = _scan(s.buf, s.pos)
            s.pos = end
            return obj
        except ValueError:
            if not s.more():
                raise


def _events(s: _Stream, sink: _Collector) -> None:
    """Stream the traceEvents array into `sink`. Batches of whole events are decoded by one
    `json.loads` each: a slice that parses as `[...]` necessarily ends at an event boundary."""
    loads = _DECODER.decode
    while True:
        c = s.skip_ws()
        if c is None:
            return
        if c == "]":
            s.pos += 1
            return
        buf, start = s.buf, s.pos
        cut, tries = len(buf), 0
        batch = None
        while tries < 4:
            cut = buf.rfind("},", start, cut)
            if cut < 0:
                break
            try:
                batch = loads("[" + buf[start:cut + 1] + "]")
                break
            except ValueError:
                tries += 1
        if batch is not None:
            s.pos = cut + 2
            sink.add(batch)
            continue
        if c != "{":
            raise ValueError(f"unexpected {c!r} in traceEvents")
        sink.add([_value(s)])  # one event, reading more input if needed


def _header(s: _Stream, sink: _Collector) -> dict:
    """Walk the top-level object; stream `traceEvents`, keep the other (small) keys."""
    if s.skip_ws() != "{":
        raise ValueError("not a JSON object")
    s.pos += 1
    head: dict = {}
    seen_events = False
    while True:
        c = s.skip_ws()
        if c is None:
            if not seen_events:
                raise ValueError("no traceEvents array")
            raise EOFError("file ends after traceEvents")
        if c == "}":
            break
        key = _value(s)
        if not isinstance(key, str):
            raise ValueError("bad key")
        if s.skip_ws() != ":":
            raise ValueError("expected ':'")
        s.pos += 1
        if key == "traceEvents":
            if s.skip_ws() != "[":
                raise ValueError("traceEvents is not an array")
            s.pos += 1
            seen_events = True
            _events(s, sink)
        else:
            head[key] = _value(s)
    if not seen_events:
        raise ValueError("no traceEvents array")
    return head


def read_kineto(path: str | os.PathLike, progress: Progress | None = None) -> tuple[pd.DataFrame, dict]:
    """Read one Kineto trace -> (rows for `rooftop.trace.to_table`, metadata document)."""
    path = Path(path)
    try:
        s = _Stream(path, progress)
    except OSError as exc:
        raise KinetoError(path, f"cannot read: {exc.strerror or exc}") from None
    sink = _Collector()
    warnings: list[str] = []
    head: dict = {}
    try:
        try:
            head = _header(s, sink)
        except (ValueError, EOFError, RecursionError) as exc:
            if not sink.events:
                what = s.truncated or str(exc) or exc.__class__.__name__
                raise KinetoError(path, f"not a readable Kineto trace: {what}",
                                  "expected PyTorch profiler JSON with a traceEvents array") from None
            lost = len(s.buf) - s.pos
            warnings.append(
                f"truncated trace ({s.truncated or exc}): kept {sink.events} complete events, dropped the "
                f"last {lost} bytes (an incomplete event); anything written after the cut is lost")
    finally:
        s.close()
    rows, meta = assemble(sink, head, path)
    meta["warnings"] = warnings + meta.get("warnings", [])
    if "baseTimeNanoseconds" not in head and "deviceProperties" in head and warnings:
        meta["warnings"].append("trailer lost: baseTimeNanoseconds unknown, absolute times unknown")
    return rows, redact(meta)


def rank_of(path: Path, head_rank: Any = None) -> int | None:
    if isinstance(head_rank, int):
        return head_rank
    m = re.search(r"rank[=_\-]?(\d+)", path.name, re.IGNORECASE)
    return int(m.group(1)) if m else None


KINETO_SUFFIXES = (".json", ".json.gz")


def rank_files(src: Path) -> list[Path]:
    return sorted(p for p in src.iterdir() if p.is_file() and p.name.endswith(KINETO_SUFFIXES))


def import_dir(src: str | os.PathLike, out: str | os.PathLike, progress: Progress | None = None) -> list[Path]:
    """A directory of per-rank Kineto files -> `OUT/rank=N/trace.parquet`, one per rank."""
    from rooftop.trace import write_trace

    src, out = Path(src), Path(out)
    files = rank_files(src)
    if not files:
        raise KinetoError(src, "directory holds no Kineto .json/.json.gz files")
    written = []
    for i, f in enumerate(files):
        rows, meta = read_kineto(f, progress)
        rank = meta.get("rank")
        if rank is None:
            rank = i
        written.append(write_trace(out / f"rank={rank}" / "trace.parquet", rows, meta))
    return written


# --- joins and rows ------------------------------------------------------------------------------

def _lookup(keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Index of the first row of `keys` equal to each query, -1 where none (or query unknown)."""
    out = np.full(len(queries), -1, dtype=np.int64)
    if not len(keys) or not len(queries):
        return out
    uniq, first = np.unique(keys, return_index=True)
    pos = np.searchsorted(uniq, queries).clip(0, len(uniq) - 1)
    hit = (uniq[pos] == queries) & (queries != NULL)
    out[hit] = first[pos[hit]]
    return out


def nest_intervals(ithr, ist, ien, ilabel, qthr, qt):
    """Nesting of intervals per thread, half-open [start, end).

    Returns (innermost interval index for each query or -1, path of each query, path of each
    interval), a path being the labels of the enclosing intervals, outermost first, joined by "/".
    One pass over intervals and queries sorted together (ties: intervals first, longer first)."""
    ni, nq = len(ist), len(qt)
    thr = np.concatenate([ithr, qthr])
    t = np.concatenate([ist, qt])
    flag = np.concatenate([np.zeros(ni, np.int8), np.ones(nq, np.int8)])
    neg = np.concatenate([-(ien - ist), np.zeros(nq, np.int64)])
    order = np.lexsort((neg, flag, t, thr))
    inner = np.full(nq, -1, dtype=np.int64)
    qpath: list = [None] * nq
    ipath: list = [None] * ni
    stack: list = []  # (end, index, path)
    cur = None
    thr_l, t_l, ien_l = thr.tolist(), t.tolist(), ien.tolist()
    for k in order.tolist():
        if thr_l[k] != cur:
            cur, stack = thr_l[k], []
        now = t_l[k]
        while stack and stack[-1][0] <= now:
            stack.pop()
        if k < ni:
            label = ilabel[k] if ilabel is not None else None
            path = label if not stack or label is None else f"{stack[-1][2]}/{label}"
            ipath[k] = path
            stack.append((ien_l[k], k, path))
        elif stack:
            q = k - ni
            inner[q] = stack[-1][1]
            qpath[q] = stack[-1][2]
    return inner, qpath, ipath


def _masked(a: np.ndarray, dtype: str = "Int64"):
    return pd.arrays.IntegerArray(np.where(a == NULL, 0, a), a == NULL).astype(dtype)


def _op_costs(op_names: list, shape_keys: list) -> tuple[np.ndarray, np.ndarray]:
    """(flops, bytes) per op instance from rooftop.opmodel; NaN where unknown."""
    n = len(op_names)
    flops, nbytes = np.full(n, np.nan), np.full(n, np.nan)
    try:
        from rooftop.opmodel import op_cost
    except ImportError:
        return flops, nbytes
    cache: dict = {}
    for i, (name, key) in enumerate(zip(op_names, shape_keys)):
        if key is None:
            continue
        ck = (name, repr(key))
        if ck not in cache:
            dims, types, concrete = key
            try:
                cache[ck] = op_cost(name, dims, types, concrete)
            except (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError):
                cache[ck] = None  # shapes the model cannot interpret: unknown, not an error
        c = cache[ck]
        if c:
            flops[i], nbytes[i] = (np.nan if v is None else float(v) for v in c)
    return flops, nbytes


def _device_meta(props: Any, dev: int | None) -> dict:
    entry = None
    if isinstance(props, list):
        entry = next((p for p in props if isinstance(p, dict) and p.get("id") == dev), None)
    if not entry:
        return {"index": dev, "name": None}
    cc = (f"{entry['computeMajor']}.{entry['computeMinor']}"
          if "computeMajor" in entry and "computeMinor" in entry else None)
    return {"index": dev, "name": entry.get("name"), "cc": cc, "sms": entry.get("numSms"),
            "memory_bytes": entry.get("totalGlobalMem")}


def assemble(sink: _Collector, head: dict, path: Path) -> tuple[pd.DataFrame, dict]:
    names = redact_names(sink.names.values_list())  # paths and ops are built from these
    g, rt, ops, ann, gann = sink.gpu, sink.rt, sink.ops, sink.ann, sink.gann
    origin = sink.origin or 0
    gts, gdur, gcorr = g.np("ts"), g.np("dur"), g.np("corr")
    # kernel -> runtime call (kernels rarely carry External id) -> cpu_op
    ri = _lookup(rt.np("corr"), gcorr)
    has_rt = ri >= 0
    ext = g.np("ext").copy()
    rt_ext = rt.np("ext")
    ext[has_rt] = np.where(rt_ext[ri[has_rt]] != NULL, rt_ext[ri[has_rt]], ext[has_rt])
    oi = _lookup(ops.np("ext"), ext)
    launch_thr = np.where(has_rt, rt.np("thread")[ri.clip(0)] if len(rt) else NULL, NULL)
    launch_t = np.where(has_rt, rt.np("ts")[ri.clip(0)] if len(rt) else NULL, NULL)
    # no External id: the innermost cpu_op around the launch on its thread
    miss = np.flatnonzero((oi < 0) & has_rt)
    if len(miss) and len(ops):
        oth = ops.np("thread")
        keep = np.flatnonzero(np.isin(oth, launch_thr[miss]))
        ost = ops.np("ts")[keep]
        inner, _, _ = nest_intervals(oth[keep], ost, ost + ops.np("dur")[keep], None, launch_thr[miss], launch_t[miss])
        oi[miss] = np.where(inner >= 0, keep[inner.clip(0)], -1)
    # path: user_annotation ranges around the launch on its thread, outermost first
    ast, aen = ann.np("ts"), ann.np("ts") + ann.np("dur")
    alabel = [names[i] for i in ann.name]
    q = np.flatnonzero(has_rt)
    _, qpath, apath = nest_intervals(ann.np("thread"), ast, aen, alabel, launch_thr[q], launch_t[q])
    gpath: list = [None] * len(g)
    for j, p in zip(q.tolist(), qpath):
        gpath[j] = p
    # fallback: gpu_user_annotation spans on the kernel's (device, stream)
    left = np.array([i for i, p in enumerate(gpath) if p is None], dtype=np.int64)
    if len(left) and len(gann):
        key = lambda d, s: d * (1 << 32) + s  # noqa: E731
        gst = gann.np("ts")
        _, fpath, _ = nest_intervals(key(gann.np("device"), gann.np("stream")), gst, gst + gann.np("dur"),
                             [names[i] for i in gann.name], key(g.np("device")[left], g.np("stream")[left]),
                             gts[left])
        for j, p in zip(left.tolist(), fpath):
            gpath[j] = p
    # analytic cost of each launching op instance, split across its kernels by duration
    op_name = [None] * len(g)
    mflops, mbytes = np.full(len(g), np.nan), np.full(len(g), np.nan)
    with_op = np.flatnonzero(oi >= 0)
    if len(with_op):
        inst, local = np.unique(oi[with_op], return_inverse=True)
        onames = ops.np("name")[inst]
        oshape = ops.np("shape")[inst]
        shapes = sink.shape_inputs
        fl, by = _op_costs([names[i] for i in onames], [shapes[s] if s != NULL else None for s in oshape])
        mflops[with_op], mbytes[with_op] = fl[local], by[local]
        # an op that launched several kernels: its cost split by their durations (DESIGN.md)
        cnt = np.bincount(local, minlength=len(inst))
        multi = np.flatnonzero((cnt[local] > 1) & ~(np.isnan(fl[local]) & np.isnan(by[local])))
        if len(multi):
            from rooftop.opmodel import split_by_duration

            rows_of = pd.Series(with_op[multi]).groupby(local[multi]).agg(list)
            for o, members in rows_of.items():
                d = gdur[members].tolist()
                for tot, out in ((fl[o], mflops), (by[o], mbytes)):
                    parts = split_by_duration(None if np.isnan(tot) else float(tot), d)
                    out[members] = [np.nan if v is None else v for v in parts]
        for j, o in zip(with_op.tolist(), onames[local].tolist()):
            op_name[j] = names[o]
    nb = g.np("nbytes")
    copy = (g.np("kind") > 0) & np.isnan(mbytes) & (nb != NULL)
    mbytes[copy] = nb[copy]  # memcpy/memset: the bytes moved, as recorded by CUPTI
    shape3 = lambda a, b, c: [None if x == NULL else [x, y, z]  # noqa: E731
                              for x, y, z in zip(a.tolist(), b.tolist(), c.tolist())]
    gpu_rows = pd.DataFrame({
        "kind": [KIND_NAMES[k] for k in g.kind], "name": [names[i] for i in g.name],
        "start_ns": gts - origin, "dur_ns": gdur, "device": _masked(g.np("device"), "Int32"),
        "stream": _masked(g.np("stream"), "Int32"), "correlation": _masked(gcorr), "path": gpath,
        "op": op_name, "grid": shape3(g.np("gx"), g.np("gy"), g.np("gz")),
        "block": shape3(g.np("bx"), g.np("by"), g.np("bz")), "registers": _masked(g.np("regs"), "Int32"),
        "shared_mem": _masked(g.np("smem"), "Int32"), "model_flops": mflops, "model_bytes": mbytes,
    })
    range_rows = pd.DataFrame({"kind": "range", "name": alabel, "start_ns": ast - origin,
                               "dur_ns": ann.np("dur"), "path": apath})
    rows = pd.concat([gpu_rows, range_rows], ignore_index=True) if len(range_rows) else gpu_rows
    rows = rows.sort_values("start_ns", kind="stable").reset_index(drop=True)
    rows["id"] = np.arange(len(rows), dtype=np.int64)
    for col in ("path", "op"):  # concat turns None into NaN; unknown text stays None
        rows[col] = rows[col].astype(object).where(rows[col].notna(), None)
    return rows, _meta(head, path, sink, gpu_rows, range_rows)


def _meta(head: dict, path: Path, sink: _Collector, gpu_rows: pd.DataFrame, range_rows: pd.DataFrame) -> dict:
    from rooftop.names import parse_path

    kernels = gpu_rows[gpu_rows["kind"] == "kernel"]
    devs = kernels["device"].dropna()
    dev = int(devs.mode().iloc[0]) if len(devs) else None
    dist = head.get("distributedInfo") if isinstance(head.get("distributedInfo"), dict) else {}
    base = head.get("baseTimeNanoseconds")
    base = base if isinstance(base, int) else None
    relative = base is not None or "deviceProperties" in head  # new Kineto: ts relative to the base
    origin = sink.origin
    origin_ns = None if origin is None else (origin + base if base is not None else (None if relative else origin))
    steps, seen = [], set()
    for p in range_rows["path"] if len(range_rows) else []:
        phase, step, _ = parse_path(p)
        if step is not None and (phase, step) not in seen:
            seen.add((phase, step))
            steps.append({"phase": phase, "index": step})
    keep = ("schemaVersion", "cupti_version", "cuda_runtime_version", "cuda_driver_version",
            "displayTimeUnit", "record_shapes", "with_stack", "with_flops")
    source = {"tool": "kineto", "importer": "rooftop.collectors.kineto", "file": path.name,
              **{k: head[k] for k in keep if k in head and isinstance(head[k], (str, int, float))},
              "base_time_ns": base}
    return {
        "source": source,
        "device": _device_meta(head.get("deviceProperties"), dev),
        "rank": dist.get("rank") if isinstance(dist.get("rank"), int) else None,
        "world_size": dist.get("world_size") if isinstance(dist.get("world_size"), int) else None,
        "origin_ns": origin_ns,  # absolute epoch ns of start_ns == 0, where the file says
        "steps": steps, "modeled": False, "warnings": [],
    }
