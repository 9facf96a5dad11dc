"""Idle time by cause: why the device's compute was not running.

Per window (one step of one device of one rank, `intervals.windows`; the window is the step's span:
first start to last end of its GPU rows), the **idle** time is the time of the window in which no
compute kernel runs (a compute kernel: any kernel but communication; copies and memsets are not
compute). Every idle stretch is cut by what covered it, and the rest by why nothing ran:

- `comm`: a communication kernel ran (exposed communication: compute waited for it);
- `copies`: a copy or memset ran and no communication (the copy engine busy, compute idle);
- `edge`: nothing ran, before the window's first or after its last compute kernel (the work had not
  begun or was over: a lone late copy, the tail of a capture window); not a launch gap;
- between compute kernels, nothing running, by the host's state (`host` rows: the CUDA runtime
  calls with their thread and correlation):
  - `launch`: the stretch is shorter than the launch floor (a kernel boundary, nothing to fix);
  - `sync`: the launching thread was blocked in a synchronising call (cudaStreamSynchronize,
    cudaDeviceSynchronize, an event wait, `.item()`'s blocking cudaMemcpy) that returned when the
    GPU ran dry: the GPU idled while the host caught up after waiting on it;
  - `host`: the kernel that ends the stretch was launched only after the stretch began: the GPU
    waited on the host, which was in framework or Python work (`what`: the op that launched it,
    e.g. `aten::addmm`, else the launch call);
  - `other`: the next kernel had been launched before the stretch began (it waited on an event or
    another stream), or the trace has no launch record for it.

The parts of `comm`, `copies` and the four host causes plus `edge` add up to the idle time; the
time with no GPU row at all (`edge` + `launch` + `sync` + `host` + `other`) is the window's span
minus busy of DESIGN, and launch gaps (idle between kernels of the work) are that minus `edge`.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from rooftop.analysis.ideal_time import LAUNCH_FLOOR_NS
from rooftop.analysis import intervals as iv
from rooftop.analysis.comm import _masks

CAUSES = ("comm", "copies", "edge", "launch", "sync", "host", "other")
HOST_CAUSES = ("launch", "sync", "host", "other")
TOLERANCE_NS = 1_000  # host and GPU clocks of one trace agree to about a microsecond

# Calls that block the host until the GPU has done its work: explicit syncs and event waits, and
# the synchronous (non-Async) cudaMemcpy that `.item()` / `.cpu()` issue. nsys adds `_v3020` etc.
_BLOCKING = re.compile(r"synchronize|^cu(da)?Memcpy(?!.*Async)(DtoH|HtoD|2D|3D|Peer)?(_v\d+)?$",
                       re.IGNORECASE)


def is_blocking(name) -> bool:
    return isinstance(name, str) and bool(_BLOCKING.search(name))


def _host_keys(frame: pd.DataFrame, rank_col: np.ndarray | None) -> np.ndarray:
    """Correlation ids made unique across ranks (a multi-rank trace numbers each rank's from 1)."""
    corr = frame["correlation"].to_numpy(dtype="float64", na_value=np.nan)
    key = np.where(np.isnan(corr), -1, corr).astype(np.int64)
    if rank_col is not None:
        key = np.where(key >= 0, key + (rank_col.astype(np.int64) + 1) * (1 << 44), -1)
    return key


class Causes:
    """The idle stretches of some GPU rows, cut by cause (see the module doc). `gaps`: one row per
    stretch (`cause` a categorical of CAUSES, `what` the op or call named); `table()`: the causes
    summed per window."""

    def __init__(self, rows: pd.DataFrame, host: pd.DataFrame | None = None, floor_ns: float = LAUNCH_FLOOR_NS):
        self.rows = rows
        gid, self.keys = iv.windows(rows)
        start = rows["start_ns"].to_numpy(dtype=np.int64)
        end = start + rows["dur_ns"].to_numpy(dtype=np.int64)
        stride = iv.stride_for(start, end)
        shift = gid * stride
        s, e = start + shift, end + shift
        comm, compute = _masks(rows)
        n = len(self.keys)
        lo, hi = iv.group_range(gid, n, s, e)
        wlo, whi = iv.group_range(gid, n, s, e, compute)  # first start / last end of compute
        none = wlo == np.iinfo(np.int64).max  # (no compute kernel: the whole window is edge)
        wlo, whi = np.where(none, lo, wlo), np.where(none, lo, whi)
        u_comp = iv.union(s[compute], e[compute])
        gs, ge, w = iv.free(u_comp, lo, hi)
        other = ~compute
        u_comm = iv.union(s[comm], e[comm])
        u_any = iv.union(s[other], e[other])
        comm_ns = u_comm.covered(gs, ge)
        copy_ns = u_any.covered(gs, ge) - comm_ns
        rest = (ge - gs) - comm_ns - copy_ns
        edge = (ge <= wlo[w]) | (gs >= whi[w])
        cause = np.where(edge, _C["edge"], np.where(ge - gs < floor_ns, _C["launch"], _C["other"])).astype(np.int8)
        self._vocab: list = []
        what = np.full(len(gs), -1, dtype=np.int64)
        # the compute kernel that ends each interior stretch (it starts exactly where the stretch ends)
        cpos = np.flatnonzero(compute)
        corder = cpos[np.argsort(s[cpos], kind="stable")]
        nxt = np.full(len(gs), -1, np.int64)
        if len(corder):
            j = np.searchsorted(s[corder], ge, side="left").clip(0, len(corder) - 1)
            nxt = np.where(~edge & (s[corder[j]] == ge), corder[j], -1)
        judge = (cause == _C["other"]) & (rest > 0) & (nxt >= 0)
        if host is not None and len(host) and judge.any():
            self._by_host(rows, host, gs - w * stride, ge - w * stride, nxt, judge, cause, what)
        if "op" in rows.columns:  # the op that launched the next kernel, where the host did not say
            k = np.flatnonzero((cause == _C["host"]) & (nxt >= 0) & (what < 0))
            if len(k):
                codes, uniq = _codes(rows["op"], nxt[k])
                what[k] = np.where(codes >= 0, self._add(uniq) + codes, -1)
        self.stride, self.gid = stride, gid
        self.gaps = pd.DataFrame({
            "window": w, "start_ns": gs - w * stride, "end_ns": ge - w * stride, "dur_ns": ge - gs,
            "comm_ns": comm_ns, "copies_ns": copy_ns, "idle_ns": rest,
            "cause": pd.Categorical.from_codes(cause, categories=list(CAUSES)),
            "what": pd.Categorical.from_codes(what, categories=pd.Index(self._vocab, dtype=object).unique())
            if len(set(self._vocab)) == len(self._vocab) else _labels(what, self._vocab),
            "next": nxt})
        self.n = n
        self.span = (hi - lo).astype("float64")

    def _add(self, values) -> int:
        """Append names to the vocabulary of `what`; the offset of the first."""
        off = len(self._vocab)
        self._vocab.extend(values)
        return off

    def _by_host(self, rows, host, g0, g1, nxt, judge, cause, what) -> None:
        """`sync`, `host` or `other` for the stretches under `judge`, from the launching call of the
        kernel after each (matched by correlation, and rank where the trace has ranks)."""
        multi = "rank" in rows.columns and "rank" in host.columns and rows["rank"].notna().any()
        hk = host["rank"].to_numpy(dtype="float64", na_value=-1) if multi else None
        hkey = _host_keys(host, hk)
        order = np.argsort(hkey, kind="stable")
        hkey_s = hkey[order]
        q = nxt.clip(0)
        nrows = pd.DataFrame({"correlation": rows["correlation"].to_numpy(dtype="float64", na_value=np.nan)[q]})
        gkey = _host_keys(nrows, rows["rank"].to_numpy(dtype="float64", na_value=-1)[q] if multi else None)
        at = np.searchsorted(hkey_s, gkey).clip(0, max(len(hkey_s) - 1, 0))
        found = judge & (gkey >= 0) & (hkey_s[at] == gkey) if len(hkey_s) else np.zeros(len(g0), bool)
        call = order[at]
        hs = host["start_ns"].to_numpy(dtype=np.int64)
        he = hs + host["dur_ns"].to_numpy(dtype=np.int64)
        thread = host["thread"].to_numpy(dtype="float64", na_value=-1).astype(np.int64) if "thread" in host.columns \
            else np.zeros(len(host), np.int64)
        if hk is not None:
            thread = thread + (hk.astype(np.int64) + 1) * (1 << 40)
        ncodes, names = _codes(host["name"])
        # synchronising calls on each thread, sorted by (thread, end): the first ending at or after
        # the stretch's start on the launching thread is the candidate
        blocking = np.array([is_blocking(u) for u in names] + [False], dtype=bool)[ncodes]
        bpos = np.flatnonzero(blocking)
        tcode, _ = pd.factorize(thread)
        tstride = int(max(he.max(), 1) - min(hs.min(), 0) + 1) if len(hs) else 1
        b_end = tcode[bpos].astype(np.int64) * tstride + he[bpos]
        border = np.argsort(b_end, kind="stable")
        bpos, b_end = bpos[border], b_end[border]
        launch_thread = np.where(found, tcode[call], -1).astype(np.int64)
        sync = np.zeros(len(g0), bool)
        c = np.zeros(len(g0), np.int64)
        if len(bpos):
            i = np.searchsorted(b_end, launch_thread * tstride + (g0 - TOLERANCE_NS), side="left").clip(0, len(bpos) - 1)
            c = bpos[i]
            sync = (found & (tcode[c] == launch_thread) & (he[c] >= g0 - TOLERANCE_NS)
                    & (he[c] <= g1 + TOLERANCE_NS) & (hs[c] < g0))
        late = found & ~sync & (hs[call] >= g0 - TOLERANCE_NS)
        off = self._add(names)
        cause[sync] = _C["sync"]
        what[sync] = off + ncodes[c[sync]]
        cause[late] = _C["host"]
        # the launch call's own op where the trace joined one, else (below) the kernel's op
        if "op" in host.columns:
            ocodes, ops = _codes(host["op"], call[late])
            what[np.flatnonzero(late)] = np.where(ocodes >= 0, self._add(ops) + ocodes, -1)

    def table(self) -> pd.DataFrame:
        """Per window: `idle_ns` and each cause's time (`<cause>_ns`) and share of the idle time
        (`<cause>_frac`), `span_ns`, and `launch_gaps_ns` (idle between kernels of the work with
        no GPU row running: launch + sync + host + other) and `edge_ns`."""
        g = self.gaps
        out = self.keys.copy()
        w = g["window"].to_numpy()
        rest = g["idle_ns"].to_numpy("float64")
        code = g["cause"].cat.codes.to_numpy()
        parts = {"comm": g["comm_ns"].to_numpy("float64"), "copies": g["copies_ns"].to_numpy("float64")}
        out["span_ns"] = self.span
        out["idle_ns"] = np.bincount(w, weights=g["dur_ns"].to_numpy("float64"), minlength=self.n)
        # the four host causes and edge: one bincount over (window, cause) pairs
        per = np.bincount(w * len(CAUSES) + code, weights=rest, minlength=self.n * len(CAUSES)).reshape(self.n, len(CAUSES))
        for c in CAUSES:
            out[f"{c}_ns"] = (np.bincount(w, weights=parts[c], minlength=self.n) if c in parts
                              else per[:, _C[c]])
        out["launch_gaps_ns"] = sum(out[f"{c}_ns"] for c in HOST_CAUSES)
        for c in CAUSES:
            out[f"{c}_frac"] = out[f"{c}_ns"] / out["idle_ns"].where(out["idle_ns"] > 0)
        return out

    def listed(self, min_ns: float = LAUNCH_FLOOR_NS) -> pd.DataFrame:
        """The stretches at least `min_ns` long, largest first, with their window's keys and the
        cause that holds most of each (`main`; `what`: the op or call named)."""
        g = self.gaps[self.gaps["dur_ns"] >= min_ns]
        if g.empty:
            return g.assign(rank=[], device=[], phase=[], step=[], main=[])
        parts = np.stack([g["comm_ns"].to_numpy(), g["copies_ns"].to_numpy(), g["idle_ns"].to_numpy()], axis=1)
        top = parts.argmax(axis=1)
        main = np.where(top == 0, "comm", np.where(top == 1, "copies", g["cause"].astype(object).to_numpy()))
        keys = self.keys.iloc[g["window"].to_numpy()].reset_index(drop=True)
        out = pd.concat([keys, g.reset_index(drop=True)], axis=1).assign(
            main=main, cause=g["cause"].astype(object).to_numpy(), what=g["what"].astype(object).to_numpy())
        return out.sort_values("dur_ns", ascending=False, kind="stable").reset_index(drop=True)


_C = {c: i for i, c in enumerate(CAUSES)}


def _codes(col: pd.Series, at: np.ndarray | None = None) -> tuple[np.ndarray, list]:
    """Codes (-1: missing) and distinct values of a text column (at positions `at`), each distinct
    value once: a categorical's own codes, else factorized."""
    if at is not None:
        col = col.iloc[at]
    if isinstance(col.dtype, pd.CategoricalDtype):
        return col.cat.codes.to_numpy().astype(np.int64), [str(x) for x in col.cat.categories]
    codes, uniq = pd.factorize(col.astype(object), use_na_sentinel=True)
    keep = [isinstance(u, str) for u in uniq]  # (NaN that factorize kept, numbers: no name)
    if not all(keep):
        remap = np.cumsum(keep) - 1
        codes = np.where(codes >= 0, np.where(np.array(keep)[codes.clip(0)], remap[codes.clip(0)], -1), -1)
        uniq = [u for u, k in zip(uniq, keep) if k]
    return codes.astype(np.int64), [str(u) for u in uniq]


def _labels(what: np.ndarray, vocab: list) -> pd.Categorical:
    """`what` codes into `vocab` (which may repeat a name) as a categorical of distinct names."""
    uniq, inverse = np.unique(np.asarray(vocab, dtype=object), return_inverse=True) if vocab else (np.empty(0, object), np.empty(0, np.int64))
    codes = np.where(what >= 0, np.asarray(inverse, dtype=np.int64)[what.clip(0)] if len(vocab) else -1, -1)
    return pd.Categorical.from_codes(codes, categories=pd.Index(uniq, dtype=object))


def per_phase(table: pd.DataFrame) -> pd.DataFrame:
    """The window table summed per (rank, device, phase)."""
    if table.empty:
        return table
    cols = ["span_ns", "idle_ns", "launch_gaps_ns"] + [f"{c}_ns" for c in CAUSES]
    g = table.groupby(["rank", "device", "phase"], sort=False)
    out = g[cols].sum().reset_index()
    for c in CAUSES:
        out[f"{c}_frac"] = out[f"{c}_ns"] / out["idle_ns"].where(out["idle_ns"] > 0)
    out["steps"] = g.size().to_numpy()
    return out


def label(causes: Causes, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cause, what) of each fully idle stretch [start, end) of the same rows (the timeline's
    gaps, where no GPU row runs): the cause of the idle stretch that holds it; None where none does."""
    g = causes.gaps
    start, end = np.asarray(start, np.int64), np.asarray(end, np.int64)
    cause = np.full(len(start), None, dtype=object)
    what = np.full(len(start), None, dtype=object)
    if g.empty or not len(start):
        return cause, what
    order = np.argsort(g["start_ns"].to_numpy(), kind="stable")
    gs = g["start_ns"].to_numpy()[order]
    ge = g["end_ns"].to_numpy()[order]
    i = np.searchsorted(gs, start, side="right") - 1
    ok = (i >= 0) & (ge[i.clip(0)] >= end)
    pos = order[i.clip(0)]
    cause[ok] = g["cause"].to_numpy(dtype=object)[pos[ok]]
    what[ok] = g["what"].to_numpy(dtype=object)[pos[ok]]
    return cause, what
