"""Kineto columns -> rooftop rows: the joins.

kernel -> runtime call by `correlation`; runtime call -> cpu_op by `External id` (else the innermost
cpu_op around the launch on its thread); launch -> the `user_annotation` ranges around it on its
thread (else the `gpu_user_annotation` spans on the kernel's stream); GPU work -> the step whose
GPU window it starts in (rooftop.trace.steps: markers among the annotations, else Python frames; windows
from the marker's GPU spans, matched by `External id`, and its launches). A CPU-only trace (no GPU
activity) gets one `op` row per outermost cpu_op instead, as the collector always wrote on a CPU.
Vectorised with numpy; the only Python loops run over interval nestings, once per range or launch.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from rooftop.trace import steps as st
from rooftop.trace.codes import categorical, first_rows
from rooftop.trace.paired import built
from rooftop.trace.redact import redact_names

from collectors.readers._kineto_events import Collector
from collectors.readers._kineto_runtime import runtime_rows
from collectors.readers._kineto_values import KIND_NAMES, NULL, first_index as _lookup
from collectors.readers.kineto_ranges import OP_DTYPES, device_meta, op_dtype_codes
from collectors.readers.nesting import MAX_PATH_CHARS, MAX_PATH_DEPTH, clean_text, nest_intervals


def _masked(a: np.ndarray, dtype: str = "Int64"):
    out = pd.arrays.IntegerArray(np.where(a == NULL, 0, a), a == NULL)
    if dtype == "Int32" and len(a) and ((a != NULL) & ((a < -(2 ** 31)) | (a >= 2 ** 31))).any():
        return out  # kept as Int64 (never wrapped): the importer drops the impossible events, saying so
    return out.astype(dtype)


def _op_costs(name_ids: np.ndarray, shape_ids: np.ndarray, name_of: np.ndarray,
              shapes: list) -> tuple[np.ndarray, np.ndarray]:
    """(flops, bytes) per op instance from rooftop.llm.op_cost, computed once per distinct (op name,
    input shapes); NaN where unknown."""
    n = len(name_ids)
    flops, nbytes = np.full(n, np.nan), np.full(n, np.nan)
    has = np.flatnonzero(shape_ids != NULL)
    from rooftop.llm.op_cost import op_cost

    if not len(has):
        return flops, nbytes
    pairs, inverse = _distinct_rows(np.stack([name_ids[has], shape_ids[has]], axis=1))
    fl, by = np.full(len(pairs), np.nan), np.full(len(pairs), np.nan)
    for j, (ni, si) in enumerate(pairs.tolist()):
        dims, types, concrete = shapes[si]
        try:
            c = op_cost(name_of[ni], dims, types, concrete)
        except (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError):
            c = None  # shapes the model cannot interpret: unknown, not an error
        if c:
            fl[j], by[j] = (np.nan if v is None else float(v) for v in c)
    flops[has], nbytes[has] = fl[inverse], by[inverse]
    return flops, nbytes


def _distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rows in order of first appearance, index of each row's among them) for an (n, k)
    int64 array: hashing, O(n). (`np.unique(axis=0)` sorts rows as opaque records: ~20x slower at
    1M rows.) Each column is factorized and the codes combined pairwise, re-factorized so the key
    stays below n**2."""
    if not len(rows):
        return rows.reshape(0, rows.shape[1]), np.zeros(0, dtype=np.int64)
    key, _ = pd.factorize(rows[:, 0])
    for c in range(1, rows.shape[1]):
        codes, vals = pd.factorize(rows[:, c])
        key, _ = pd.factorize(key.astype(np.int64) * len(vals) + codes)
    inverse = key.astype(np.int64)
    return rows[first_rows(inverse)], inverse


def _device_meta(props: Any, dev: int | None) -> dict:
    """deviceProperties name the device, even without kernel rows (kineto_ranges.device_meta)."""
    return device_meta(props, dev)


def _shape3(g, prefix: str) -> tuple[np.ndarray, np.ndarray]:
    """Launch shape columns -> (distinct [x, y, z] rows, int64; each row's index among them, -1
    where a part is unknown)."""
    xyz = np.stack([g.np(prefix + a) for a in "xyz"], axis=1)
    uniq, inverse = _distinct_rows(xyz)
    unknown = (uniq == NULL).any(axis=1)
    if unknown.any():
        inverse = np.where(unknown[inverse], -1, inverse)
    return uniq, inverse


def _shape_column(shapes: tuple[np.ndarray, np.ndarray], n_none: int, order: np.ndarray) -> pd.arrays.ArrowExtensionArray:
    """Launch shapes of the kernels (`_shape3`), then `n_none` rows without one, taken in `order`,
    as Arrow fixed-size lists: conforming them is then a cast, not a Python list per distinct object
    looked up by identity per row."""
    uniq, inverse = shapes
    table = np.vstack([uniq.reshape(-1, 3), np.zeros((1, 3), np.int64)])  # the last row: no shape (zeros
    # under a null list: a cast checks the values a null hides too)
    codes = np.concatenate([inverse, np.full(n_none, -1, np.int64)])[order]
    known = codes >= 0
    rows = np.where(known, codes, len(table) - 1)
    xyz = np.empty((len(rows), 3), np.int64)
    for j in range(3):  # a column at a time: ~5x faster than gathering rows of three
        xyz[:, j] = table[:, j][rows]
    values = pa.FixedSizeListArray.from_arrays(pa.array(xyz.reshape(-1)), 3, mask=pa.array(~known))
    return pd.arrays.ArrowExtensionArray(values)


def assemble(sink: Collector, head: dict, path: Path) -> tuple[pd.DataFrame, dict]:
    """The decoded columns (`sink`) and the document's other keys (`head`) -> rooftop rows and
    metadata, in named steps (module docstring): names cleaned, launches joined to their calls and
    ops, range paths, steps and phases, the ops' modeled costs, then the rows, column by column."""
    names = _clean_names(sink)
    name_of = np.array(names + [None], dtype=object)  # index -1 (never written) stays None
    launches = _join_launches(sink)
    paths = _range_paths(sink, name_of, launches)
    timing = _step_windows(sink, names, name_of, paths, launches)
    # CPU-only run: one `op` row per outermost cpu_op (ops never overlap then, so no time counts twice)
    oprows = _cpu_op_rows(sink.ops, sink.ann, paths.alabel, name_of, sink.shape_inputs, timing.steps) \
        if not len(sink.gpu) else None
    model = _op_model(sink, name_of, launches, timing.replay)
    runtime = runtime_rows(sink)  # the host side, for the timeline
    sink.ops.release()  # the joins are done: free the CPU side before the rows are built
    sink.rt.release()
    _copy_bytes(sink.gpu, name_of, model.bytes)
    rows = _rows(sink, names, paths, timing, model, oprows or {}, runtime)
    return rows, _assembled_meta(head, path, sink, timing, paths.stats)


def _clean_names(sink: Collector) -> list:
    """Each distinct name once: lone surrogates (a JSON `\\udcff`) are no text, absurd lengths are
    cut before any pattern sees them; secrets out (paths and ops are built from these)."""
    return redact_names([clean_text(n) for n in sink.names.values_list()])


@dataclass
class _Launches:
    """Each GPU row's launch: its runtime call (`ri`, -1: none; `has_rt`), its cpu_op (`oi`, -1:
    none), and the call's thread and start (`thread`, `t`: NULL without a call)."""
    ri: np.ndarray
    has_rt: np.ndarray
    oi: np.ndarray
    thread: np.ndarray
    t: np.ndarray


def _join_launches(sink: Collector) -> _Launches:
    """kernel -> runtime call by correlation (kernels rarely carry External id) -> cpu_op by
    External id, else the innermost cpu_op around the launch on its thread."""
    g, rt, ops = sink.gpu, sink.rt, sink.ops
    ri = _lookup(rt.np("corr"), g.np("corr"))
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
        inner, _, _ = nest_intervals(oth[keep], ost, ost + ops.np("dur")[keep], None, launch_thr[miss], launch_t[miss],
                                     query_paths=False)
        oi[miss] = np.where(inner >= 0, keep[inner.clip(0)], -1)
    return _Launches(ri, has_rt, oi, launch_thr, launch_t)


@dataclass
class _Paths:
    """The ranges' paths: each GPU row's innermost range (`gpath`: an index into `apath + fpaths`,
    -1: none), the user_annotation ranges' labels, starts, ends and paths, the gpu_user_annotation
    spans' paths (`fpaths`), and how many paths the bounds cut (`stats`)."""
    gpath: np.ndarray
    alabel: list
    ast: np.ndarray
    aen: np.ndarray
    apath: list
    fpaths: list
    stats: dict


def _range_paths(sink: Collector, name_of: np.ndarray, launches: _Launches) -> _Paths:
    """A launch's path: the user_annotation ranges around it on its thread, outermost first; else
    the gpu_user_annotation spans on the kernel's (device, stream)."""
    g, ann, gann = sink.gpu, sink.ann, sink.gann
    ast, aen = ann.np("ts"), ann.np("ts") + ann.np("dur")
    alabel = name_of[ann.np("name")].tolist()
    q = np.flatnonzero(launches.has_rt)
    nest_stats: dict = {}
    # a launch's path is its innermost range's: kept as that range's index (-1: none), never as a
    # row of text (the categorical column is built from the indices, `_categorical`)
    inner, _, apath = nest_intervals(ann.np("thread"), ast, aen, alabel, launches.thread[q], launches.t[q], nest_stats,
                                    query_paths=False)
    gpath = np.full(len(g), -1, dtype=np.int64)
    gpath[q] = inner
    fpaths: list = []
    # fallback: gpu_user_annotation spans on the kernel's (device, stream); their paths follow apath's
    left = np.flatnonzero(gpath < 0)
    if len(left) and len(gann):
        key = lambda d, s: d * (1 << 32) + s
        gst = gann.np("ts")
        finner, _, fpaths = nest_intervals(key(gann.np("device"), gann.np("stream")), gst, gst + gann.np("dur"),
                                           name_of[gann.np("name")].tolist(), key(g.np("device")[left], g.np("stream")[left]),
                                           g.np("ts")[left], nest_stats, query_paths=False)
        gpath[left] = np.where(finner >= 0, finner + len(apath), -1)
    return _Paths(gpath, alabel, ast, aen, apath, fpaths, nest_stats)


@dataclass
class _Timing:
    """The steps and the windows each GPU row is judged in (`lo`, `hi`, `how`), whether a row was
    replayed from a CUDA graph, and the step and phase codes of the GPU rows and the ranges."""
    steps: "st.Steps"
    lo: np.ndarray
    hi: np.ndarray
    how: Any
    replay: np.ndarray
    gpu: tuple  # (step, phase, phases): codes into a list of phases
    cpu: tuple  # the same, of the ranges


def _step_windows(sink: Collector, names: list, name_of: np.ndarray, paths: _Paths, launches: _Launches) -> _Timing:
    """Steps: markers among the annotations (else Python frames); GPU work by the window it runs in;
    then the phases."""
    g, ann, gann, rt = sink.gpu, sink.ann, sink.gann, sink.rt
    q = np.flatnonzero(launches.has_rt)
    steps = _find_steps(sink, paths.alabel, paths.apath, name_of, paths.ast, paths.aen,
                        (launches.thread[q], launches.t[q]))
    gts = g.np("ts")
    gend = gts + g.np("dur")
    spans = None
    if len(steps) and len(gann):
        marker_ext = np.where(steps.row >= 0, ann.np("ext")[steps.row.clip(0)] if len(ann) else NULL, NULL)
        gst = gann.np("ts")
        spans = (_lookup(marker_ext, gann.np("ext")), gst, gst + gann.np("dur"))
    lo, hi, how = st.gpu_windows(steps, gts, gend, launches.thread, launches.t, spans)
    # the kernels a CUDA-graph replay launched (they carry the cudaGraphLaunch's correlation)
    graph_ids = [i for i, n in enumerate(names) if n.startswith(("cudaGraphLaunch", "cuGraphLaunch"))]
    replay = np.zeros(len(g), bool)
    if graph_ids and len(rt):
        replay = launches.has_rt & np.isin(rt.np("name")[launches.ri.clip(0)], graph_ids)
    st.infer_phases(steps, lo, hi, gts, g.np("name"), name_of, g.np("gx"), replay, g.np("kind") == 0)
    gpu = st.assign_codes(lo, hi, steps.index, steps.phase, gts)  # (phases: codes into a list)
    cpu = st.assign_cpu_codes(steps, ann.np("thread"), paths.ast)
    return _Timing(steps, lo, hi, how, replay, gpu, cpu)


@dataclass
class _OpModel:
    """Per GPU row: the launching op's name id (-1: none), its modeled FLOPs and bytes (NaN:
    unknown), and its input dtype (codes into OP_DTYPES, -1: none)."""
    name: np.ndarray
    flops: np.ndarray
    bytes: np.ndarray
    dtype: np.ndarray


def _op_model(sink: Collector, name_of: np.ndarray, launches: _Launches, replay: np.ndarray) -> _OpModel:
    """The analytic cost of each launching op instance, split across its kernels by duration."""
    g, ops, rt = sink.gpu, sink.ops, sink.rt
    oi = launches.oi
    op_name = np.full(len(g), -1, dtype=np.int64)  # name ids (-1: no op)
    mflops, mbytes = np.full(len(g), np.nan), np.full(len(g), np.nan)
    op_dtype = np.full(len(g), -1, dtype=np.int64)  # the launching op's input dtype (codes into OP_DTYPES)
    with_op = np.flatnonzero(oi >= 0)
    if len(with_op):
        inst, local = np.unique(oi[with_op], return_inverse=True)
        onames = ops.np("name")[inst]
        oshape = ops.np("shape")[inst]
        fl, by = _op_costs(onames, oshape, name_of, sink.shape_inputs)
        # the op's cost goes to the compute kernels it launched, never to its memsets/memcpys
        kern = g.np("kind")[with_op] == 0
        krows, klocal = with_op[kern], local[kern]
        mflops[krows], mbytes[krows] = fl[klocal], by[klocal]
        op_dtype[krows] = op_dtype_codes(oshape, sink.shape_inputs)[klocal]
        # an op that launched several kernels: its cost split by their durations (docs/definitions.md)
        cnt = np.bincount(klocal, minlength=len(inst))
        multi = np.flatnonzero((cnt[klocal] > 1) & ~(np.isnan(fl[klocal]) & np.isnan(by[klocal])))
        if len(multi):
            from rooftop.llm.op_cost import split_by_duration

            gdur = g.np("dur")
            rows_of = pd.Series(krows[multi]).groupby(klocal[multi]).agg(list)
            for o, members in rows_of.items():
                d = gdur[members].tolist()
                for tot, out in ((fl[o], mflops), (by[o], mbytes)):
                    parts = split_by_duration(None if np.isnan(tot) else float(tot), d)
                    out[members] = [np.nan if v is None else v for v in parts]
        op_name[with_op] = onames[local]
    # a CUDA-graph replay outside any op: its kernels were launched by the cudaGraphLaunch itself
    if replay.any():
        op_name[replay & (oi < 0)] = rt.np("name")[launches.ri[replay & (oi < 0)]]
    return _OpModel(op_name, mflops, mbytes, op_dtype)


def _copy_bytes(g, name_of: np.ndarray, mbytes: np.ndarray) -> None:
    """memcpy/memset rows: the HBM bytes of what CUPTI recorded (a DtoD copy moves 2N), into `mbytes`."""
    nb = g.np("nbytes")
    copy = np.flatnonzero((g.np("kind") > 0) & (nb != NULL))
    if len(copy):
        from rooftop.llm.op_cost import copy_hbm_bytes

        ids, inv = np.unique(g.np("name")[copy], return_inverse=True)
        factor = np.array([copy_hbm_bytes(name_of[i], 1.0) or np.nan for i in ids.tolist()])
        mbytes[copy] = nb[copy] * factor[inv.ravel()]


def _rows(sink: Collector, names: list, paths: _Paths, timing: _Timing, model: _OpModel, op_part: dict,
          runtime: dict) -> pd.DataFrame:
    """The rows by kind, each kind in time order: the GPU work, the ranges, a CPU-only run's ops,
    the runtime calls. A load splits them so (`rooftop.trace.read.split_runtime`): stored so, its
    parts are slices of the table as read, not a copy of every column (~0.5 s and ~300 MB at 1M
    kernels). Built column by column once (no concat, sort or Python lists per row)."""
    g, ann = sink.gpu, sink.ann
    origin = sink.origin or 0
    gts, gdur, gkind = g.np("ts"), g.np("dur"), g.np("kind")
    ast = paths.ast
    gstep, gphase, gphases = timing.gpu
    astep, aphase, aphases = timing.cpu
    nk, na = len(g), len(ann)
    no = len(op_part.get("ts", ()))
    nr = len(runtime.get("ts", ()))
    by_time = lambda ts: np.argsort(ts, kind="stable")
    order = np.concatenate([_gpu_by_time(gts, gkind), nk + by_time(ast), nk + na + by_time(op_part.get("ts", np.zeros(0, np.int64))),
                            nk + na + no + runtime.get("order", np.zeros(0, np.int64))])

    def col(*parts):
        return np.concatenate([np.asarray(p) for p in parts])[order]

    def ints(gpu_part, range_part, op_part_=None, rt_part=None):
        fill = lambda a, n: np.full(n, NULL, np.int64) if a is None else a
        return col(gpu_part, range_part, fill(op_part_, no), fill(rt_part, nr))

    def floats(gpu_part, range_part, op_part_=None):
        return col(gpu_part, range_part, np.full(no, np.nan) if op_part_ is None else op_part_, np.full(nr, np.nan))

    def none(n):
        return np.full(n, -1, np.int64)

    kinds = list(KIND_NAMES + ("range", "op", "runtime"))
    steps_of = lambda a: _with_null(a) if len(a) else np.zeros(0)
    name_ids = ann.np("name")
    # each column is built by its own function, two at a time (`rooftop.trace.paired`: most of it is
    # NumPy gathers and integer hashing, which leave the GIL to the other core); the frame takes
    # the new arrays as they are (`copy=False`: not consolidated, which copied every same-typed
    # column into one 2-D block, only for `to_table` to split it again)
    rows = pd.DataFrame(built({
        "id": lambda: np.arange(nk + na + no + nr, dtype=np.int64),
        "kind": lambda: _categorical([(gkind, kinds), (np.full(na, 3), None), (np.full(no, 4), None),
                                      (np.full(nr, 5), None)], order),
        "name": lambda: _categorical([(g.np("name"), names), (name_ids, None), (op_part.get("name_id", none(no)), None),
                                      (runtime.get("name", none(nr)), None)], order),
        "start_ns": lambda: ints(gts, ast, op_part.get("ts"), runtime.get("ts")) - origin,
        "dur_ns": lambda: ints(gdur, ann.np("dur"), op_part.get("dur"), runtime.get("dur")),
        "device": lambda: _masked(ints(g.np("device"), np.full(na, NULL, np.int64)), "Int32"),
        "stream": lambda: _masked(ints(g.np("stream"), np.full(na, NULL, np.int64)), "Int32"),
        "correlation": lambda: _masked(ints(g.np("corr"), np.full(na, NULL, np.int64), None, runtime.get("corr"))),
        "path": lambda: _categorical([(paths.gpath, paths.apath + paths.fpaths), (np.arange(na), None),
                                      *op_part.get("path", [(none(no), [])]), (none(nr), None)], order),
        "phase": lambda: _categorical([(gphase, gphases), (aphase, aphases), op_part.get("phase", (none(no), [])),
                                       (none(nr), [])], order),
        "step": lambda: pd.array(col(steps_of(gstep), steps_of(astep), steps_of(op_part["step"]) if no else np.zeros(0),
                                     np.full(nr, np.nan)), dtype="Int32"),
        "op": lambda: _categorical([(model.name, names), (none(na), None), (op_part.get("name_id", none(no)), None),
                                    (runtime.get("op", none(nr)), None)], order),
        # launch shapes: ranges, ops and calls have none
        "grid": lambda: _shape_column(_shape3(g, "g"), na + no + nr, order),
        "block": lambda: _shape_column(_shape3(g, "b"), na + no + nr, order),
        "registers": lambda: _masked(ints(g.np("regs"), np.full(na, NULL, np.int64)), "Int32"),
        "shared_mem": lambda: _masked(ints(g.np("smem"), np.full(na, NULL, np.int64)), "Int32"),
        "model_flops": lambda: floats(model.flops, np.full(na, np.nan), op_part.get("flops")),
        "model_bytes": lambda: floats(model.bytes, np.full(na, np.nan), op_part.get("bytes")),
        "dtype": lambda: _categorical([(model.dtype, list(OP_DTYPES)), (none(na), None), (none(no), None),
                                       (none(nr), None)], order),
    }), copy=False)
    if nr:  # the OS thread of a runtime call (no column at all when there are none)
        rows["thread"] = _masked(ints(np.full(nk, NULL, np.int64), np.full(na, NULL, np.int64), None, runtime["thread"]))
    return rows


def _assembled_meta(head: dict, path: Path, sink: Collector, timing: _Timing, nest_stats: dict) -> dict:
    """The metadata document: the file's own (`_meta`), the steps' windows and rule, and what was cut."""
    g = sink.gpu
    kernel_dev = g.np("device")[g.np("kind") == 0]
    meta = _meta(head, path, sink, kernel_dev[kernel_dev != NULL])
    meta["workload"] = {"cuda_graphs": bool(timing.replay.any())}
    meta["steps"] = st.attach_windows(timing.steps, timing.lo, timing.hi, timing.how, sink.origin or 0)
    meta["warnings"].extend(timing.steps.warnings)
    meta["step_rule"] = timing.steps.rule
    if nest_stats.get("cut"):
        meta["warnings"].append(f"{nest_stats['cut']} range path(s) deeper than {MAX_PATH_DEPTH} levels or longer "
                                f"than {MAX_PATH_CHARS} characters cut (\"…\")")
    return meta


def _gpu_by_time(ts: np.ndarray, kind: np.ndarray) -> np.ndarray:
    """The GPU rows in time order, a kernel before a copy that starts at the same time: the
    collector holds a batch's rows a kind at a time, so the order of such a tie would otherwise
    follow where the file was cut into batches (how many cores read it). Rows of one kind keep
    the file's order."""
    order = np.argsort(ts, kind="stable")
    at = ts[order]
    tie = np.flatnonzero(at[1:] == at[:-1])
    if len(tie) and (kind[order[tie]] != kind[order[tie + 1]]).any():
        order = np.lexsort((kind, ts))  # (stable too)
    return order


def _categorical(parts: list, order: np.ndarray) -> pd.Categorical:
    """A text column from parts (codes into a list of texts, -1 or a None text: missing; a part
    whose list is None uses the previous part's) concatenated, rows taken in `order`. The rows
    never become Python objects: each distinct text is hashed once, to merge equal texts."""
    codes, values = [], []
    offset = start = 0
    for c, texts in parts:
        if texts is not None:
            start, offset = offset, offset + len(texts)
            values.extend(texts)
        c = np.asarray(c, dtype=np.int64)
        codes.append(np.where(c >= 0, c + start, -1))
    return categorical(values, np.concatenate(codes)[order] if len(order) else np.zeros(0, np.int64))


def _with_null(a: pd.arrays.IntegerArray) -> np.ndarray:
    """Int steps with null -> float64 with NaN, for one concatenate (pandas' Int32 takes it back)."""
    return a.to_numpy(dtype="float64", na_value=np.nan) if len(a) else np.zeros(0)


def _find_steps(sink: Collector, alabel: list, apath: list, name_of: np.ndarray, ast, aen, launches) -> "st.Steps":
    py = sink.py
    pst = py.np("ts")
    frames = (py.np("thread"), pst, pst + py.np("dur"), name_of[py.np("name")].tolist())
    return st.find_steps(alabel, apath, sink.ann.np("thread"), ast, aen, py=frames, user=st.user_pattern(),
                         name_ids=(sink.ann.np("name"), name_of), launches=launches)


def _cpu_op_rows(ops, ann, alabel: list, name_of: np.ndarray, shape_inputs: list, steps) -> dict | None:
    """A CPU-only run's `op` rows: each outermost cpu_op (no cpu_op of its thread encloses it), with
    the annotation path around it, its step and its analytic cost from the recorded shapes."""
    if not len(ops):
        return None
    oth, ost, odur = ops.np("thread"), ops.np("ts"), ops.np("dur")
    keep = np.flatnonzero(st.outermost(oth, ost, ost + odur))
    th, ts, dur = oth[keep], ost[keep], odur[keep]
    names = ops.np("name")[keep]
    ast_ = ann.np("ts")
    inner, _, paths = nest_intervals(ann.np("thread"), ast_, ast_ + ann.np("dur"), alabel, th, ts, query_paths=False)
    flops, nbytes = _op_costs(names, ops.np("shape")[keep], name_of, shape_inputs)
    step, phase, phases = st.assign_cpu_codes(steps, th, ts)
    return {"ts": ts, "dur": dur, "name_id": names, "path": [(inner, paths)],
            "flops": flops, "bytes": nbytes, "step": step, "phase": (phase, phases)}


def _meta(head: dict, path: Path, sink: Collector, kernel_dev: np.ndarray) -> dict:
    vals, counts = np.unique(kernel_dev, return_counts=True)
    dev = int(vals[np.argmax(counts)]) if len(vals) else None  # the most common (lowest on ties)
    dist = head.get("distributedInfo") if isinstance(head.get("distributedInfo"), dict) else {}
    base = head.get("baseTimeNanoseconds")
    base = base if isinstance(base, int) else None
    relative = base is not None or "deviceProperties" in head  # new Kineto: ts relative to the base
    origin = sink.origin
    origin_ns = None if origin is None else (origin + base if base is not None else (None if relative else origin))
    keep = ("schemaVersion", "cupti_version", "cuda_runtime_version", "cuda_driver_version",
            "displayTimeUnit", "record_shapes", "with_stack", "with_flops")
    source = {"tool": "kineto", "importer": "rooftop.collectors.readers.kineto", "file": path.name,
              **{k: head[k] for k in keep if k in head and isinstance(head[k], (str, int, float))},
              "base_time_ns": base}
    return {
        "source": source,
        "device": _device_meta(head.get("deviceProperties"), dev),
        "rank": dist.get("rank") if isinstance(dist.get("rank"), int) else None,
        "world_size": dist.get("world_size") if isinstance(dist.get("world_size"), int) else None,
        "origin_ns": origin_ns,  # absolute epoch ns of start_ns == 0, where the file says
        "steps": [], "modeled": False, "warnings": [],
    }
