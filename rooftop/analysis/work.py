"""The work of each timed row, as the step, phase and group tables count it: best-known bytes and FLOPs
and where each came from (measured counters, else the model), copies told apart from compute
(`copy_class`), the phase label, all made ready once (`prepare`). Definitions: `metrics`."""
from __future__ import annotations

import numpy as np
import pandas as pd

from rooftop.hardware.gpus import trace_dtype
from rooftop.llm.shapes import dtype_bytes
from rooftop.llm.op_cost import is_integer_gemm, is_link_copy


NO_PHASE = "run"  # label for timed rows that no phase range encloses (e.g. imported traces)


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


def is_copy(rows: pd.DataFrame) -> np.ndarray:
    """Per row: a memcpy or memset (from a categorical's codes: no object per row)."""
    kind = rows["kind"]
    if isinstance(kind.dtype, pd.CategoricalDtype):
        hit = np.append(np.isin(np.asarray(kind.cat.categories, dtype=object), COPY_KINDS), False)
        return hit[kind.cat.codes.to_numpy()]  # code -1 (missing) picks the trailing False
    return kind.astype(object).isin(COPY_KINDS).to_numpy()


COPY_KINDS = ("memcpy", "memset")


def labelled(timed: pd.DataFrame) -> pd.DataFrame:
    """Timed rows with a phase label (NO_PHASE where no phase range encloses them)."""
    if "_prepared" in timed.columns or not timed["phase"].isna().any():
        return timed
    phase = timed["phase"].astype(object).where(timed["phase"].notna(), NO_PHASE)
    return timed.assign(phase=phase)


def elem_bytes(meta: dict) -> int:
    # the trace's compute dtype, as the peaks use it (model, else workload, else bf16)
    return dtype_bytes(trace_dtype(meta))
