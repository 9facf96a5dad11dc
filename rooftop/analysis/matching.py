"""Matching the kernels of two runs, so that a comparison pairs work with the same work.

A kernel of A and a kernel of B are the same work when, in order of preference:

1. **name**: their short names agree (same library, same GPU family: the common case);
2. **op + path**: the kernel names differ but the framework op that launched them (Kineto's
   correlation / call stack, stored in `op`), their category and their NVTX path (step and layer
   numbers elided) agree: `volta_sgemm_128x64_nn` and `cutlass_80_tensorop_s1688gemm_…` both
   launched by `aten::mm` under `fwd/linear` are the same GEMM on two GPUs or two cuBLAS versions;
3. **op**: the same without the path (a run without NVTX ranges on one side).

This follows the way TraceLens (AMD-AGI/TraceLens, `TreePerf` / trace diff) pairs GPU work across
platforms through the CPU op that launched it rather than the kernel name, and HTA's TraceDiff
(facebookresearch/HolisticTraceAnalysis `hta/trace_diff.py`), which compares ops and kernels by
name and counts and lists what only one side has. Only rows not matched at a level are tried at
the next one; what is left stays keyed by its own name and is reported as unmatched.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

HOW = ("name", "op+path", "op", "unmatched")


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


def match_keys(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """For the timed rows of two runs, each row's match `key` and `how` it was matched (see the module
    docstring). Returns two frames indexed like `a` and `b` with columns key, how, name."""
    name_a, name_b = _column(a, "short_name"), _column(b, "short_name")
    name_a, name_b = name_a.where(name_a.notna(), "(unnamed)"), name_b.where(name_b.notna(), "(unnamed)")
    key_a = pd.Series(name_a, dtype=object).copy()
    key_b = pd.Series(name_b, dtype=object).copy()
    how_a = pd.Series("unmatched", index=a.index, dtype=object)
    how_b = pd.Series("unmatched", index=b.index, dtype=object)
    both = name_a.isin(set(name_b.unique())), name_b.isin(set(name_a.unique()))
    how_a[both[0]], how_b[both[1]] = "name", "name"

    def role(rows, with_path: bool) -> pd.Series:
        op, cat = _column(rows, "op"), _column(rows, "category").fillna("other")
        r = op + " [" + cat + "]"
        if with_path:
            r = r + " @ " + _path_shape(_column(rows, "path")).fillna("")
        return r.where(op.notna() & (op != ""))

    for level, with_path in (("op+path", True), ("op", False)):
        left_a, left_b = how_a == "unmatched", how_b == "unmatched"
        if not left_a.any() or not left_b.any():
            break
        ra, rb = role(a[left_a], with_path), role(b[left_b], with_path)
        hit_a = ra.notna() & ra.isin(set(rb.dropna().unique()))
        hit_b = rb.notna() & rb.isin(set(ra.dropna().unique()))
        # The key says what the work is: `op aten::mm [gemm] @ fwd/linear`, the same text on both sides.
        idx_a, idx_b = hit_a[hit_a].index, hit_b[hit_b].index
        key_a[idx_a] = "op " + ra[idx_a].str.removesuffix(" @ ")
        key_b[idx_b] = "op " + rb[idx_b].str.removesuffix(" @ ")
        how_a[idx_a], how_b[idx_b] = level, level
    return (pd.DataFrame({"key": key_a, "how": how_a, "name": name_a}, index=a.index),
            pd.DataFrame({"key": key_b, "how": how_b, "name": name_b}, index=b.index))


def _per_family(rows: pd.DataFrame, keys: pd.DataFrame) -> pd.DataFrame:
    """Per match key: how, category (most time), count, time, per-call mean and variance, the top name."""
    if rows.empty:
        return pd.DataFrame(columns=["how", "category", "count", "time_ns", "mean_ns", "var_ns2", "name", "names"])
    dur = rows["dur_ns"].astype("float64")
    cat = _column(rows, "category").fillna("other")
    kind = _column(rows, "kind")
    # Copies and memsets are their own cause (moved bytes, not compute): "copy" whatever their category.
    cat = cat.where(~kind.isin(["memcpy", "memset"]), "copy")
    f = pd.DataFrame({"key": keys["key"].to_numpy(), "how": keys["how"].to_numpy(), "name": keys["name"].to_numpy(),
                      "category": cat.to_numpy(), "dur": dur.to_numpy()})
    g = f.groupby("key", sort=False)
    out = pd.DataFrame({"how": g["how"].first(), "count": g["dur"].size(), "time_ns": g["dur"].sum(),
                        "mean_ns": g["dur"].mean(), "var_ns2": g["dur"].var(ddof=1)})

    def top(col):  # the value with most time in each family
        t = f.groupby(["key", col], sort=False)["dur"].sum().reset_index().sort_values("dur", ascending=False)
        return t.drop_duplicates("key").set_index("key")[col]
    out["category"] = top("category")
    out["name"] = top("name")
    out["names"] = f.groupby("key", sort=False)["name"].nunique()
    return out


def families(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """The kernel families of two runs' timed rows, matched (see `match_keys`): one row per family with
    how it matched, its category, and per side count, time, per-call mean and variance and the name
    with most time (`name_a`, `name_b`: they differ for a family matched by op). `status` is `both`,
    `only in A` or `only in B`; unknown per side is null."""
    ka, kb = match_keys(a, b)
    fa, fb = _per_family(a, ka), _per_family(b, kb)
    cols = ["count", "time_ns", "mean_ns", "var_ns2", "name", "names"]
    out = fa[cols].add_suffix("_a").join(fb[cols].add_suffix("_b"), how="outer")
    out["how"] = fa["how"].reindex(out.index).fillna(fb["how"].reindex(out.index))
    out["category"] = fa["category"].reindex(out.index).fillna(fb["category"].reindex(out.index))
    has_a, has_b = out["count_a"].notna(), out["count_b"].notna()
    out["status"] = np.where(has_a & has_b, "both", np.where(has_a, "only in A", "only in B"))
    out["how"] = out["how"].where(out["status"] == "both", "unmatched")
    out.index.name = "key"
    return out.reset_index()
