"""Kineto events -> compact columns: only the fields rooftop needs, of only the events it needs.

Fastest path: the compiled decoder (`_kineto_fast`, built at install where a C compiler is found)
reads a batch in the plain subset of what the typed path takes straight into columns, with no
Python object per event; any other batch it leaves to the paths below, which read it as before.

Fast path: `msgspec` decodes a whole batch of events into typed structs in C, skipping every
field not declared below, and the columns are built from the batch at once. Anything the typed
decoder rejects (a string where a number was expected, a grid of two numbers, ...) or whose
timestamps cannot be proven exact takes the exact path instead: the stdlib decoder with numbers
kept as text and one event at a time, as before (`_kineto_exact`). Every path gives the same
columns (`_kineto_values`: what is kept of an event, and how).
"""
from __future__ import annotations

import os
from typing import Any, Union

import numpy as np

from rooftop import speedups

from collectors.readers._jsonstream import DECODER
from collectors.readers._kineto_exact import ExactBatch
from collectors.readers._kineto_values import GPU_KINDS, NULL, RUNTIME_CATS, WANTED, Columns, Interner, _ints, _shapes, exact_ns

# msgspec is imported, and the typed path's types made, on the first batch that needs them
# (`_typed`): time that a read by the compiled decoder never spends before its workers start.
msgspec: Any = ...  # (...: not imported yet; None: turned off (ROOFTOP_MSGSPEC=0, tests), the exact path alone reads every file)

try:
    from collectors.readers import _kineto_fast
except ImportError:  # not built (no C compiler at install): msgspec's typed path reads every batch
    _kineto_fast = None
if not speedups.on("COMPILED"):  # off by choice (to compare, or to rule it out: rooftop/speedups.py)
    _kineto_fast = None


class _Inexact(Exception):
    """A typed batch whose timestamps need the exact path."""


_TYPED: Any = None  # the typed path's decoder and types, once made (`_typed`)


def _typed() -> Any:
    """The typed path's decoder and types (`decoder`, `Event`, `noargs`, `null_raw`), made on first
    use; None with msgspec turned off."""
    global msgspec, _TYPED
    if msgspec is ...:
        if speedups.on("MSGSPEC"):
            import msgspec as module  # (a dependency)
        else:  # off by choice: the exact path reads every batch
            module = None
        msgspec = module
    if msgspec is None:
        return None
    if _TYPED is None:
        _TYPED = _typed_types()
    return _TYPED


def before_fork() -> None:
    """Where the compiled decoder is off, make the typed path's types now: workers forked after
    this inherit them (each would otherwise import and make its own)."""
    if _kineto_fast is None:
        _typed()


# The Chrome trace format's other phases, decoded without their fields: a launch's two flow
# events ("s", "f") are a third of a Kineto trace's events, and skipping their fields takes
# ~14% off the typed decode. An event of another phase, or without one, fails its batch's typed
# decode, which the exact path then reads (as it reads any event of unexpected types).
OTHER_PHASES = ("B", "E", "i", "I", "C", "b", "n", "e", "s", "t", "f", "P", "O", "N", "D", "M", "V", "v",
                "R", "c", "(", ")")


def _typed_types() -> Any:
    # (made by `defstruct` with the types themselves: this module's postponed annotations would be
    # looked up among its globals, not this function's names)
    from types import SimpleNamespace

    from msgspec import Raw, defstruct, field

    int_like = int | str | None
    absent = Raw(b"")  # Raw takes no union: a missing field is the empty Raw
    args = defstruct("Args", [
        ("ext", int_like, field(name="External id", default=NULL)),
        ("corr", int_like, field(name="correlation", default=NULL)),
        ("device", int_like, NULL), ("stream", int_like, NULL),
        ("grid", Any, None),  # Any: Triton's cpu_op kwargs carry a "grid" of their own (a string)
        ("block", Any, None),
        ("regs", int_like, field(name="registers per thread", default=NULL)),
        ("smem", int_like, field(name="shared memory", default=NULL)),
        ("nbytes", int_like, field(name="bytes", default=NULL)),
        # kept as their JSON text
        ("dims", Raw, field(name="Input Dims", default=absent)),
        ("types", Raw, field(name="Input type", default=absent)),
        ("concrete", Raw, field(name="Concrete Inputs", default=absent))], gc=False)
    # A complete event ("ph": "X"), the only phase rooftop reads.
    event = defstruct("Event", [("cat", str | None, None), ("name", str | None, None), ("pid", int | str | None, None),
                                ("tid", int | str | None, None), ("ts", float | None, None), ("dur", float | None, 0.0),
                                ("args", args | None, None)], tag_field="ph", tag="X", gc=False)
    other = tuple(defstruct(f"Phase{i}", [], tag_field="ph", tag=p, gc=False) for i, p in enumerate(OTHER_PHASES))
    return SimpleNamespace(decoder=msgspec.json.Decoder(list[Union[(event, *other)]]), Event=event,
                           noargs=args(), null_raw=Raw(b"null"))


class Collector:
    """Keeps only the fields of the events rooftop needs, as columns (see module docstring)."""

    def __init__(self):
        self.names = Interner()
        self.threads = Interner()
        self.shapes: dict = {}
        self.shape_inputs: list[tuple] = []
        self.gpu = Columns("kind", "name", "ts", "dur", "device", "stream", "corr", "ext", "gx", "gy", "gz",
                           "bx", "by", "bz", "regs", "smem", "nbytes")
        self.rt = Columns("corr", "ext", "thread", "ts", "dur", "name")
        self.ops = Columns("ext", "thread", "ts", "dur", "name", "shape")
        self.ann = Columns("thread", "ts", "dur", "name", "ext")
        self.gann = Columns("device", "stream", "ts", "dur", "name", "ext")
        # Python-stack frames that can mark a step (rooftop.trace.steps), never the other ~90% of a with_stack trace
        self.py = Columns("thread", "ts", "dur", "name")
        self._py_wanted: dict = {}
        self.origin: int | None = None
        self.events = 0
        self.untimed = 0  # wanted events dropped for a timestamp that is no number (NaN, 1e300, text)
        self.typed = msgspec is not None
        self.compiled = _kineto_fast is not None

    # --- the sink protocol of _jsonstream ---

    def add_text(self, text: str) -> None:
        self._add_batch(_kineto_fast.decode(text) if self.compiled else None, lambda: text)

    def add_span(self, buf: str, start: int, stop: int) -> None:
        """`add_text("[" + buf[start:stop] + "]")`, without making that text where the compiled
        decoder takes the batch from `buf` itself (ASCII text, where characters are its bytes):
        building every batch's text adds up at 1M kernels."""
        cols = _kineto_fast.decode(buf, start, stop) if self.compiled and buf.isascii() else None
        self._add_batch(cols, lambda: "[" + buf[start:stop] + "]")

    def add_bytes(self, data: bytes, start: int, stop: int) -> bool:
        """`add_span` of bytes as read from the file, where the compiled decoder takes them whole
        (ASCII, its plain subset); False, with nothing added, where it does not (the caller then
        reads them as text)."""
        cols = _kineto_fast.decode(data, start, stop) if self.compiled else None
        if cols is None:
            return False
        self._add_batch(cols, lambda: "[" + data[start:stop].decode("ascii") + "]")
        return True

    def _add_batch(self, cols: dict | None, text_of) -> None:
        """A batch: the compiled decoder's columns of it, or (None: not its plain subset, or no
        decoder) its text, `text_of()`, read by the typed and exact paths."""
        if cols is not None:
            try:
                return self._add_compiled(cols)
            except _Inexact:
                return self.add_objects(DECODER.decode(text_of()))
        text = text_of()
        typed = _typed() if self.typed else None
        if typed is not None:
            try:
                batch = typed.decoder.decode(text)
            except msgspec.ValidationError:
                pass  # valid JSON of unexpected types: the exact path below
            except msgspec.DecodeError as exc:
                raise ValueError(str(exc)) from None
            else:
                try:
                    return self._add_typed(batch, typed)
                except _Inexact:
                    pass
        self.add_objects(DECODER.decode(text))

    def add_objects(self, events: list) -> None:
        ExactBatch(self).add(events)

    # --- fast path ---

    def _add_typed(self, batch: list, typed: Any) -> None:
        groups: dict[str, list] = {c: [] for c in WANTED}
        other: list = []
        get = groups.get
        Event = typed.Event
        for e in batch:  # the one per-event Python loop of the fast path
            (get(e.cat, other) if type(e) is Event else other).append(e)
        # convert everything first: an _Inexact raised below must leave the columns untouched
        out, untimed = [], 0
        for cat, evs in groups.items():
            if not evs:
                continue
            ts = exact_ns(np.array([e.ts for e in evs], dtype=np.float64))
            dur = exact_ns(np.array([e.dur for e in evs], dtype=np.float64))
            if ts is None or dur is None:
                raise _Inexact
            keep = ts != NULL
            untimed += int((~keep).sum())
            if not keep.all():
                evs = [e for e, k in zip(evs, keep.tolist()) if k]
                ts, dur = ts[keep], dur[keep]
            if evs:
                out.append((cat, evs, ts, dur))
        self._append(out, untimed, lambda cat, evs, ts, dur: self._columns(cat, evs, ts, dur, typed))

    def _append(self, converted: list, untimed: int, columns) -> None:
        """Append a batch's converted categories (`columns(cat, events, ts, dur)` appends one and
        gives the start times it kept), once none of them can fail any more."""
        self.untimed += untimed
        for cat, evs, ts, dur in converted:
            ts = columns(cat, evs, ts, dur)
            self.events += len(ts)
            if not len(ts):
                continue
            lo = int(ts.min())
            if self.origin is None or lo < self.origin:
                self.origin = lo

    def _columns(self, cat: str, evs: list, ts: np.ndarray, dur: np.ndarray, typed: Any) -> np.ndarray:
        """Append one category's events (the typed path's, `typed`: its types); the start times of
        those kept."""
        names, threads = self.names, self.threads
        noargs, null_raw = typed.noargs, typed.null_raw
        args = [e.args or noargs for e in evs]
        if cat == "cpu_op":
            shapes, shape_ids, joined = self.shapes, [], _SHAPE_SEP.join
            for a in args:
                dims = a.dims
                if not dims or dims == null_raw:  # no shapes recorded
                    shape_ids.append(NULL)
                    continue
                # the three texts as one key, one allocation (NUL never occurs raw in JSON text)
                key = joined((dims, a.types, a.concrete))
                sid = shapes.get(key)
                if sid is None:
                    sid = shapes[key] = len(shapes)
                    self.shape_inputs.append(tuple(DECODER.decode(bytes(k).decode("utf-8", "replace")) if k else None
                                                   for k in (dims, a.types, a.concrete)))
                shape_ids.append(sid)
            self.ops.extend({"ext": _ints([a.ext for a in args]), "thread": [threads[(e.pid, e.tid)] for e in evs],
                             "ts": ts, "dur": dur, "name": [names[e.name or ""] for e in evs], "shape": shape_ids})
        elif cat in RUNTIME_CATS:
            corr = _ints([a.corr for a in args])
            keep = corr != NULL  # a runtime call without correlation cannot be joined
            sel = np.flatnonzero(keep)
            self.rt.extend({"corr": corr[keep], "ext": _ints([args[i].ext for i in sel.tolist()]),
                            "thread": [threads[(evs[i].pid, evs[i].tid)] for i in sel.tolist()],
                            "ts": ts[keep], "dur": dur[keep], "name": [names[evs[i].name or ""] for i in sel.tolist()]})
            return ts[keep]
        elif cat in GPU_KINDS:
            grid, block = _shapes([a.grid for a in args]), _shapes([a.block for a in args])
            dev = _ints([e.pid if a.device == NULL else a.device for e, a in zip(evs, args)])
            stream = _ints([e.tid if a.stream == NULL else a.stream for e, a in zip(evs, args)])
            self.gpu.extend({
                "kind": np.full(len(evs), GPU_KINDS[cat]), "name": [names[e.name or ""] for e in evs],
                "ts": ts, "dur": dur, "device": dev, "stream": stream, "corr": _ints([a.corr for a in args]),
                "ext": _ints([a.ext for a in args]), "gx": grid[:, 0], "gy": grid[:, 1], "gz": grid[:, 2],
                "bx": block[:, 0], "by": block[:, 1], "bz": block[:, 2], "regs": _ints([a.regs for a in args]),
                "smem": _ints([a.smem for a in args]), "nbytes": _ints([a.nbytes for a in args])})
        elif cat == "user_annotation":
            self.ann.extend({"thread": [threads[(e.pid, e.tid)] for e in evs], "ts": ts, "dur": dur,
                             "name": [names[e.name or ""] for e in evs], "ext": _ints([a.ext for a in args])})
        elif cat == "python_function":
            keep = [self.wanted_frame(e.name) for e in evs]
            sel = [i for i, k in enumerate(keep) if k]
            self.py.extend({"thread": [threads[(evs[i].pid, evs[i].tid)] for i in sel], "ts": ts[sel],
                            "dur": dur[sel], "name": [names[evs[i].name] for i in sel]})
            return ts[sel]
        else:  # gpu_user_annotation
            self.gann.extend({"device": _ints([e.pid for e in evs]), "stream": _ints([e.tid for e in evs]),
                              "ts": ts, "dur": dur, "name": [names[e.name or ""] for e in evs],
                              "ext": _ints([a.ext for a in args])})
        return ts

    # --- fastest path: the compiled decoder's columns (the same columns `_columns` makes) ---

    def _add_compiled(self, cols: dict) -> None:
        out, untimed = [], 0
        for cat in WANTED:  # (the order `_add_typed` takes the categories in: the same ids are given)
            g = cols.get(cat)
            if g is None:
                continue
            ts = exact_ns(np.frombuffer(g["ts"], np.float64))
            dur = exact_ns(np.frombuffer(g["dur"], np.float64))
            if ts is None or dur is None:
                raise _Inexact
            keep = ts != NULL
            rows = None if keep.all() else np.flatnonzero(keep)
            if rows is not None:
                untimed += len(keep) - len(rows)
                ts, dur = ts[rows], dur[rows]
            if len(ts):
                out.append((cat, _Batch(g, rows), ts, dur))
        self._append(out, untimed, self._compiled_columns)

    def _compiled_columns(self, cat: str, g: "_Batch", ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
        """`_columns` of one category's compiled columns: the start times of the events kept."""
        if cat in RUNTIME_CATS:
            corr = g.ints("corr")
            keep = corr != NULL  # a runtime call without correlation cannot be joined
            if not keep.all():
                g = g.subset(np.flatnonzero(keep))
                corr, ts, dur = corr[keep], ts[keep], dur[keep]
            self.rt.extend({"corr": corr, "ext": g.ints("ext"), "thread": g.interned("thread", self.threads),
                            "ts": ts, "dur": dur, "name": g.interned("name", self.names, _text)})
            return ts
        if cat == "python_function":
            wanted = np.array([self.wanted_frame(n) for n in g.values("name")], dtype=bool)
            keep = wanted[g.ids("name")] if len(wanted) else np.zeros(len(ts), bool)
            g = g.subset(np.flatnonzero(keep))
            ts = ts[keep]
            self.py.extend({"thread": g.interned("thread", self.threads), "ts": ts, "dur": dur[keep],
                            "name": g.interned("name", self.names)})
            return ts
        names = g.interned("name", self.names, _text)
        if cat == "cpu_op":
            self.ops.extend({"ext": g.ints("ext"), "thread": g.interned("thread", self.threads), "ts": ts,
                             "dur": dur, "name": names, "shape": self._compiled_shapes(g)})
        elif cat in GPU_KINDS:
            self.gpu.extend({"kind": np.full(len(ts), GPU_KINDS[cat]), "name": names, "ts": ts, "dur": dur,
                             **{f: g.ints(f) for f in ("device", "stream", "corr", "ext", "gx", "gy", "gz",
                                                       "bx", "by", "bz", "regs", "smem", "nbytes")}})
        elif cat == "user_annotation":
            self.ann.extend({"thread": g.interned("thread", self.threads), "ts": ts, "dur": dur, "name": names,
                             "ext": g.ints("ext")})
        else:  # gpu_user_annotation: device and stream are the compiled pid and tid
            self.gann.extend({"device": g.ints("device"), "stream": g.ints("stream"), "ts": ts, "dur": dur,
                              "name": names, "ext": g.ints("ext")})
        return ts

    def _compiled_shapes(self, g: "_Batch") -> np.ndarray:
        """The shape ids of compiled cpu_op rows (keys as `_columns` makes them: the three texts
        joined by NUL), new keys numbered in order of first appearance."""
        local = g.ids("shape")
        keys = g.values("shape")
        known = local >= 0
        if not known.any():
            return np.full(len(local), NULL, dtype=np.int64)
        sid = np.full(len(keys), NULL, dtype=np.int64)
        shapes = self.shapes
        for k in _first_seen(local[known], len(keys), g.rows is None):
            key = keys[k]
            s = shapes.get(key)
            if s is None:
                s = shapes[key] = len(shapes)
                self.shape_inputs.append(tuple(DECODER.decode(part.decode("utf-8", "replace")) if part else None
                                               for part in key.split(_SHAPE_SEP)))
            sid[k] = s
        return np.where(known, sid[np.where(known, local, 0)], NULL)

    def wanted_frame(self, name: Any) -> bool:
        """A Python frame that can mark a step; decided once per distinct name."""
        if type(name) is not str:
            return False
        hit = self._py_wanted.get(name)
        if hit is None:
            from rooftop.trace.steps import wanted_python_frame
            hit = self._py_wanted[name] = wanted_python_frame(name)
        return hit


    # --- merging the collectors of batches decoded in other processes (_kineto_parallel) ---

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        for k, v in state.items():
            if isinstance(v, Columns):  # send only the filled part of the grown arrays
                state[k] = {f: v.np(f) for f in v.fields}
        return state

    def __setstate__(self, state: dict) -> None:
        fresh = Collector()
        for k, v in state.items():
            if isinstance(getattr(fresh, k, None), Columns):
                cols = getattr(fresh, k)
                if len(next(iter(v.values()), ())):
                    cols.adopt(v)  # (unpickled arrays: this process's own, no copy needed)
                state[k] = cols
        self.__dict__.update(state)

    def merge(self, other: "Collector") -> None:
        """Append another collector's events after this one's, as if they had been added here:
        interned ids (columns `name`, `thread`, `shape`) are renumbered into this one's tables."""
        names = np.array([self.names[k] for k in other.names.values_list()], dtype=np.int64)
        threads = np.array([self.threads[k] for k in other.threads.values_list()], dtype=np.int64)
        shapes = np.empty(len(other.shapes), dtype=np.int64)
        for key, sid in other.shapes.items():
            mine = self.shapes.get(key)
            if mine is None:
                mine = self.shapes[key] = len(self.shapes)
                self.shape_inputs.append(other.shape_inputs[sid])
            shapes[sid] = mine
        remap = {"name": names, "thread": threads, "shape": shapes}
        for attr, cols in vars(other).items():
            if not isinstance(cols, Columns) or not len(cols):
                continue
            out = {}
            for f in cols.fields:
                a = cols.np(f)
                table = remap.get(f)
                if table is not None:
                    known = a != NULL
                    a = np.where(known, table[np.where(known, a, 0)], NULL) if len(table) else a
                out[f] = a
            getattr(self, attr).extend(out)
        if other.origin is not None and (self.origin is None or other.origin < self.origin):
            self.origin = other.origin
        self.events += other.events
        self.untimed += other.untimed


_SHAPE_SEP = b"\0"  # (NUL never occurs raw in JSON text)


def _text(v: Any) -> str:
    return v or ""  # a name: None (absent, null) is no name, as in `_columns`


def _first_seen(local: np.ndarray, n: int, in_order: bool) -> list:
    """The distinct values of `local` (ids below `n`) in order of first appearance. `in_order`:
    the compiled decoder numbered them so, and no row was dropped since (then it is 0..n-1)."""
    if in_order:
        return list(range(n))
    uniq, first = np.unique(local, return_index=True)
    return uniq[np.argsort(first, kind="stable")].tolist()


class _Batch:
    """One category's columns from the compiled decoder, optionally cut to some of its rows."""

    _VALUES = {"name": "names", "thread": "threads", "shape": "shapes"}  # (ids are int32)

    def __init__(self, cols: dict, rows: np.ndarray | None):
        self.cols, self.rows = cols, rows

    def subset(self, keep: np.ndarray) -> "_Batch":
        return _Batch(self.cols, keep if self.rows is None else self.rows[keep])

    def _column(self, f: str, dtype) -> np.ndarray:
        a = np.frombuffer(self.cols[f], dtype)
        return a if self.rows is None else a[self.rows]

    def ints(self, f: str) -> np.ndarray:
        return self._column(f, np.int64)

    def ids(self, f: str) -> np.ndarray:
        return self._column(f, np.int32)

    def values(self, f: str) -> list:
        return self.cols[self._VALUES[f]]

    def interned(self, f: str, table: Interner, key=None) -> np.ndarray:
        """Column `f`'s values as ids of `table`, new ones numbered in order of first appearance
        (as interning them one event at a time numbers them)."""
        local, values = self.ids(f), self.values(f)
        if not len(local):
            return np.empty(0, dtype=np.int64)
        ids = np.zeros(len(values), dtype=np.int64)
        for k in _first_seen(local, len(values), self.rows is None):
            ids[k] = table[values[k] if key is None else key(values[k])]
        return ids[local]
