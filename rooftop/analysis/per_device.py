"""One GPU at a time: the device is a dimension like the rank (docs/definitions.md).

A trace of one process driving several GPUs (tensor parallel in one process, an Nsight Systems capture
of a node) holds the rows of each device side by side: their kernels run at the same time on different
GPUs, so a span, busy time or idle share over all of them is over the union of the devices' timelines
(two GPUs each idle 10% can be idle 4% together). Per (rank,) device:

- kernels: compute kernels (copies left out, as everywhere);
- span: the device's last row end - first row start; busy: the union of its rows' intervals;
  idle = span - busy; idle_frac = idle / span;
- bytes and TB/s over the span, MBU against the peak bandwidth (a lower bound below full coverage,
  `rates.rate_arrays`);
- steps: the distinct steps that ran work on it.

The phase, step and gap tables describe the lowest device (as they describe the lowest rank): `headline`
keeps those rows. A figure over several devices says so (`merged_note`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from rooftop.analysis import aggregate, rates, work
from rooftop.analysis.device_rows import devices, multi_device

DEVICE_KEYS = ("rank", "device", "kernels", "span_ns", "busy_ns", "idle_ns", "idle_frac", "bytes", "bytes_coverage",
               "tbps", "mbu", "mbu_status", "steps")


def headline(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows (timed rows or a step table) of the lowest rank and, where it drives several GPUs, of
    its lowest device: what the phase, step-mean and gap figures describe."""
    if "rank" in frame.columns and frame["rank"].notna().any():
        frame = frame[frame["rank"] == frame["rank"].min()]
    if "device" in frame.columns and frame["device"].notna().any() and frame["device"].nunique() > 1:
        frame = frame[frame["device"] == frame["device"].min()]
    return frame


def device_table(timed: pd.DataFrame, peak_flops=None, peak_bw=None) -> pd.DataFrame | None:
    """One row per (rank,) device (`DEVICE_KEYS`); None where no rank drives several devices."""
    if not multi_device(timed):
        return None
    rows = work.prepare(timed)
    rows = rows[rows["device"].notna()]
    keys = (["rank"] if "rank" in rows.columns and rows["rank"].notna().any() else []) + ["device"]
    cols = [c for c in (*aggregate._STAT_COLUMNS, "device") if c in rows.columns]
    rows = rows[list(dict.fromkeys(cols))]
    columns, index, gid = aggregate._stat_arrays(rows, keys)
    columns.update(rates.rate_arrays({c: np.asarray(columns[c], dtype="float64") for c in rates._RATE_INPUTS},
                                       peak_flops, peak_bw))
    out = pd.DataFrame({k: np.asarray(v) for k, v in columns.items()})
    for j, k in enumerate(keys):
        out[k] = np.asarray(index.get_level_values(j) if isinstance(index, pd.MultiIndex) else index)
    step = rows["step"].to_numpy(dtype="float64", na_value=np.nan) if "step" in rows.columns else np.full(len(rows), np.nan)
    ok = ~np.isnan(step)
    out["steps"] = (pd.DataFrame({"g": gid[ok], "s": step[ok]}).drop_duplicates().groupby("g").size()
                    .reindex(range(len(out)), fill_value=0).to_numpy())
    out["device"] = out["device"].astype("int64")
    if "rank" not in out.columns:
        out["rank"] = None
    return out.sort_values(keys, kind="stable").reset_index(drop=True)[list(DEVICE_KEYS)]


def merged_note(timed: pd.DataFrame) -> str | None:
    """What a whole-trace figure merges: None for one device; else which device the phase table is."""
    if not multi_device(timed):
        return None
    rows = timed
    if "rank" in rows.columns and rows["rank"].notna().any():
        rows = rows[rows["rank"] == rows["rank"].min()]
    ds = devices(rows)
    return (f"{len(ds)} devices ({', '.join(map(str, ds))}): the phase, step and gap figures are device {ds[0]}'s "
            "(one GPU at a time); the devices table has each; the kernel-group tables merge all devices")
