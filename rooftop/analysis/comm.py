"""Exposed communication: how much of the communication kernels' time the compute kernels hid.

Per window (one step of one device of one rank, `intervals.windows`), as interval arithmetic over
the kernel rows, the definition Holistic Trace Analysis uses (`hta/analyzers/communication_analysis.py`,
`get_comm_comp_overlap`, facebookresearch/HolisticTraceAnalysis @f4d0062: the merged communication
kernel intervals against the merged computation kernel intervals of the rank; memcpy/memset are
neither):

- comm_ns: the union of the communication kernels (category `comm`: NCCL, RCCL, custom all-reduce);
- compute_ns: the union of the other kernels;
- overlapped_ns = |comm ∩ compute| = comm_ns + compute_ns - |comm ∪ compute|: communication hidden
  behind compute running on other streams;
- exposed_ns = comm_ns - overlapped_ns: time the device did nothing but communicate;
  exposed_frac = exposed_ns / comm_ns (HTA's overlap percentage is 1 - exposed_frac).

A collective's exposed part is its own duration minus the compute union inside it.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from rooftop.analysis import intervals as iv
from rooftop.analysis.work import distinct_codes

COMM_COLUMNS = ("rank", "device", "phase", "step", "comm_ns", "compute_ns", "overlapped_ns", "exposed_ns",
                "exposed_frac", "span_ns", "exposed_share")


def _is(rows: pd.DataFrame, col: str, value: str) -> np.ndarray:
    """rows[col] == value, through the column's codes (one compare per distinct value)."""
    codes, uniq = distinct_codes(rows[col])
    hit = np.array([u == value for u in uniq] + [False], dtype=bool)
    return hit[np.where(codes >= 0, codes, len(uniq))]


def _masks(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(communication kernels, compute kernels): kernels of category `comm`, and the other kernels."""
    kernel = _is(rows, "kind", "kernel") if "kind" in rows.columns else np.ones(len(rows), bool)
    comm = kernel & _is(rows, "category", "comm") if "category" in rows.columns else np.zeros(len(rows), bool)
    return comm, kernel & ~comm


class Overlap:
    """The interval sums of some GPU rows, per window (computed once, read by the tables below)."""

    def __init__(self, rows: pd.DataFrame):
        self.rows = rows
        self.gid, self.keys = iv.windows(rows)
        start = rows["start_ns"].to_numpy(dtype=np.int64)
        end = start + rows["dur_ns"].to_numpy(dtype=np.int64)
        self.stride = iv.stride_for(start, end)
        self.s, self.e = start + self.gid * self.stride, end + self.gid * self.stride
        self.comm, self.compute = _masks(rows)
        self.u_comm = iv.union(self.s[self.comm], self.e[self.comm])
        self.u_compute = iv.union(self.s[self.compute], self.e[self.compute])

    @property
    def has_comm(self) -> bool:
        return bool(self.comm.any())

    def table(self) -> pd.DataFrame:
        """One row per window that has communication kernels (COMM_COLUMNS)."""
        n = len(self.keys)
        if not self.has_comm:
            return pd.DataFrame(columns=list(COMM_COLUMNS))
        both = self.comm | self.compute
        u_both = iv.union(self.s[both], self.e[both])
        comm = self.u_comm.per_group(self.stride, n)
        comp = self.u_compute.per_group(self.stride, n)
        overlapped = comm + comp - u_both.per_group(self.stride, n)
        lo, hi = iv.group_range(self.gid, n, self.s, self.e)
        out = self.keys.copy()
        out["comm_ns"], out["compute_ns"], out["overlapped_ns"] = comm, comp, overlapped
        out["exposed_ns"] = comm - overlapped
        out["exposed_frac"] = out["exposed_ns"] / out["comm_ns"].where(out["comm_ns"] > 0)
        out["span_ns"] = (hi - lo).astype("float64")
        out["exposed_share"] = out["exposed_ns"] / out["span_ns"].where(out["span_ns"] > 0)
        return out[out["comm_ns"] > 0].reset_index(drop=True)

    def collectives(self) -> pd.DataFrame:
        """Each communication kernel with its exposed part (its duration minus the compute union
        inside it), window keys, name and bytes where the trace has them (`model_bytes`)."""
        pos = np.flatnonzero(self.comm)
        s, e = self.s[pos], self.e[pos]
        exposed = (e - s) - self.u_compute.covered(s, e)
        rows = self.rows
        col = "short_name" if "short_name" in rows.columns else "name"
        out = self.keys.iloc[self.gid[pos]].reset_index(drop=True)
        out["name"] = rows[col].iloc[pos].astype(object).to_numpy()
        out["start_ns"] = rows["start_ns"].to_numpy(dtype=np.int64)[pos]
        out["dur_ns"] = (e - s)
        out["exposed_ns"] = exposed
        out["bytes"] = (rows["model_bytes"].to_numpy(dtype="float64", na_value=np.nan)[pos]
                        if "model_bytes" in rows.columns else np.nan)
        return out


def overlap_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per window with communication: comm, compute, overlapped and exposed time (see module doc)."""
    return Overlap(rows).table()


def per_device(table: pd.DataFrame) -> pd.DataFrame:
    """The windows summed per (rank, device): the run's figures for each device."""
    if table.empty:
        return table
    g = table.groupby(["rank", "device"], sort=True)
    out = g[["comm_ns", "compute_ns", "overlapped_ns", "exposed_ns", "span_ns"]].sum().reset_index()
    out["exposed_frac"] = out["exposed_ns"] / out["comm_ns"].where(out["comm_ns"] > 0)
    out["exposed_share"] = out["exposed_ns"] / out["span_ns"].where(out["span_ns"] > 0)
    out["steps"] = g.size().to_numpy()
    return out


def top_exposed(collectives: pd.DataFrame, n: int = 5) -> pd.DataFrame:
    """The collectives with the most exposed time, by (rank, device, phase, step, name): count,
    total and exposed time, bytes (summed where every call has them, else null)."""
    if collectives.empty:
        return collectives
    keys = ["rank", "device", "phase", "step", "name"]
    g = collectives.groupby(keys, sort=False, dropna=False)
    out = g.agg(calls=("dur_ns", "size"), dur_ns=("dur_ns", "sum"), exposed_ns=("exposed_ns", "sum"),
                bytes=("bytes", lambda b: b.sum() if b.notna().all() else np.nan)).reset_index()
    out = out[out["exposed_ns"] > 0]
    return out.sort_values("exposed_ns", ascending=False, kind="stable").head(n).reset_index(drop=True)
