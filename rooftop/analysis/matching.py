"""Matching the kernels of two runs, so that a comparison pairs work with the same work.

A kernel of A and a kernel of B are the same work when, in order of preference:

1. **name**: their short names agree (same library, same GPU family: the common case);
2. **op + path**: the kernel names differ but the framework op that launched them (Kineto's
   correlation / call stack, stored in `op`), their category and their NVTX path (step and layer
   numbers elided) agree: `volta_sgemm_128x64_nn` and `cutlass_80_tensorop_s1688gemm_…` both
   launched by `aten::mm` under `fwd/linear` are the same GEMM on two GPUs or two cuBLAS versions;
3. **op**: the same without the path (a run without NVTX ranges on one side);
4. **path**: the ops differ too, but category and NVTX path agree: the same place in the model,
   lowered to other ops (`aten::cudnn_convolution` on one stack, `aten::miopen_convolution` on
   another, under the same module range).

TraceLens's TraceDiff (AMD-AGI/TraceLens, `docs/TraceDiff.md`) compares two Kineto traces at the
CPU dispatch level: it walks both call trees and matches at the lowest common node, so that
`aten::convolution` lowered to `aten::miopen_convolution` on ROCm and to `aten::cudnn_convolution`
on CUDA still pairs; levels 2-4 are that idea with what a rooftop trace keeps of the tree (the
launching op and the range path). HTA's TraceDiff (facebookresearch/HolisticTraceAnalysis
`hta/trace_diff.py`) compares ops and kernels by name, with counts and total time, and lists what
was added or removed: level 1 and the unmatched lists. Only rows not matched at a level are tried at
the next one; what is left stays keyed by its own name and is reported as unmatched.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

HOW = ("name", "op+path", "op", "path", "unmatched")


def _text(col: pd.Series) -> pd.Series:
    """A text column as object strings, null kept (categoricals are common: one cast on the categories)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        col = col.cat.rename_categories([str(c) for c in col.cat.categories])
    return col.astype(object)


def _path_shape(path: pd.Series) -> pd.Series:
    """The NVTX path with every number elided (`decode/step=12/layer=3/attn` -> `decode/step=#/layer=#/attn`,
    `ProfilerStep#551/fwd` -> `ProfilerStep##/fwd`): the same place in the model in another step."""
    cat = path.astype("category")
    if len(cat.cat.categories) == 0:
        return pd.Series([None] * len(path), index=path.index, dtype=object)
    shapes = pd.Series(cat.cat.categories.astype(str)).str.replace(r"\d+", "#", regex=True)
    codes = cat.cat.codes.to_numpy()
    out = np.where(codes >= 0, shapes.to_numpy(dtype=object)[np.maximum(codes, 0)], None)
    return pd.Series(out, index=path.index, dtype=object)


def _column(rows: pd.DataFrame, name: str) -> pd.Series:
    if name in rows.columns:
        return _text(rows[name])
    return pd.Series([None] * len(rows), index=rows.index, dtype=object)


COMBO_COLUMNS = ("short_name", "op", "category", "path", "kind")


def _codes(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(codes, categories) of a text column, -1 for null; categoricals are read without a cast."""
    if not isinstance(col.dtype, pd.CategoricalDtype):
        col = col.astype("category")
    return col.cat.codes.to_numpy().astype(np.int64), np.asarray(col.cat.categories.astype(str), dtype=object)


def _combos(rows: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """The distinct (short name, op, category, path shape, kind) of the rows: each row's combo id and
    one row per combo (text, null kept). Matching works on these (a few thousand) instead of on every
    kernel row (a million)."""
    n = len(rows)
    codes, values = [], []
    for name in COMBO_COLUMNS:
        if name not in rows.columns:
            codes.append(np.full(n, -1, dtype=np.int64))
            values.append(np.array([], dtype=object))
            continue
        c, v = _codes(rows[name])
        if name == "path" and len(v):  # numbers elided on the categories, then re-coded
            shapes = pd.Series(v).str.replace(r"\d+", "#", regex=True)
            sc, sv = pd.factorize(shapes)
            c = np.where(c >= 0, sc[np.maximum(c, 0)], -1)
            v = np.asarray(sv, dtype=object)
        codes.append(c)
        values.append(v)
    if n == 0:
        return np.zeros(0, dtype=np.int64), pd.DataFrame({k: pd.Series(dtype=object) for k in COMBO_COLUMNS})
    # One integer per row: the codes combined column by column, re-numbered densely after each step
    # so the product never grows (np.unique over rows of five codes is several times slower).
    gid = np.zeros(n, dtype=np.int64)
    for c in codes:
        gid, _ = pd.factorize(gid * (int(c.max()) + 2) + (c + 1))
    # factorize numbers in order of first appearance: a combo's first row is where the running max grows.
    first = np.flatnonzero(np.r_[True, gid[1:] > np.maximum.accumulate(gid)[:-1]])
    table = {}
    for k, name in enumerate(COMBO_COLUMNS):
        c, v = codes[k][first], values[k]
        table[name] = np.where(c >= 0, v[np.maximum(c, 0)] if len(v) else None, None)
    return gid.astype(np.int64), pd.DataFrame(table)


def match_keys(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """For the timed rows of two runs, each row's match `key` and `how` it was matched (see the module
    docstring). Returns two frames indexed like `a` and `b` with columns key, how, name."""
    ga, ua = _combos(a)
    gb, ub = _combos(b)
    ka, kb = _match(ua, ub)
    return (pd.DataFrame(ka.to_numpy()[ga], index=a.index, columns=ka.columns),
            pd.DataFrame(kb.to_numpy()[gb], index=b.index, columns=kb.columns))


def _match(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`match_keys` on the combos of two runs (`_combos`): key, how, name per combo."""
    name_a, name_b = _column(a, "short_name"), _column(b, "short_name")
    name_a, name_b = name_a.where(name_a.notna(), "(unnamed)"), name_b.where(name_b.notna(), "(unnamed)")
    key_a = pd.Series(name_a, dtype=object).copy()
    key_b = pd.Series(name_b, dtype=object).copy()
    how_a = pd.Series("unmatched", index=a.index, dtype=object)
    how_b = pd.Series("unmatched", index=b.index, dtype=object)
    both = name_a.isin(set(name_b.unique())), name_b.isin(set(name_a.unique()))
    how_a[both[0]], how_b[both[1]] = "name", "name"

    def role(rows, level: str) -> pd.Series:
        """The text two rows must share at `level` (null where the row lacks what it needs)."""
        op, cat = _column(rows, "op"), _column(rows, "category").fillna("other")
        path = _path_shape(_column(rows, "path"))
        if level == "path":
            return ("at " + path + " [" + cat + "]").where(path.notna() & (path != ""))
        r = "op " + op + " [" + cat + "]"
        if level == "op+path":
            r = r + (" @ " + path).fillna("")
        return r.where(op.notna() & (op != ""))

    for level in ("op+path", "op", "path"):
        left_a, left_b = how_a == "unmatched", how_b == "unmatched"
        if not left_a.any() or not left_b.any():
            break
        ra, rb = role(a[left_a], level), role(b[left_b], level)
        hit_a = ra.notna() & ra.isin(set(rb.dropna().unique()))
        hit_b = rb.notna() & rb.isin(set(ra.dropna().unique()))
        # The key says what the work is: `op aten::mm [gemm] @ fwd/linear`, the same text on both sides.
        idx_a, idx_b = hit_a[hit_a].index, hit_b[hit_b].index
        key_a[idx_a], key_b[idx_b] = ra[idx_a], rb[idx_b]
        how_a[idx_a], how_b[idx_b] = level, level
    return (pd.DataFrame({"key": key_a, "how": how_a, "name": name_a}, index=a.index),
            pd.DataFrame({"key": key_b, "how": how_b, "name": name_b}, index=b.index))


def _per_family(dur: np.ndarray, gid: np.ndarray, combos: pd.DataFrame, keys: pd.DataFrame) -> pd.DataFrame:
    """Per match key: how, category (most time), count, time, per-call mean and variance (ddof 1, from
    per-combo sums of squared deviations, so no large-number cancellation), the name with most time."""
    cols = ["how", "category", "count", "time_ns", "mean_ns", "var_ns2", "name", "names"]
    if len(dur) == 0:
        return pd.DataFrame(columns=cols)
    m = len(combos)
    n_c = np.bincount(gid, minlength=m).astype(float)
    sum_c = np.bincount(gid, weights=dur, minlength=m)
    mean_c = sum_c / np.where(n_c > 0, n_c, 1)
    ss_c = np.bincount(gid, weights=(dur - mean_c[gid]) ** 2, minlength=m)
    cat = _column(combos, "category").fillna("other")
    # Copies and memsets are their own cause (moved bytes, not compute): "copy" whatever their category.
    cat = cat.where(~_column(combos, "kind").isin(["memcpy", "memset"]), "copy")
    f = pd.DataFrame({"key": keys["key"].to_numpy(), "how": keys["how"].to_numpy(), "name": keys["name"].to_numpy(),
                      "category": cat.to_numpy(), "n": n_c, "sum": sum_c, "mean": mean_c, "ss": ss_c})
    f = f[f["n"] > 0]
    g = f.groupby("key", sort=False)
    out = pd.DataFrame({"how": g["how"].first(), "count": g["n"].sum(), "time_ns": g["sum"].sum()})
    out["mean_ns"] = out["time_ns"] / out["count"]
    # Σ over combos of (their own squared deviations + n · (combo mean - family mean)²)
    fm = out["mean_ns"].reindex(f["key"]).to_numpy()
    between = f["n"].to_numpy() * (f["mean"].to_numpy() - fm) ** 2
    ss = pd.Series(f["ss"].to_numpy() + between).groupby(f["key"].to_numpy(), sort=False).sum()
    out["var_ns2"] = (ss.reindex(out.index) / (out["count"] - 1)).where(out["count"] > 1)

    def top(col):  # the value with most time in each family
        t = f.groupby(["key", col], sort=False)["sum"].sum().reset_index().sort_values("sum", ascending=False)
        return t.drop_duplicates("key").set_index("key")[col]
    out["category"] = top("category")
    out["name"] = top("name")
    out["names"] = f.groupby("key", sort=False)["name"].nunique()
    return out[cols]


def families(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """The kernel families of two runs' timed rows, matched (see `match_keys`): one row per family with
    how it matched, its category, and per side count, time, per-call mean and variance and the name
    with most time (`name_a`, `name_b`: they differ for a family matched by op). `status` is `both`,
    `only in A` or `only in B`; unknown per side is null."""
    ga, ua = _combos(a)
    gb, ub = _combos(b)
    ka, kb = _match(ua, ub)
    fa = _per_family(a["dur_ns"].to_numpy(dtype="float64") if len(a) else np.zeros(0), ga, ua, ka)
    fb = _per_family(b["dur_ns"].to_numpy(dtype="float64") if len(b) else np.zeros(0), gb, ub, kb)
    cols = ["count", "time_ns", "mean_ns", "var_ns2", "name", "names"]
    out = fa[cols].add_suffix("_a").join(fb[cols].add_suffix("_b"), how="outer")
    out["how"] = fa["how"].reindex(out.index).fillna(fb["how"].reindex(out.index))
    out["category"] = fa["category"].reindex(out.index).fillna(fb["category"].reindex(out.index))
    has_a, has_b = out["count_a"].notna(), out["count_b"].notna()
    out["status"] = np.where(has_a & has_b, "both", np.where(has_a, "only in A", "only in B"))
    out["how"] = out["how"].where(out["status"] == "both", "unmatched")
    out.index.name = "key"
    return out.reset_index()
