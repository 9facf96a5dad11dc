"""The NVTX range tree of one step: every path prefix, with its time and the kernels under it."""
from __future__ import annotations

import pandas as pd


def range_tree(events: pd.DataFrame, timed: pd.DataFrame, phase: str | None, step: int | None) -> pd.DataFrame:
    """Rows in depth-first display order: path, depth, name, start_ns, dur_ns, kernels, copies, kernel_ns.

    A node's time comes from its `range` row where the trace has one, else from the span of the
    GPU work under it (first start to last end). `kernels` counts kernel launches only; `copies`
    counts the memcpy/memset under the range; `kernel_ns` sums the time of both.
    """
    cols = ["path", "depth", "name", "start_ns", "dur_ns", "kernels", "copies", "kernel_ns"]
    sel = timed
    if phase is not None:
        sel = sel[sel["phase"] == phase]
    if step is not None:
        sel = sel[sel["step"] == step]
    sel = sel[sel["path"].notna()]
    if sel.empty:
        return pd.DataFrame(columns=cols)
    ends = sel["start_ns"] + sel["dur_ns"]
    is_kernel = (sel["kind"] == "kernel") if "kind" in sel.columns else pd.Series(True, index=sel.index)
    paths = sel["path"].astype(str)
    parts = paths.str.split("/")
    max_depth = int(parts.str.len().max())
    frames = []
    for depth in range(1, max_depth + 1):
        has = parts.str.len() >= depth
        prefix = parts[has].str[:depth].str.join("/")
        frames.append(pd.DataFrame({"path": prefix, "depth": depth - 1, "start": sel.loc[has, "start_ns"],
                                    "end": ends[has], "dur": sel.loc[has, "dur_ns"], "kernel": is_kernel[has]}))
    allp = pd.concat(frames)
    g = allp.groupby("path", sort=False)
    nodes = pd.DataFrame({"depth": g["depth"].first(), "start_ns": g["start"].min(), "end": g["end"].max(),
                          "kernels": g["kernel"].sum(), "kernel_ns": g["dur"].sum()})
    nodes["copies"] = g.size() - nodes["kernels"]
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
    # Depth-first order: siblings by start (stable on path for ties); a node whose parent has no
    # row of its own is a root. Iterative and linear in the number of ranges (a trace can nest
    # ranges thousands deep: no recursion, no per-node copy of the path set).
    nodes = nodes.sort_values(["start_ns", "depth"], kind="stable")
    paths = list(nodes["path"])
    known = set(paths)
    children: dict[str | None, list[str]] = {}
    for p in paths:
        parent = p.rsplit("/", 1)[0] if "/" in p else None
        children.setdefault(parent if parent in known else None, []).append(p)
    order: list[str] = []
    stack = list(reversed(children.get(None, [])))
    while stack:
        p = stack.pop()
        order.append(p)
        stack.extend(reversed(children.get(p, [])))
    nodes = nodes.set_index("path").loc[order].reset_index()
    return nodes[cols]
