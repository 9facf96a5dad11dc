"""Each kernel judged against its own roof, and a group's verdict as the time-weighted mix of them.

Definitions (docs/definitions.md, "Bound"):

- A kernel's work is its FLOPs, or for int8 work its integer tensor ops (`int_ops`, counted by ncu
  as IMMA/IGMMA ops; never FLOPs). Its compute peak is the dense peak of its own dtype and pipe
  (`Peaks.ops_for`: fp32 CUDA cores, tf32/bf16/fp16/fp8/fp4 tensor, int8 tensor TOPS). Its ridge is
  that peak / peak bandwidth (`devices.ridge_point`); AI = work / bytes.
- Left of its ridge a kernel is memory-bound, right of it compute-bound; short (mean < 5 us) and
  under 10% of its attainable rate min(peak, bandwidth x AI), latency-bound. A kernel whose dtype
  is unknown is memory-bound when its AI is left of the lowest ridge the device has and compute-bound
  right of the highest (it would be so whatever its dtype); between them it is not judged. Work or
  bytes unknown: not judged. Host/peer copies run at link speed: never judged against HBM and left
  out of the mix's time. A kernel above its own roof (> 105% of its attainable rate) is not judged:
  its bytes or work are not what ran.
- A kernel's ideal time is max(bytes / bandwidth, work / its dtype's peak); its share of the right
  peak is work / time / its peak where compute-bound, bytes / time / bandwidth otherwise.
- A group's (step's, phase's) mix: the share of its judged kernel time under each bound. Its
  verdict is the bound that holds for at least DOMINANT of that time, `mixed` where none does, and
  null where the judged time is below VERDICT_COVERAGE of the group's kernel time. The share of the
  peak of a verdict is over the kernels under it: their ideal compute (or memory) time over their
  time, i.e. each kernel weighted by its time against its own peak.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from rooftop.hardware.gpus import FLOAT_DTYPES, PHYSICS_SLACK, Peaks, normalize_dtype
from rooftop.present.format import fmt_pct
from rooftop.analysis.aggregate import grouped
from rooftop.analysis.rates import VERDICT_COVERAGE
from rooftop.analysis.work import LINK_COPY, distinct_codes

BOUNDS = ("memory", "compute", "latency")
UNJUDGED = -1
DOMINANT = 2 / 3
LATENCY_NS = 5_000
LATENCY_ROOF_FRAC = 0.10
ABOVE_ROOF = PHYSICS_SLACK  # a kernel faster than this share of its own roof is not what ran


def resolve_dtypes(rows: pd.DataFrame, said: str | None = None) -> tuple[pd.Series, pd.Series]:
    """Per row, the compute dtype from the best evidence the trace has, and which evidence:

    1. "counters": the importer's `dtype` on a row with hardware counters (ncu instruction counters
       per pipe, a range-profiler trace's);
    2. "name": a kernel name that spells a dtype (`..._tf32...`, `sgemm`, `e4m3`): more specific
       than the op's inputs (an fp32 `aten::mm` with TF32 on runs a tf32 kernel);
    3. "op": the importer's `dtype` from the launching op's input types (Kineto `Input type`);
    4. "trace": the dtype the trace's metadata states for the model (`said`);
    else missing. Copies and memsets compute nothing: no dtype. Each distinct value is classified
    once."""
    from rooftop.analysis.ceilings import name_dtype

    n = len(rows)
    names = list(dict.fromkeys([*_ALL_DTYPES, *([said] if said else [])]))
    code_of = {d: i for i, d in enumerate(names)}

    def coded(col: pd.Series, classify) -> np.ndarray:
        """Per row, the code of `classify(value)` (-1: none), classifying each distinct value once."""
        codes, uniq = distinct_codes(col)
        table = np.array([code_of.get(classify(u), -1) if isinstance(u, str) else -1 for u in uniq] + [-1], np.int16)
        return table[codes]

    out = np.full(n, -1, np.int16)
    src = np.full(n, -1, np.int8)  # index into _SOURCES
    given = coded(rows["dtype"], normalize_dtype) if "dtype" in rows.columns else np.full(n, -1, np.int16)
    counted = rows["counters"].fillna(False).to_numpy(dtype=bool) if "counters" in rows.columns else np.zeros(n, bool)
    has = given >= 0
    take = has & counted
    out[take], src[take] = given[take], 0
    if "name" in rows.columns and (out < 0).any():
        by_name = coded(rows["name"], name_dtype)
        fill = (out < 0) & (by_name >= 0)
        out[fill], src[fill] = by_name[fill], 1
    fill = (out < 0) & has
    out[fill], src[fill] = given[fill], 2
    if said:
        copies = rows["kind"].isin(("memcpy", "memset")).to_numpy(dtype=bool) if "kind" in rows.columns else np.zeros(n, bool)
        fill = (out < 0) & ~copies
        out[fill], src[fill] = code_of[said], 3
    return (pd.Series(pd.Categorical.from_codes(out, categories=names), index=rows.index, name="dtype"),
            pd.Series(pd.Categorical.from_codes(src, categories=list(_SOURCES)), index=rows.index, name="dtype_from"))


_ALL_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "fp64", "int8")
_SOURCES = ("counters", "name", "op", "trace")


def _ridges(peaks: Peaks) -> tuple[float, float]:
    """The lowest and highest ridge among the device's float dtypes (NaN when none is known)."""
    vals = [peaks.flops_for(d) for d in FLOAT_DTYPES]
    vals = [v for v in vals if v]
    if not vals or not peaks.bw:
        return np.nan, np.nan
    return min(vals) / peaks.bw, max(vals) / peaks.bw


def kernel_verdicts(rows: pd.DataFrame, peaks: Peaks) -> pd.DataFrame:
    """Per prepared timed row (`work.prepare`, with `dtype`): work, peak, ridge, AI, bound code
    (index into BOUNDS, UNJUDGED = -1), ideal_ns and share of its peak. Vectorised: one peak lookup
    per distinct dtype."""
    n = len(rows)
    idx = rows.index
    dur = rows["dur_ns"].to_numpy(dtype="float64", na_value=np.nan)
    flops = rows["work_flops"].to_numpy(dtype="float64", na_value=np.nan)
    nbytes = rows["bytes"].to_numpy(dtype="float64", na_value=np.nan)
    copy = rows["copy_class"].to_numpy() if "copy_class" in rows.columns else np.zeros(n, np.int8)
    int_ops = (rows["int_ops"].to_numpy(dtype="float64", na_value=np.nan) if "int_ops" in rows.columns
               else np.full(n, np.nan))
    dtypes = rows["dtype"] if "dtype" in rows.columns else pd.Series([None] * n, index=idx)
    codes, uniq = distinct_codes(dtypes)
    norm = [normalize_dtype(u) if isinstance(u, str) else None for u in uniq]
    peak_table = np.array([(peaks.ops_for(d) or np.nan) if d else np.nan for d in norm] + [np.nan], dtype="float64")
    is_int = np.array([d == "int8" for d in norm] + [False], dtype=bool)[codes]
    known_dtype = np.array([d is not None for d in norm] + [False], dtype=bool)[codes]
    peak = peak_table[codes]
    work = np.where(is_int, int_ops, flops)
    bw = float(peaks.bw) if peaks.bw else np.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        ai = np.where(nbytes > 0, work / nbytes, np.where(work > 0, np.inf, np.nan))
        ridge = peak / bw
        lo, hi = _ridges(peaks)
        judged = np.isfinite(bw) & ~np.isnan(work) & ~np.isnan(nbytes) & (copy != LINK_COPY) & (dur > 0)
        own = judged & known_dtype & ~np.isnan(ridge)
        guess = judged & ~known_dtype & ((ai < lo) | (ai > hi))  # unknown dtype: bound whatever it is
        compute = np.where(own, ai >= ridge, ai > hi)
        code = np.where(own | guess, np.where(compute, 1, 0), UNJUDGED).astype(np.int8)
        t_mem = nbytes / bw * 1e9
        t_cmp = work / peak * 1e9
        ideal = np.fmax(t_mem, np.where(known_dtype, t_cmp, np.nan))
        ideal = np.where(code >= 0, ideal, np.nan)
        share = np.where(code == 1, t_cmp / dur, np.where(code == 0, t_mem / dur, np.nan))
        attainable_frac = np.where(code >= 0, ideal / dur, np.nan)
    latency = (code >= 0) & (dur < LATENCY_NS) & (attainable_frac < LATENCY_ROOF_FRAC)
    code = np.where(latency, 2, code).astype(np.int8)
    # faster than its own roof: its bytes or work are not what ran (L2-resident data, a wrong dtype
    # or device), so its bound is no evidence (the above-roof finding says so for its group)
    above = (code >= 0) & (attainable_frac > ABOVE_ROOF)
    code = np.where(above, UNJUDGED, code).astype(np.int8)
    share = np.where(above, np.nan, share)
    ideal = np.where(above, np.nan, ideal)
    return pd.DataFrame({"work": work, "peak": peak, "ai": ai, "ridge": ridge, "bound_code": code,
                         "ideal_ns": ideal, "peak_share": share,
                         "link": copy == LINK_COPY}, index=idx)


def _top(gid: np.ndarray, values: pd.Series, weight: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group, the value with most weight among rows of positive weight, and how many distinct
    values those rows hold (the rows are taken, not rewritten: a categorical keeps its codes)."""
    from rooftop.analysis.groups import top_by_weight

    keep = np.flatnonzero(weight > 0)
    return top_by_weight(gid[keep], values.iloc[keep], weight[keep], n, dropna=True)


def bound_mix(rows: pd.DataFrame, verdicts: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per `keys` group of `rows`: the share of its judged time under each bound, the verdict
    (`memory`/`compute`/`latency`, `mixed`, or None), the verdict's share of its peak, dtype and
    category (by time), and the sentence that says it. Indexed by the group keys."""
    v = verdicts.reindex(rows.index)
    code = v["bound_code"].to_numpy()
    dur = rows["dur_ns"].to_numpy(dtype="float64", na_value=0.0)
    link = v["link"].to_numpy(dtype=bool)
    gid, sizes = grouped(rows[keys], keys, dropna=False)
    n = len(sizes)
    total = np.bincount(gid, weights=np.where(link, 0.0, dur), minlength=n)
    per = np.stack([np.bincount(gid, weights=np.where(code == b, dur, 0.0), minlength=n) for b in range(len(BOUNDS))], axis=1)
    judged = per.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        shares = per / judged[:, None]
        coverage = np.where(total > 0, judged / total, np.nan)
    top = np.argmax(np.nan_to_num(shares, nan=-1.0), axis=1)
    top_share = shares[np.arange(n), top] if n else np.zeros(0)
    verdict = np.where(coverage >= VERDICT_COVERAGE, np.where(top_share >= DOMINANT, np.array(BOUNDS, dtype=object)[top], "mixed"), None)
    # the share of the right peak, per bound: ideal time of the kernels under it / their time
    ideal_part = np.where(code >= 0, v["peak_share"].to_numpy(dtype="float64") * dur, 0.0)
    ideal_part = np.nan_to_num(ideal_part)
    pct = np.stack([np.bincount(gid, weights=np.where(code == b, ideal_part, 0.0), minlength=n) for b in range(len(BOUNDS))], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(per > 0, pct / per, np.nan)
    # the verdict's kernels' dtype and category by time (the bound with most time where mixed)
    w_top = np.where(code == top[gid], dur, 0.0)
    none = pd.Series([None] * len(rows), index=rows.index)
    dtype, n_dtypes = _top(gid, rows["dtype"] if "dtype" in rows.columns else none, w_top, n)
    cat, _ = _top(gid, rows["category"] if "category" in rows.columns else none, w_top, n)
    # several dtypes under the verdict: each was judged against its own peak, named as "bf16+"
    dtype = np.array([f"{d}+" if isinstance(d, str) and k > 1 else d for d, k in zip(dtype, n_dtypes)], dtype=object)
    out = pd.DataFrame({"judged_coverage": coverage, "verdict": verdict}, index=sizes.index)
    for i, b in enumerate(BOUNDS):
        out[f"{b}_share"] = shares[:, i]
        out[f"{b}_peak_share"] = pct[:, i]
    out["dtype"], out["category"] = dtype, cat
    out["verdict"] = pd.Series(verdict, index=out.index, dtype=object).where(pd.notna(verdict), None)
    out["bound_mix"] = [mix_doc(r) for r in out.to_dict("records")]
    return out


class BoundMix(dict):
    """A mix document: a plain dict to JSON, hashable (tables are deduplicated and exported) and
    shown as its sentence where a table prints it as text (a CSV export)."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(json.dumps(self, sort_keys=True, default=str))

    def __str__(self) -> str:
        return str(self.get("text") or "")


def mix_doc(r: dict) -> dict | None:
    """The JSON document of one group's mix (`phases[].bound_mix`): shares per bound, the verdict,
    its share of the peak, dtype, category and the sentence."""
    cov = r.get("judged_coverage")
    if cov is None or not np.isfinite(cov):
        return None
    v = r.get("verdict")
    doc = {"verdict": v if isinstance(v, str) else None, "judged_coverage": float(cov)}
    for b in BOUNDS:
        s, p = r.get(f"{b}_share"), r.get(f"{b}_peak_share")
        doc[b] = {"time_share": _f(s), "peak_share": _f(p)}
    d, c = r.get("dtype"), r.get("category")
    doc["dtype"] = d if isinstance(d, str) else None
    doc["category"] = c if isinstance(c, str) else None
    doc["text"] = mix_text(doc)
    return BoundMix(doc)


def _f(x) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if np.isfinite(x) else None


def _peak_words(bound: str, dtype: str | None) -> str:
    if bound == "memory":
        return "peak bandwidth"
    if bound == "compute":
        if dtype and dtype.endswith("+"):
            return "their dtypes' peaks"
        return f"the {dtype} peak" if dtype else "its dtype's peak"
    return "the roof"


def mix_text(doc: dict | None) -> str | None:
    """"compute-bound fp32 gemm, 88% of the time, at 21% of the fp32 peak"; a split mix names each
    part; below half coverage, how much was judged and why no verdict."""
    if not doc:
        return None
    v = doc.get("verdict")
    if v is None:
        return f"no verdict: only {fmt_pct(doc.get('judged_coverage'), 0)} of the kernel time has known work, bytes and peak"
    parts = []
    for b in BOUNDS:
        s = doc[b]["time_share"]
        if s and s >= 0.01:  # a sliver under another bound is not part of the sentence
            p = doc[b]["peak_share"]
            at = f", at {fmt_pct(p)} of {_peak_words(b, doc.get('dtype') if b == 'compute' else None)}" if p is not None and b != "latency" else ""
            parts.append((s, b, at))
    parts.sort(reverse=True)
    if v == "mixed":
        return "mixed: " + "; ".join(f"{b}-bound {fmt_pct(s, 0)} of the time{at}" for s, b, at in parts)
    s, b, at = next(p for p in parts if p[1] == v)
    what = " ".join(x for x in (doc.get("dtype") if v == "compute" else None, doc.get("category")) if x)
    return f"{v}-bound{(' ' + what) if what else ''}, {fmt_pct(s, 0)} of the time{at}"


def _key_values(col: pd.Series) -> np.ndarray:
    """Key values comparable across tables: numbers as float (a step is Int32 in one table and
    int64 or float in another), everything else as object."""
    if col.dtype.kind in "iuf" or isinstance(col.dtype, pd.api.extensions.ExtensionDtype) and \
            pd.api.types.is_numeric_dtype(col.dtype):
        return col.to_numpy(dtype="float64", na_value=np.nan)
    return col.astype(object).to_numpy()


def key_index(table: pd.DataFrame, keys: list[str], index: pd.Index | None = None) -> pd.Index:
    """An index of `keys` values (from `table`'s columns, or from `index`'s levels) normalised by
    `_key_values`, so two tables grouped the same way line up."""
    if index is not None:
        frame = index.to_frame(index=False) if isinstance(index, pd.MultiIndex) else pd.DataFrame({keys[0]: index})
        frame.columns = keys
    else:
        frame = table[keys]
    arrays = [_key_values(frame[k].reset_index(drop=True)) for k in keys]
    return pd.Index(arrays[0], name=keys[0]) if len(keys) == 1 else pd.MultiIndex.from_arrays(arrays, names=keys)
