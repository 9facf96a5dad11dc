"""The NVTX range tree of one step: every path prefix, with its time and the kernels under it."""
from __future__ import annotations

import pandas as pd


def range_tree(events: pd.DataFrame, timed: pd.DataFrame, phase: str | None, step: int | None) -> pd.DataFrame:
    """Rows in depth-first display order: path, depth, name, start_ns, dur_ns, kernels, kernel_ns.

    A node's time comes from its `range` row where the trace has one, else from the span of the
    kernels under it (first start to last end).
    """
    cols = ["path", "depth", "name", "start_ns", "dur_ns", "kernels", "kernel_ns"]
    sel = timed
    if phase is not None:
        sel = sel[sel["phase"] == phase]
    if step is not None:
        sel = sel[sel["step"] == step]
    sel = sel[sel["path"].notna()]
    if sel.empty:
        return pd.DataFrame(columns=cols)
    ends = sel["start_ns"] + sel["dur_ns"]
    paths = sel["path"].astype(str)
    parts = paths.str.split("/")
    max_depth = int(parts.str.len().max())
    frames = []
    for depth in range(1, max_depth + 1):
        has = parts.str.len() >= depth
        prefix = parts[has].str[:depth].str.join("/")
        frames.append(pd.DataFrame({"path": prefix, "depth": depth - 1, "start": sel.loc[has, "start_ns"],
                                    "end": ends[has], "dur": sel.loc[has, "dur_ns"]}))
    allp = pd.concat(frames)
    g = allp.groupby("path", sort=False)
    nodes = pd.DataFrame({"depth": g["depth"].first(), "start_ns": g["start"].min(), "end": g["end"].max(),
                          "kernels": g.size(), "kernel_ns": g["dur"].sum()})
    nodes["dur_ns"] = nodes["end"] - nodes["start_ns"]
    ranges = events[(events["kind"] == "range") & events["path"].isin(nodes.index)]
    if not ranges.empty:
        r = ranges.groupby("path").agg(rs=("start_ns", "min"), rd=("dur_ns", "max"))
        nodes = nodes.join(r)
        has_r = nodes["rs"].notna()
        nodes.loc[has_r, "start_ns"] = nodes.loc[has_r, "rs"]
        nodes.loc[has_r, "dur_ns"] = nodes.loc[has_r, "rd"]
    nodes = nodes.reset_index()
    nodes["name"] = nodes["path"].str.rsplit("/", n=1).str[-1]
    # Depth-first order: sort by the start of each ancestor chain (stable on path for ties).
    nodes = nodes.sort_values(["start_ns", "depth"], kind="stable")
    order, children = [], {}
    for p in nodes["path"]:
        parent = p.rsplit("/", 1)[0] if "/" in p else None
        children.setdefault(parent, []).append(p)
    def walk(parent):
        for c in children.get(parent, []):
            order.append(c)
            walk(c)
    roots = [p for p in nodes["path"] if ("/" not in p) or p.rsplit("/", 1)[0] not in set(nodes["path"])]
    seen = set()
    for r in roots:
        if r not in seen:
            seen.add(r)
            order.append(r)
            walk(r)
    nodes = nodes.set_index("path").loc[order].reset_index()
    return nodes[cols]
