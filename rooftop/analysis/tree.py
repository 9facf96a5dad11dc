"""The NVTX range tree of one step, or of the whole run: every path prefix, with its time and the kernels under it."""
from __future__ import annotations

import pandas as pd


def range_tree(events: pd.DataFrame, timed: pd.DataFrame, phase: str | None, step: int | None,
               max_nodes: int | None = None) -> pd.DataFrame:
    """Rows in depth-first display order: path, depth, name, start_ns, dur_ns, kernels, copies, kernel_ns.

    A node's time comes from its `range` row where the trace has one, else from the span of the
    GPU work under it (first start to last end). `kernels` counts kernel launches only; `copies`
    counts the memcpy/memset under the range; `kernel_ns` sums the time of both.

    `max_nodes`: the tree stops at the last depth that keeps it within that many nodes (a whole
    run of a million kernels has a few hundred thousand ranges, one subtree per step); the frame's
    `attrs["cut_below_depth"]` then says from which depth (0-based) ranges were left out, else None.
    """
    cols = ["path", "depth", "name", "start_ns", "dur_ns", "kernels", "copies", "kernel_ns"]
    sel = timed
    if phase is not None:
        sel = sel[sel["phase"] == phase]
    if step is not None:
        sel = sel[sel["step"] == step]
    sel = sel[sel["path"].notna()]
    if sel.empty:
        empty = pd.DataFrame(columns=cols)
        empty.attrs["cut_below_depth"] = None
        return empty
    ends = sel["start_ns"] + sel["dur_ns"]
    is_kernel = (sel["kind"] == "kernel") if "kind" in sel.columns else pd.Series(True, index=sel.index)
    # One row per distinct path first (a categorical: a million rows hold a few thousand paths, or
    # a few hundred thousand over a whole run), then the prefixes of those paths depth by depth:
    # strings are cut per distinct path, never per row. Min of mins, max of maxes and sums of
    # sums give each prefix what its rows would.
    path = sel["path"]
    if isinstance(path.dtype, pd.CategoricalDtype):  # group by code: one step's rows, not every category
        key, names = path.cat.codes.to_numpy(), path.cat.categories
    else:
        key, names = path.to_numpy(dtype=object), None
    per = pd.DataFrame({"path": key, "start": sel["start_ns"], "end": ends, "dur": sel["dur_ns"],
                        "kernel": is_kernel.astype("int64")})
    leaf = per.groupby("path", sort=False).agg(
        start=("start", "min"), end=("end", "max"), dur=("dur", "sum"), kernel=("kernel", "sum"),
        rows=("kernel", "size"))
    paths = [str(p) for p in (leaf.index if names is None else names[leaf.index.to_numpy()])]
    cut = [-1] * len(paths)  # where the prefix of the depth being built ends in each path
    levels, total, cut_below = [], 0, None
    depth = 0
    while True:
        prefix, keep = [], []
        for i, p in enumerate(paths):
            if cut[i] == len(p):
                continue  # the path ended at an earlier depth
            nxt = p.find("/", cut[i] + 1)
            cut[i] = len(p) if nxt < 0 else nxt
            prefix.append(p[:cut[i]])
            keep.append(i)
        if not keep:
            break
        rows = leaf.iloc[keep]
        g = pd.DataFrame({"path": prefix, "start": rows["start"].to_numpy(), "end": rows["end"].to_numpy(),
                          "dur": rows["dur"].to_numpy(), "kernel": rows["kernel"].to_numpy(),
                          "rows": rows["rows"].to_numpy()}).groupby("path", sort=False)
        level = pd.DataFrame({"depth": depth, "start_ns": g["start"].min(), "end": g["end"].max(),
                              "kernels": g["kernel"].sum(), "kernel_ns": g["dur"].sum(), "rows": g["rows"].sum()})
        if max_nodes is not None and levels and total + len(level) > max_nodes:
            cut_below = depth
            break
        levels.append(level)
        total += len(level)
        depth += 1
    nodes = pd.concat(levels)
    nodes["copies"] = nodes.pop("rows") - nodes["kernels"]
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
    nodes = nodes.set_index("path").loc[order].reset_index()[cols]
    nodes.attrs["cut_below_depth"] = cut_below
    return nodes
