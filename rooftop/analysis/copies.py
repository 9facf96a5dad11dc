"""Host and peer copies against their link.

A host<->device copy (HtoD, DtoH; pinned or pageable) crosses PCIe, or NVLink-C2C on Grace parts;
a peer copy crosses NVLink (or PCIe). Its rate is judged against that link's bandwidth per
direction (`rooftop.hardware.links`), never against HBM. Per (rank, device) and direction:

- time_ns: the union of the copies' intervals (copies on several streams overlap: counted once);
- share: time_ns / the device's span (first start to last end of its GPU rows);
- rate: bytes / time_ns, where every copy's bytes are known; link_frac: rate / link bandwidth.

Device-to-device copies are HBM traffic (read + write) and stay with the kernels.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from rooftop.hardware import links
from rooftop.analysis import intervals as iv
from rooftop.analysis.work import LINK_COPY, copy_class

COPY_COLUMNS = ("rank", "device", "direction", "copies", "bytes", "time_ns", "span_ns", "share", "rate",
                "link", "link_bw", "link_frac", "link_source")

_DIRECTIONS = (("HtoD", re.compile(r"HtoD|HtoA|Host\s*(->|to)\s*Device|Pinned -> Device|Pageable -> Device", re.I)),
               ("DtoH", re.compile(r"DtoH|AtoH|Device\s*(->|to)\s*(Host|Pinned|Pageable)", re.I)),
               ("peer", re.compile(r"PtoP|Peer", re.I)))


def direction(name) -> str:
    """HtoD, DtoH, peer, or host (HtoH and what the name does not say)."""
    if isinstance(name, str):
        for d, rx in _DIRECTIONS:
            if rx.search(name):
                return d
    return "host"


def copy_table(rows: pd.DataFrame, gpu_key: str | None) -> pd.DataFrame | None:
    """One row per (rank, device, direction) with host/peer copies, plus direction "all" (their
    union, its share of the span; no link rate); None when there are none."""
    cls = rows["copy_class"].to_numpy() if "copy_class" in rows.columns else copy_class(rows)
    pos = np.flatnonzero(cls == LINK_COPY)
    if not len(pos):
        return None
    gid, keys = iv.windows(pd.DataFrame({k: rows[k] for k in ("rank", "device", "start_ns") if k in rows.columns}))
    # (no phase, no step: one window per (rank, device), the whole run)
    start = rows["start_ns"].to_numpy(dtype=np.int64)
    end = start + rows["dur_ns"].to_numpy(dtype=np.int64)
    n = len(keys)
    lo, hi = iv.group_range(gid, n, start, end)
    codes, uniq = pd.factorize(rows["name"].iloc[pos].astype(object))
    dirs = np.array([direction(u) for u in uniq] + ["host"], dtype=object)[codes]
    nbytes = rows["model_bytes"].to_numpy(dtype="float64", na_value=np.nan)[pos] if "model_bytes" in rows.columns \
        else np.full(len(pos), np.nan)
    host, peer = links.host_link(gpu_key), links.peer_link(gpu_key)
    out = []
    for d in ("all",) + tuple(x for x, _ in _DIRECTIONS) + ("host",):  # a loop over five directions
        m = np.ones(len(pos), bool) if d == "all" else dirs == d
        if not m.any():
            continue
        g = gid[pos[m]]
        stride = iv.stride_for(start, end)
        u = iv.union(start[pos[m]] + g * stride, end[pos[m]] + g * stride)
        time_ns = u.per_group(stride, n)
        count = np.bincount(g, minlength=n)
        b = np.bincount(g, weights=np.nan_to_num(nbytes[m]), minlength=n)
        unknown = np.bincount(g, weights=np.isnan(nbytes[m]).astype(float), minlength=n) > 0
        # "all" is the union of every direction: a share of time, no one link to judge it against
        link = None if d == "all" else peer if d == "peer" else host
        f = keys[["rank", "device"]].copy()
        f["direction"], f["copies"] = d, count
        f["bytes"] = np.where(unknown, np.nan, b)
        f["time_ns"], f["span_ns"] = time_ns, (hi - lo).astype("float64")
        f["share"] = f["time_ns"] / f["span_ns"].where(f["span_ns"] > 0)
        f["rate"] = f["bytes"] / (f["time_ns"].where(f["time_ns"] > 0) / 1e9)
        f["link"] = link.name if link else None
        f["link_bw"] = link.bw if link else np.nan
        f["link_frac"] = f["rate"] / f["link_bw"]
        f["link_source"] = link.source if link else None
        out.append(f[f["copies"] > 0])
    return pd.concat(out, ignore_index=True)[list(COPY_COLUMNS)]
