"""Per-step and per-phase time, work and utilisation: the definitions of docs/definitions.md, vectorised.

- Step span: last kernel end minus first kernel start among the step's kernels. Busy: the union of
  kernel intervals. Idle = span - busy (launch gaps).
- Bytes: measured `dram_read + dram_write` where every kernel has counters; `model_bytes` where
  none has; a mix of the two (labelled "mixed") when some have. FLOPs likewise (`flops` where
  counters were measured, else `model_flops`).
- Coverage: the share of kernel time whose bytes (`bytes_coverage`) or FLOPs (`flops_coverage`)
  are known. Copies do no FLOPs, so FLOPs and AI coverage are shares of the compute kernels' time;
  host/peer copies run at link speed, so bytes coverage is a share of the rest. Achieved bandwidth = known bytes / span, a lower bound when coverage < 1; MBU = that /
  peak bandwidth (likewise FLOP/s and MFU). A rate is a verdict (`mbu_status` "verdict") only where
  its coverage is at least VERDICT_COVERAGE; below that it is a "lower bound", and below
  MIN_COVERAGE it is unknown (null): a bound from a sliver of the time says nothing.
- AI = FLOPs / bytes over the kernels whose FLOPs and bytes are both known (`ai_coverage`); the
  bound (memory/compute) is judged only where that covers at least VERDICT_COVERAGE.
- Copies and memsets do no FLOPs (a known 0, whatever a reader attached); integer GEMMs have no
  FP FLOPs (unknown, never 0: counters count no FP instructions for them).
- Model MBU (Databricks): see `model_cost` (the bytes a step must move, from the model description).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..codes import first_appearance, first_rows
from ..devices import trace_dtype
from ..models import dtype_bytes
from ..opmodel import is_integer_gemm, is_link_copy
from ..steps import OUTSIDE_STEPS
from .device_rows import multi_device

NO_PHASE = "run"  # label for timed rows that no phase range encloses (e.g. imported traces)
VERDICT_COVERAGE = 0.5  # a phase/step rate is a verdict only when it covers half the kernel time
MIN_COVERAGE = 0.05     # below this, a lower bound is noise ("MBU 3.9e-05%"): shown as unknown


SRC_NAMES = np.array([None, "model", "measured"], dtype=object)  # codes 0, 1, 2


def work_columns(rows: pd.DataFrame) -> pd.DataFrame:
    """Per-row best-known bytes and FLOPs, and where each came from.

    Returns columns `bytes`, `bytes_src` and `work_flops`, `flops_src`, where a source is a small
    integer code (0 unknown, 1 model, 2 measured; `SRC_NAMES` maps it): a million short strings
    would cost more than the arithmetic.
    """
    has_counters = rows["counters"].fillna(False).to_numpy(dtype=bool) if "counters" in rows else np.zeros(len(rows), bool)
    out = {}
    for name, measured, model in (("bytes", floats(rows["dram_read"]) + floats(rows["dram_write"]), floats(rows["model_bytes"])),
                                  ("work_flops", floats(rows["flops"]), floats(rows["model_flops"]))):
        m = np.where(has_counters, measured, np.nan)
        use_m = ~np.isnan(m)
        out[name] = np.where(use_m, m, model)
        out["bytes_src" if name == "bytes" else "flops_src"] = \
            np.where(use_m, 2, np.where(np.isnan(model), 0, 1)).astype(np.int8)
    copy = copy_class(rows)
    copies = copy > 0
    out["work_flops"] = np.where(copies, 0.0, out["work_flops"])
    out["flops_src"] = np.where(copies, 1, out["flops_src"]).astype(np.int8)
    integer = _integer_gemm(rows)
    out["work_flops"] = np.where(integer, np.nan, out["work_flops"])
    out["flops_src"] = np.where(integer, 0, out["flops_src"]).astype(np.int8)
    out["copy_class"] = copy
    return pd.DataFrame(out, index=rows.index)


COMPUTE, DEVICE_COPY, LINK_COPY = 0, 1, 2  # copy_class codes


def copy_class(rows: pd.DataFrame) -> np.ndarray:
    """Per row: COMPUTE (a kernel or op), DEVICE_COPY (memset, device-to-device memcpy) or LINK_COPY
    (host/peer memcpy, PCIe/NVLink-limited); one regex per distinct copy name."""
    out = np.zeros(len(rows), np.int8)
    if "kind" not in rows or not len(rows):
        return out
    copies = np.flatnonzero(is_copy(rows))
    if len(copies):
        out[copies] = DEVICE_COPY
        codes, uniq = pd.factorize(rows["name"].iloc[copies].astype(object)) if "name" in rows else \
            (np.full(len(copies), -1), [])
        link = np.array([is_link_copy(u) for u in uniq] + [False], dtype=bool)
        out[copies[link[codes]]] = LINK_COPY  # code -1 (no name) -> the trailing False
    return out


def _integer_gemm(rows: pd.DataFrame) -> np.ndarray:
    """Rows that are integer GEMMs (by kernel name, or launched by `aten::_int_mm`): tested once per
    distinct name, so a million rows cost one regex per name."""
    mask = np.zeros(len(rows), bool)
    for col in ("name", "op"):
        if col not in rows or not len(rows):
            continue
        codes, uniq = distinct_codes(rows[col])
        if not len(uniq):
            continue
        hit = np.array([is_integer_gemm(u) for u in uniq], dtype=bool)
        mask |= np.where(codes >= 0, hit[codes.clip(0)], False)
    return mask


def distinct_codes(col: pd.Series) -> tuple[np.ndarray, list]:
    """Integer codes per row (-1: missing) and the distinct values as plain `str` (or whatever the
    column holds): a categorical's own codes and categories (free), else factorized. A categorical
    may list values no row holds; a per-value test of them costs a call and changes nothing."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        return col.cat.codes.to_numpy(), np.asarray(col.cat.categories, dtype=object).tolist()
    codes, uniques = pd.factorize(col.astype(object), use_na_sentinel=True)
    return codes, np.asarray(uniques, dtype=object).tolist()


def floats(col: pd.Series) -> np.ndarray:
    """A column as float64, NaN where missing (a float64 column's own array, no copy)."""
    return col.to_numpy(dtype="float64", na_value=np.nan)


def prepare(timed: pd.DataFrame) -> pd.DataFrame:
    """Timed rows ready for aggregation: phase label, end time, work columns. Idempotent."""
    if "_prepared" in timed.columns:
        return timed
    rows = labelled(timed)
    work = work_columns(rows)
    rows = pd.concat([rows, work], axis=1)
    rows["end_ns"] = rows["start_ns"] + rows["dur_ns"]
    rows["_prepared"] = True
    return rows


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
    pandas' grouper took ~0.07-0.35 s per call at 1M kernels, and the analysis groups the same rows
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


def is_copy(rows: pd.DataFrame) -> np.ndarray:
    """Per row: a memcpy or memset (from a categorical's codes: no object per row)."""
    kind = rows["kind"]
    if isinstance(kind.dtype, pd.CategoricalDtype):
        hit = np.append(np.isin(np.asarray(kind.cat.categories, dtype=object), COPY_KINDS), False)
        return hit[kind.cat.codes.to_numpy()]  # code -1 (missing) picks the trailing False
    return kind.astype(object).isin(COPY_KINDS).to_numpy()


COPY_KINDS = ("memcpy", "memset")


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


_RATE_INPUTS = ("span_ns", "flops", "bytes", "flops_coverage", "bytes_coverage")
_STATUS = ("mfu_status", "mbu_status")  # object columns of text


def _frame(columns: dict, index: pd.Index) -> pd.DataFrame:
    """One frame of the arrays, the statuses as object columns of text."""
    return pd.DataFrame({k: pd.Series(v, index=index, dtype=object) if k in _STATUS else v
                         for k, v in columns.items()}, index=index)


def rate_arrays(cols, peak_flops, peak_bw) -> dict[str, np.ndarray]:
    """Span rates of steps or phases from the `_RATE_INPUTS` columns (float arrays): known work /
    span, null where the work covers less than MIN_COVERAGE of the kernel time; `*_status` says
    whether each is a verdict or a lower bound."""
    span_s = where_positive(cols["span_ns"]) / 1e9
    flops_cov, bytes_cov = cols["flops_coverage"], cols["bytes_coverage"]
    kf, kb = flops_cov >= MIN_COVERAGE, bytes_cov >= MIN_COVERAGE
    flops_s, bytes_s = cols["flops"] / span_s, cols["bytes"] / span_s
    nan = np.full(len(span_s), np.nan)
    return {"tflops": np.where(kf, flops_s / 1e12, np.nan), "tbps": np.where(kb, bytes_s / 1e12, np.nan),
            "mfu": np.where(kf, flops_s / peak_flops, np.nan) if peak_flops else nan,
            "mbu": np.where(kb, bytes_s / peak_bw, np.nan) if peak_bw else nan.copy(),
            "mfu_status": _status(flops_cov), "mbu_status": _status(bytes_cov)}


def _status(c: np.ndarray) -> np.ndarray:
    return np.where(c >= VERDICT_COVERAGE, "verdict", np.where(c >= MIN_COVERAGE, "lower bound", "unknown")).astype(object)


def _bound(ai: pd.Series, ridge: float | None, coverage: pd.Series | None = None) -> pd.Series:
    """memory/compute from the AI; None without a ridge, or where the AI covers less than
    VERDICT_COVERAGE of the kernel time (a verdict on a sliver of the time is no verdict)."""
    values = _bound_values(ai.to_numpy(dtype="float64", na_value=np.nan), ridge,
                           None if coverage is None else coverage.to_numpy(dtype="float64", na_value=np.nan))
    return pd.Series(values, index=ai.index, dtype=object)


def _bound_values(ai: np.ndarray, ridge: float | None, coverage: np.ndarray | None = None) -> np.ndarray:
    """`_bound` of arrays, as an object array."""
    if not ridge:
        return np.full(len(ai), None, dtype=object)
    judged = ~np.isnan(ai) if coverage is None else ~np.isnan(ai) & (coverage >= VERDICT_COVERAGE)
    return np.where(judged, np.where(ai < ridge, "memory", "compute"), None).astype(object)


def step_meta(meta: dict) -> pd.DataFrame:
    """The `steps` metadata (batch, new tokens, context per step) as a frame keyed by phase/step."""
    steps = [s for s in meta.get("steps") or [] if isinstance(s, dict)]
    frame = step_records(steps, {"phase": lambda s: s.get("phase"), "step": lambda s: s.get("index", s.get("step")),
                                 "batch": lambda s: s.get("batch"), "new_tokens": lambda s: s.get("new_tokens"),
                                 "tokens": lambda s: s.get("tokens", s.get("new_tokens")),
                                 "context": lambda s: s.get("context")})
    return frame.drop_duplicates(["phase", "step"])


def _with_phase_sources(out: pd.DataFrame, meta: dict) -> pd.DataFrame:
    """`phase_source` (marker / inferred, rooftop.steps.infer_phases) and `phase_reason` of each step row,
    from its metadata entry (text columns: `step_meta` keeps numbers only)."""
    src, why = {}, {}
    for s in meta.get("steps") or []:
        if isinstance(s, dict) and isinstance(s.get("phase"), str):
            key = (s["phase"], s.get("index", s.get("step")))
            src.setdefault(key, s.get("phase_source"))
            why.setdefault(key, s.get("phase_reason"))
    keys = list(zip(out["phase"].astype(object).tolist(), out["step"].tolist()))
    return out.assign(phase_source=[src.get(k) for k in keys], phase_reason=[why.get(k) for k in keys])


def step_records(steps: list[dict], fields: dict, floats: bool = False) -> pd.DataFrame:
    """One row per step entry, one column per field (`fields`: name -> how it is read from an
    entry): "phase" as given, every other column `pd.to_numeric` (errors null; then float64 if
    `floats`) of what a frame of the entries holds. Made from arrays where the phases are text and
    every number a plain int or float (what writers store: a long run has thousands of steps);
    pandas' own way otherwise."""
    values = {name: [get(s) for s in steps] for name, get in fields.items()}
    numbers = _plain_numbers({k: v for k, v in values.items() if k != "phase"}) if steps else None
    if numbers is not None and all(type(p) is str for p in values["phase"]):
        if floats:
            numbers = {k: v.astype("float64") for k, v in numbers.items()}
        return pd.DataFrame({"phase": pd.array(values["phase"], dtype="str"), **numbers})
    frame = pd.DataFrame([dict(zip(values, row)) for row in zip(*values.values())], columns=list(fields))
    for c in frame.columns[1:]:
        frame[c] = pd.to_numeric(frame[c], errors="coerce")
        if floats:
            frame[c] = frame[c].astype("float64")
    return frame


def first_positions(keys, wanted) -> np.ndarray:
    """For each key of `wanted`, the position of its first occurrence among `keys` (-1: none; a key
    given as None is no key): a step table's row of each (phase, step), through a dict rather than
    a MultiIndex `reindex`."""
    at: dict = {}
    for i, key in enumerate(keys):
        if key is not None:
            at.setdefault(key, i)
    return np.fromiter((at.get(key, -1) for key in wanted), dtype=np.int64)


def taken(values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """`values[at]` as float64, NaN where `at` is -1 (a new array)."""
    values = np.asarray(values, dtype="float64")
    return np.where(at >= 0, values[at.clip(0)], np.nan) if len(values) else np.full(len(at), np.nan)


def _plain_numbers(columns: dict[str, list]) -> dict[str, np.ndarray] | None:
    """Each list as `pd.to_numeric` makes a frame's column of it: int64 where every value is an int,
    float64 (NaN for None) where each is an int, a float or None; None if any value is something
    else (text, a bool) or an int past int64."""
    out = {}
    for name, vals in columns.items():
        kinds = set(map(type, vals))
        if not kinds <= {int, float, type(None)}:
            return None
        if int in kinds and any(type(v) is int and not -(1 << 63) <= v < 1 << 63 for v in vals):
            return None
        out[name] = np.array(vals, dtype=np.int64) if kinds == {int} else \
            np.array([np.nan if v is None else v for v in vals], dtype="float64")
    return out


def labelled(timed: pd.DataFrame) -> pd.DataFrame:
    """Timed rows with a phase label (NO_PHASE where no phase range encloses them)."""
    if "_prepared" in timed.columns or not timed["phase"].isna().any():
        return timed
    phase = timed["phase"].astype(object).where(timed["phase"].notna(), NO_PHASE)
    return timed.assign(phase=phase)


# What `_stat_arrays` and the step and phase tables read of the prepared rows.
_STAT_COLUMNS = ("rank", "device", "phase", "step", "kind", "start_ns", "end_ns", "dur_ns", "bytes", "work_flops",
                 "copy_class", "bytes_src", "flops_src", "_prepared")


def _stat_columns(rows: pd.DataFrame) -> pd.DataFrame:
    """The prepared rows with only the columns the tables read: a filter or an added column then
    copies these, not the ~60 columns of the trace (~0.1 s a copy at 1M kernels)."""
    return rows[[c for c in _STAT_COLUMNS if c in rows.columns]]


def step_table(timed: pd.DataFrame, meta: dict, peak_flops=None, peak_bw=None, ridge=None) -> pd.DataFrame:
    """One row per (rank,) phase, step. Rows without a step number are left out."""
    rows = _stat_columns(prepare(timed))
    rows = rows[rows["step"].notna()]
    keys = (["rank"] if "rank" in rows.columns and rows["rank"].notna().any() else []) + ["phase", "step"]
    if multi_device(rows):  # one GPU at a time: a step's figures per device (per_device.py)
        keys.insert(len(keys) - 2, "device")
    if rows.empty:
        return pd.DataFrame(columns=keys + ["kernels", "span_ns", "busy_ns", "idle_ns", "mbu", "mfu"])
    columns, index, _ = _stat_arrays(rows, keys)
    columns.update(rate_arrays({c: np.asarray(columns[c], dtype="float64") for c in _RATE_INPUTS}, peak_flops, peak_bw))
    out = _frame(columns, index).reset_index()
    out["step"] = out["step"].astype("int64")
    sm = step_meta(meta)
    out = out.merge(sm, on=["phase", "step"], how="left") if not sm.empty else out.assign(
        batch=np.nan, new_tokens=np.nan, tokens=np.nan, context=np.nan)
    out["tokens_per_s"] = out["new_tokens"] / (out["span_ns"].where(out["span_ns"] > 0) / 1e9)
    out["bound"] = _bound(out["ai"], ridge, out["ai_coverage"])
    out = _with_phase_sources(out, meta)
    return out.sort_values(keys[:-2] + ["start_ns"], kind="stable").reset_index(drop=True)


def phase_table(timed: pd.DataFrame, steps: pd.DataFrame, meta: dict, peak_flops=None, peak_bw=None,
                ridge=None) -> pd.DataFrame:
    """One row per phase. Span and busy are summed over the phase's steps (time between steps —
    sampling, host work — is not the phase's); a phase without step numbers is one step."""
    rows = prepare(timed)
    if rows.empty:
        return pd.DataFrame(columns=["phase", "steps", "kernels", "span_ns", "busy_ns", "mbu", "mfu"])
    rows = _stat_columns(rows).assign(_step=rows["step"].to_numpy(dtype="float64", na_value=-1.0))
    if "rank" in rows.columns and rows["rank"].notna().any():
        # Multi-rank: the phase table is rank 0's (or the lowest rank's); per-rank tables are separate.
        rows = rows[rows["rank"] == rows["rank"].min()]
    if "device" in rows.columns and rows["device"].nunique() > 1:
        rows = rows[rows["device"] == rows["device"].min()]  # and of one GPU (per_device.py)
    per_step, index, gid = _stat_arrays(rows, ["phase", "_step"])
    # each (phase, step) group's phase, numbered as `groupby("phase", sort=False)` numbers them
    step_phase = index.get_level_values("phase")
    pcode, _ = pd.factorize(step_phase)
    phases = step_phase.take(first_rows(pcode))
    k = len(phases)
    # the float sums as pandas makes them (compensated: two grouped sums over all the columns, each
    # summed as alone), the integer ones and the first start exactly, in NumPy
    g = pd.DataFrame({c: per_step[c] for c in ("busy_ns", "kernel_ns", *SUM_COLUMNS, *_KNOWN)}).groupby(pcode, sort=False)
    sums = g[["busy_ns", "kernel_ns", *SUM_COLUMNS]].sum()
    known = g[list(_KNOWN)].sum(min_count=1)
    # rows outside any step (_step -1) are timed with the phase but are not a step
    out = {"steps": _int_sums(pcode, index.get_level_values("_step").to_numpy() >= 0, k),
           "kernels": _int_sums(pcode, per_step["kernels"], k), "span_ns": _int_sums(pcode, per_step["span_ns"], k),
           "busy_ns": sums["busy_ns"].to_numpy(), "kernel_ns": sums["kernel_ns"].to_numpy(),
           "flops": known["flops"].to_numpy(), "bytes": known["bytes"].to_numpy(),
           **{c: sums[c].to_numpy() for c in SUM_COLUMNS},
           "both_flops": known["both_flops"].to_numpy(), "both_bytes": known["both_bytes"].to_numpy()}
    first_ns = np.full(k, np.iinfo(np.int64).max)
    np.minimum.at(first_ns, pcode, per_step["start_ns"])
    out.update(coverages(out))
    # Work outside every step window (before the first, between, after the last: rooftop.steps) is no
    # step, and its pieces lie between steps: no step count, no span across the run, its GPU time only.
    outside = np.asarray(phases.isin(OUTSIDE_STEPS), dtype=bool)
    if outside.any():
        out["steps"] = np.where(outside, 0, out["steps"])
        out["span_ns"] = np.where(outside, out["busy_ns"], out["span_ns"]).astype(out["span_ns"].dtype)
    row_phase = pcode[gid]
    out["bytes_source"] = source_labels(rows["bytes_src"].to_numpy(), row_phase, k)
    out["flops_source"] = source_labels(rows["flops_src"].to_numpy(), row_phase, k)
    span = out["span_ns"]
    out.update(idle_columns(span, out["busy_ns"]))
    out.update(rate_arrays({c: np.asarray(out[c], dtype="float64") for c in _RATE_INPUTS}, peak_flops, peak_bw))
    # Tokens: from step metadata where the steps carry it.
    if not steps.empty and "tokens" in steps:
        tok = steps.groupby("phase")["tokens"].sum(min_count=1)
        out["tokens"] = tok.reindex(phases).to_numpy(dtype="float64", na_value=np.nan)
    else:
        out["tokens"] = np.full(k, np.nan)
    out["tokens_per_s"] = out["tokens"] / (where_positive(span) / 1e9)
    if not steps.empty and "model_mbu" in steps:
        # Span-weighted mean of the per-step model MBU = total model bytes / total span / peak.
        w = steps.dropna(subset=["model_mbu"])
        mm = (w["model_mbu"] * w["span_ns"]).groupby(w["phase"]).sum() / w.groupby("phase")["span_ns"].sum()
        out["model_mbu"] = mm.reindex(phases).to_numpy(dtype="float64", na_value=np.nan)
    else:
        out["model_mbu"] = np.full(k, np.nan)
    out["bound"] = _bound_values(out["ai"], ridge, out["ai_coverage"])
    order = np.argsort(first_ns, kind="quicksort")  # (what `sort_values("first_ns")` does)
    objects = _STATUS + ("bound",)
    return pd.DataFrame({"phase": phases.take(order),
                         **{c: pd.Series(v[order], dtype=object) if c in objects else v[order] for c, v in out.items()}})


_KNOWN = ("flops", "bytes", "both_flops", "both_bytes")  # sums that are null where no row knows them


def _int_sums(codes: np.ndarray, values, n: int) -> np.ndarray:
    """Per code, the exact int64 sum of `values` (integers or booleans)."""
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, codes, np.asarray(values, dtype=np.int64))
    return out


def per_rank_steps(steps: pd.DataFrame) -> pd.DataFrame | None:
    """Multi-rank runs: per step, the straggler rank and the rank-to-rank spread of step time."""
    if steps.empty or "rank" not in steps.columns or steps["rank"].nunique() < 2:
        return None
    g = steps.groupby(["phase", "step"], sort=False)
    idx = g["span_ns"].idxmax()
    out = pd.DataFrame({
        "ranks": g["rank"].nunique(),
        "min_ns": g["span_ns"].min(),
        "median_ns": g["span_ns"].median(),
        "max_ns": g["span_ns"].max(),
    })
    out["straggler"] = steps.loc[idx.to_numpy(), "rank"].to_numpy()
    out["spread"] = (out["max_ns"] - out["min_ns"]) / out["median_ns"].where(out["median_ns"] > 0)
    return out.reset_index()


def per_rank_phases(timed: pd.DataFrame, meta: dict, peak_flops=None, peak_bw=None, ridge=None) -> pd.DataFrame | None:
    if "rank" not in timed.columns or timed["rank"].nunique() < 2:
        return None
    frames = []
    for rank, rows in timed.groupby("rank", sort=True):
        pt = phase_table(rows.drop(columns=["rank"]), pd.DataFrame(), meta, peak_flops, peak_bw, ridge)
        frames.append(pt.assign(rank=int(rank)))
    return pd.concat(frames, ignore_index=True)


def elem_bytes(meta: dict) -> int:
    # the trace's compute dtype, as the peaks use it (model, else workload, else bf16)
    return dtype_bytes(trace_dtype(meta))


def both_utilizations(phases: pd.DataFrame, peaks) -> pd.DataFrame:
    """MBU and MFU against the datasheet and against the measured (calibrated) ceilings, side by
    side: "% of datasheet" says how far from the spec, "% of measured" how far from what this GPU
    can really do. A column is null where that ceiling is unknown."""
    if phases.empty:
        return phases
    span_s = phases["span_ns"].astype("float64").where(phases["span_ns"] > 0) / 1e9
    bw = (phases["bytes"].astype("float64") / span_s).where(phases["bytes_coverage"] >= MIN_COVERAGE)
    fl = (phases["flops"].astype("float64") / span_s).where(phases["flops_coverage"] >= MIN_COVERAGE)
    for name, value, peak in (("mbu_datasheet", bw, peaks.datasheet_bw), ("mbu_measured", bw, peaks.measured_bw),
                              ("mfu_datasheet", fl, peaks.datasheet_flops), ("mfu_measured", fl, peaks.measured_flops)):
        phases[name] = value / peak if peak else np.nan
    return phases
