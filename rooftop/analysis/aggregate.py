"""Per-group sums over the prepared rows, vectorised: group numbers (`grouped`, what pandas' groupby
gives, from the keys' codes), busy time (the union of intervals), the known bytes and FLOPs and the
time they cover, coverages, idle time; the statistics the step and phase tables start from."""
from __future__ import annotations

import numpy as np
import pandas as pd

from rooftop.trace.codes import first_appearance, first_rows
from rooftop.analysis.work import COMPUTE, LINK_COPY, is_copy, prepare


def source_labels(codes: np.ndarray, gid: np.ndarray, n: int) -> np.ndarray:
    """Per group: "measured" if all known rows are measured, "model" if all are model, else "mixed"."""
    # one count per (group, code) pair; codes outside 0..2 count as unknown, as before
    pair = np.asarray(gid, dtype=np.int64) * 3 + np.where((codes == 1) | (codes == 2), codes, 0)
    count = np.bincount(pair, minlength=3 * n)[:3 * n].reshape(n, 3)
    m, o = count[:, 2] > 0, count[:, 1] > 0
    return np.where(m & o, "mixed", np.where(m, "measured", np.where(o, "model", None))).astype(object)


def grouped(frame: pd.DataFrame, keys: list[str], dropna: bool = True) -> tuple[np.ndarray, pd.Series]:
    """(group number per row, rows per group) as `frame.groupby(keys, sort=False, dropna=dropna)`
    gives them (`ngroup()`, `size()`, groups numbered in order of first appearance, the same index),
    from the keys' codes: a categorical's own, else factorized, combined into one integer per row.
    pandas' grouper is slow per call at 1M kernels, and the analysis groups the same rows
    six ways; the index is the one pandas makes of each group's first row. Rows with a missing key
    under `dropna` (which pandas numbers apart) and key combinations past 2**62 are left to pandas.
    Keys that are categorical, text or numbers, none missing, give the index directly (the same
    values, dtypes and names; a MultiIndex's levels may list its values in another order)."""
    n = len(frame)
    combined, radix, plain = None, 1, True
    for key in keys:
        col = frame[key]
        if isinstance(col.dtype, pd.CategoricalDtype):
            codes, size = col.cat.codes.to_numpy().astype(np.int64), len(col.cat.categories) + 1
        else:
            codes, uniques = pd.factorize(col, use_na_sentinel=True)
            codes, size = codes.astype(np.int64), len(uniques) + 1
            plain = plain and (isinstance(col.dtype, pd.StringDtype) or col.dtype.kind in "iuf")
        codes += 1  # 0: missing
        plain = plain and bool(codes.all())
        if (dropna and n and not codes.all()) or radix * size >= 1 << 62:
            g = frame.groupby(keys, sort=False, dropna=dropna)
            return g.ngroup().to_numpy(), g.size()
        combined = codes if combined is None else combined * size + codes
        radix *= size
    if combined is None or not n:
        g = frame.groupby(keys, sort=False, dropna=dropna)
        return g.ngroup().to_numpy(), g.size()
    if radix <= max(4 * n, 1 << 16):  # few combinations: numbered through a table, not a hash
        _, first, number = first_appearance(combined, radix)
        gid = number[combined]
    else:
        gid, _ = pd.factorize(combined)  # numbered by first appearance
        first = first_rows(gid)
    if plain:  # the first rows' keys are the index pandas makes of them (~3 ms a groupby saved)
        firsts = [frame[k].iloc[first] for k in keys]
        index = pd.Index(firsts[0], name=keys[0]) if len(keys) == 1 else pd.MultiIndex.from_arrays(firsts, names=keys)
    else:  # (object keys become text in pandas' index; missing keys are kept in their own way)
        index = frame[keys].iloc[first].groupby(keys, sort=False, dropna=dropna).size().index
    return gid, pd.Series(np.bincount(gid, minlength=len(first)), index=index)


def _sorted_by(gid: np.ndarray, start: np.ndarray) -> bool:
    """Whether the rows are in (group, start) order already: then a stable sort by them keeps them
    where they are."""
    if len(gid) < 2:
        return True
    same = gid[1:] == gid[:-1]
    return bool(np.all((gid[1:] > gid[:-1]) | (same & (start[1:] >= start[:-1]))))


def _busy(gid: np.ndarray, start: np.ndarray, end: np.ndarray, n: int) -> np.ndarray:
    """Union of [start, end) intervals per group: sort by (group, start), running max of ends."""
    if not _sorted_by(gid, start):  # (steps and phases follow each other in time: usually so already)
        order = np.lexsort((start, gid))
        gid, start, end = gid[order], start[order], end[order]
    g, s, e = gid, start.astype("float64"), end.astype("float64")
    run_end = _running_max(g, end, e)
    prev = np.empty_like(run_end)
    prev[0] = -np.inf
    prev[1:] = run_end[:-1]
    prev[np.r_[True, g[1:] != g[:-1]]] = -np.inf  # first interval of each group
    contrib = np.clip(e - np.maximum(s, prev), 0, None)
    return np.bincount(g, weights=contrib, minlength=n)


def _running_max(g: np.ndarray, end: np.ndarray, e: np.ndarray) -> np.ndarray:
    """The running maximum of `e` (the float64 of integer `end`) within each run of equal, ascending
    group numbers `g`: one accumulate over integers lifted by group (exact, and the same floats,
    since the conversion keeps order), where they cannot overflow; else pandas' grouped cummax."""
    if len(end) and end.dtype.kind == "i" and (len(g) < 2 or bool(np.all(g[1:] >= g[:-1]))):
        lo, width = int(end.min()), int(end.max()) - int(end.min()) + 1
        if (int(g[-1]) + 1) * width < 1 << 62:
            lift = g.astype(np.int64) * width
            return (np.maximum.accumulate(end - lo + lift) - lift + lo).astype("float64")
    return pd.Series(e).groupby(g).cummax().to_numpy()


def _stat_arrays(rows: pd.DataFrame, keys: list[str]) -> tuple[dict, pd.Index, np.ndarray]:
    """Per group of `keys`: kernels, first start, last end, kernel time, the known sums, busy time,
    where bytes and FLOPs came from, coverages, span and idle time, as arrays; with the groups'
    index and each row's group number (`grouped`'s). The step and phase tables add their rates to
    these and make one frame at the end: a few hundred groups, and each pandas operation on them
    cost more than its arithmetic."""
    rows = prepare(rows)
    gid, sizes = grouped(rows, keys, dropna=False)
    n = len(sizes)
    kernels = sizes.to_numpy()
    # A kernel count never includes copies (on a CPU-only run the timed ops are what is counted).
    copies = is_copy(rows) if "kind" in rows.columns else None
    if copies is not None and copies.any():
        kernels = kernels - np.bincount(gid, weights=copies, minlength=n).astype(np.int64)
    start, end, dur = rows["start_ns"].to_numpy(), rows["end_ns"].to_numpy(), rows["dur_ns"].to_numpy()
    starts = np.full(n, np.iinfo(np.int64).max)
    np.minimum.at(starts, gid, start)
    ends = np.full(n, np.iinfo(np.int64).min)
    np.maximum.at(ends, gid, end)
    busy = _busy(gid, start, end, n)
    out = {"kernels": kernels, "start_ns": starts, "end_ns": ends,
           "kernel_ns": np.bincount(gid, weights=dur, minlength=n), **known_sums(rows, gid, n),
           "busy_ns": busy,
           "bytes_source": source_labels(rows["bytes_src"].to_numpy(), gid, n),
           "flops_source": source_labels(rows["flops_src"].to_numpy(), gid, n)}
    out.update(coverages(out))
    span = ends - starts
    out["span_ns"] = span
    out.update(idle_columns(span, busy))
    return out, sizes.index, gid


def idle_columns(span: np.ndarray, busy: np.ndarray) -> dict[str, np.ndarray]:
    """idle_ns = span - busy (never below 0) and idle_frac = idle / span (null where no span)."""
    idle = span - busy
    idle = np.where((idle >= 0) | np.isnan(idle), idle, 0.0)  # (pandas' clip(lower=0): -0.0 kept)
    return {"idle_ns": idle, "idle_frac": idle / where_positive(span)}


def known_sums(rows: pd.DataFrame, gid: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """Per group: the known bytes and FLOPs and the time of the rows that have them (rates divide
    by these), the FLOPs and bytes of the compute rows where both are known (the only ones an
    arithmetic intensity may use), and the denominators of the coverages: for FLOPs and AI the
    compute time (copies do no FLOPs, so they neither cover nor dilute them), for bytes the time
    judged against HBM (host/peer copies run at link speed)."""
    b, f = rows["bytes"].to_numpy(dtype="float64"), rows["work_flops"].to_numpy(dtype="float64")
    dur = rows["dur_ns"].to_numpy(dtype="float64")
    cls = rows["copy_class"].to_numpy() if "copy_class" in rows else np.zeros(len(rows), np.int8)
    compute, hbm = cls == COMPUTE, cls != LINK_COPY
    kb, kf = ~np.isnan(b) & hbm, ~np.isnan(f) & compute  # host/peer copy bytes cross a link, not HBM
    both = kb & kf
    sums = _MaskedSums(gid, n)
    out = {"flops": sums.known(f, ~np.isnan(f)), "bytes": sums.known(b, kb),
           "bytes_ns": sums.total(dur, kb), "flops_ns": sums.total(dur, kf), "both_ns": sums.total(dur, both),
           "both_flops": sums.known(f, both), "both_bytes": sums.known(b, both),
           "hbm_known_ns": sums.total(dur, kb & hbm), "hbm_ns": sums.total(dur, hbm),
           "compute_ns": sums.total(dur, compute)}
    # A copy's 0 FLOPs is known, but a group with compute work none of whose FLOPs are known has
    # unknown FLOPs, not the copies' 0 (a phase of uncounted kernels and a memcpy read "0 FLOPs")
    out["flops"] = np.where((out["compute_ns"] > 0) & (out["flops_ns"] == 0), np.nan, out["flops"])
    seen: set[int] = set()
    for k, v in out.items():  # one array per column (a caller may write into one)
        if id(v) in seen:
            out[k] = v.copy()
        seen.add(id(v))
    return out


class _MaskedSums:
    """Group sums of `values` over the rows of a mask, each distinct (values, mask) pair summed
    once: the ten sums of `known_sums` use a few masks, which are often all rows or none (no
    copies, no counters) or one another (FLOPs and bytes known for the same kernels). Every sum is
    the `np.bincount` it replaces, over the same values in the same order: the same floats."""

    def __init__(self, gid: np.ndarray, n: int):
        self.gid, self.n = gid, n
        self._done: list[tuple[np.ndarray, np.ndarray | None, np.ndarray]] = []  # (values, mask or None: all, sum)
        self._ones: np.ndarray | None = None

    def total(self, values: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Per group, the sum of `values` where `mask` (0 for a group without such rows)."""
        everything = bool(mask.all())
        if not everything and not mask.any():
            return np.zeros(self.n)
        for v, m, got in self._done:
            if v is values and (m is None if everything else m is not None and np.array_equal(m, mask)):
                return got
        got = np.bincount(self.gid, weights=values if everything else np.where(mask, values, 0.0), minlength=self.n)
        self._done.append((values, None if everything else mask, got))
        return got

    def known(self, values: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """`total`, NaN for a group without such rows (`_sum_known` of `values` masked to NaN)."""
        total = self.total(values, mask)
        if self._ones is None:
            self._ones = np.ones(len(mask))  # the weights that count rows
        return np.where(self.total(self._ones, mask) > 0, total, np.nan)


SUM_COLUMNS = ("bytes_ns", "flops_ns", "both_ns", "hbm_known_ns", "hbm_ns", "compute_ns")


def coverages(sums) -> dict[str, np.ndarray]:
    """Per group, bytes_coverage, flops_coverage, ai_coverage (0..1, null where nothing could have
    the quantity, e.g. FLOPs of a group of copies) and ai, from the known_sums columns (arrays)."""
    def share(num, den):
        return np.asarray(sums[num], dtype="float64") / where_positive(np.asarray(sums[den], dtype="float64"))
    return {"bytes_coverage": share("hbm_known_ns", "hbm_ns"), "flops_coverage": share("flops_ns", "compute_ns"),
            "ai_coverage": share("both_ns", "compute_ns"), "ai": share("both_flops", "both_bytes")}


def where_positive(a: np.ndarray) -> np.ndarray:
    """`a` where above 0, NaN elsewhere (a denominator: nothing to divide by is unknown, not 0)."""
    return np.where(a > 0, a, np.nan)


# What `_stat_arrays` and the step and phase tables read of the prepared rows.
_STAT_COLUMNS = ("rank", "device", "phase", "step", "kind", "start_ns", "end_ns", "dur_ns", "bytes", "work_flops",
                 "copy_class", "bytes_src", "flops_src", "_prepared")


def _stat_columns(rows: pd.DataFrame) -> pd.DataFrame:
    """The prepared rows with only the columns the tables read: a filter or an added column then
    copies these, not the ~60 columns of the trace."""
    return rows[[c for c in _STAT_COLUMNS if c in rows.columns]]
