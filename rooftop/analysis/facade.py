"""`Analysis`: everything rooftop says about one trace, computed on demand from the analysis functions
and cached; `analyze` and `compare`, the two ways in."""
from __future__ import annotations

import dataclasses
from functools import cached_property

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from rooftop.hardware.gpus import Peaks, peaks as device_peaks, said_dtype
from rooftop.present.format import fmt_pct, is_unknown
from rooftop.trace import Trace
from rooftop.llm.shapes import ModelSpec
from rooftop.trace.names import gpu_work_counts
from rooftop.analysis import attention, bounds, ceilings, diff, findings, gap, groups, metrics, per_device, physics
from rooftop.analysis import step_cost as model_cost
from rooftop.analysis import comm, copies, graphs, idle, rates, stalls, tree, work
from rooftop.analysis.findings import Finding
from rooftop.analysis.step_cost import Workload
from rooftop.analysis.identity import trace_identity
from rooftop.analysis.kernel_detail import kernel_detail


class Analysis:
    """Everything rooftop says about one trace, computed lazily and cached."""

    def __init__(self, trace: Trace, peaks: Peaks | None = None, model: ModelSpec | None = None,
                 workload: Workload | None = None):
        self.trace = trace
        self.peaks = peaks if peaks is not None else device_peaks(trace.meta)
        # The model-level accounting: `--model` when given, else the model the trace's metadata describes.
        self.model = model if model is not None else model_cost.spec_from_meta(trace.meta)
        self.workload = workload or Workload()
        self._groups: dict[tuple, pd.DataFrame] = {}

    # --- ceilings -------------------------------------------------------------------------------
    @property
    def ridge(self) -> float | None:
        """Peak FLOP/s / peak bandwidth of the peaks in use (`devices.ridge_point`)."""
        return self.peaks.ridge

    def with_peaks(self, source: str) -> "Analysis":
        """The same trace judged against the other ceilings ("datasheet" or "measured")."""
        p = self.peaks
        if source == p.source:
            return self
        if source == "measured" and p.measured_bw and p.measured_flops:
            new = dataclasses.replace(p, flops=p.measured_flops, bw=p.measured_bw, source="measured")
        elif source == "datasheet" and p.datasheet_bw and p.datasheet_flops:
            new = dataclasses.replace(p, flops=p.datasheet_flops, bw=p.datasheet_bw, source="datasheet")
        else:
            raise ValueError(f"no {source} peaks for this trace")
        return Analysis(self.trace, new, self.model, self.workload)

    @property
    def ceilings(self) -> dict:
        p = self.peaks
        fp32 = p.table.get("fp32") if p.table else (p.gpu.peak_fp32 if p.gpu is not None else None)
        return {"bw": p.bw, "flops": p.flops, "fp32": fp32, "source": p.source}

    # --- tables ---------------------------------------------------------------------------------
    @cached_property
    def timed(self) -> pd.DataFrame:
        """The timed rows (kernels, or ops on a CPU run), prepared once: phase label, end time,
        best-known bytes/FLOPs and their sources (see `work.prepare`)."""
        rows = work.prepare(self.trace.timed())
        rows = graphs.with_layers(rows)  # layers of CUDA-graph replays, from their structure (labelled inferred)
        if len(rows):
            # each kernel's compute dtype from the best evidence: counters, else its name (bounds.py)
            dtype, dtype_from = bounds.resolve_dtypes(rows, said_dtype(self.trace.meta))
            rows = rows.assign(dtype=dtype, dtype_from=dtype_from)
        return rows

    @cached_property
    def verdicts(self) -> pd.DataFrame:
        """Per timed row, its bound against its own dtype's roof (see bounds.py)."""
        return bounds.kernel_verdicts(self.timed, self.peaks)

    def _with_mix(self, out: pd.DataFrame, rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
        """`out` (one row per `keys` group of `rows`) with `bound` and `bound_mix` from the
        time-weighted mix of its kernels' own verdicts (bounds.py): the one judgement."""
        if out.empty:
            return out
        keys = [k for k in keys if k in out.columns and k in rows.columns]
        if not keys or rows.empty:
            return out.assign(bound=None, bound_mix=None)
        # only the columns the mix reads (a million-row frame is not copied for it)
        cols = [c for c in dict.fromkeys(keys + ["dur_ns", "dtype", "category"]) if c in rows.columns]
        mix = bounds.bound_mix(rows[cols], self.verdicts, keys)
        mix.index = bounds.key_index(mix, keys, mix.index)
        got = mix.reindex(bounds.key_index(out, keys))
        out = out.copy()
        # (a row no kernel fell into: no verdict, None rather than NaN)
        out["bound"] = pd.Series([v if isinstance(v, str) else None for v in got["verdict"]], index=out.index, dtype=object)
        out["bound_mix"] = pd.Series([m if isinstance(m, dict) else None for m in got["bound_mix"]], index=out.index,
                                     dtype=object)
        return out

    @cached_property
    def row_peaks(self) -> pd.Series:
        """Per timed row, the peak FLOP/s of its compute dtype (see ceilings.py)."""
        return ceilings.row_peak_flops(self.timed, self.peaks) if len(self.timed) else pd.Series(dtype="float64")

    @cached_property
    def steps(self) -> pd.DataFrame:
        p = self.peaks
        out = metrics.step_table(self.timed, self.trace.meta, p.flops, p.bw, self.ridge)
        if len(out) and self._mixed_dtypes:
            rows = self.timed[self.timed["step"].notna()]
            keys = [k for k in ("rank", "device", "phase", "step") if k in out.columns and k in rows.columns]
            out["mfu"] = ceilings.dtype_mfu(out, rows, self.row_peaks, keys)
            out["mfu"] = out["mfu"].where(out["mfu_status"] != "unknown")  # a sliver is unknown, never a number
        if len(out):
            t = self.timed
            cols = [c for c in ("rank", "device", "phase", "step", "dur_ns", "dtype", "category") if c in t.columns]
            out = self._with_mix(out, t[cols][t["step"].notna()], ["rank", "device", "phase", "step"])
        return model_cost.add_step_costs(out, self.model, self.trace.meta, self.workload, p.flops, p.bw)

    @cached_property
    def phases(self) -> pd.DataFrame:
        p = self.peaks
        out = metrics.phase_table(self.timed, self.steps, self.trace.meta, p.flops, p.bw, self.ridge)
        if len(out) and self._mixed_dtypes:
            rows = per_device.headline(self.timed)  # the phase table is the lowest rank's (and device's)
            out["mfu"] = ceilings.dtype_mfu(out, rows, self.row_peaks, ["phase"])
            out["mfu"] = out["mfu"].where(out["mfu_status"] != "unknown")  # a sliver is unknown, never a number
        if len(out):
            out = self._with_mix(out, self._phase_rows, ["phase"])
        out = rates.both_utilizations(out, p)
        return model_cost.add_phase_costs(out, self.steps, p.flops, p.bw)

    @cached_property
    def _phase_rows(self) -> pd.DataFrame:
        """The rows the phase table describes (the lowest rank's, and its lowest device's), in the
        columns the mix reads."""
        rows = self.timed
        rows = rows[[c for c in ("rank", "device", "phase", "step", "dur_ns", "dtype", "category") if c in rows.columns]]
        return per_device.headline(rows)

    @cached_property
    def model_summary(self) -> dict | None:
        return model_cost.model_summary(self.model)

    @cached_property
    def _mixed_dtypes(self) -> bool:
        """Whether some kernel's FLOPs run against another peak than the trace's dtype's (an FP8
        GEMM in a bf16 model): then MFU counts each kernel's FLOPs at its own peak."""
        return len(self.timed) > 0 and ceilings.mixed(self.timed, self.row_peaks, self.peaks.flops)

    @cached_property
    def devices(self) -> pd.DataFrame | None:
        """Per (rank,) device busy/idle/MBU/steps where one rank drives several GPUs (per_device.py)."""
        return per_device.device_table(self.timed, self.peaks.flops, self.peaks.bw)

    @cached_property
    def devices_note(self) -> str | None:
        return per_device.merged_note(self.timed)

    @cached_property
    def rank_steps(self) -> pd.DataFrame | None:
        return metrics.per_rank_steps(self.steps)

    @cached_property
    def rank_phases(self) -> pd.DataFrame | None:
        p = self.peaks
        return metrics.per_rank_phases(self.timed, self.trace.meta, p.flops, p.bw, self.ridge)

    def groups(self, by: str = "short_name", phase: str | None = None) -> pd.DataFrame:
        key = (by, phase)
        if key not in self._groups:
            rows = self.timed if phase is None else self.timed[self.timed["phase"] == phase]
            self._groups[key] = self._groups_of(rows, by)
        return self._groups[key]

    def _groups_of(self, rows: pd.DataFrame, by: str) -> pd.DataFrame:
        """Kernel groups of `rows`, each launch against its own dtype's peak, with the bound mix."""
        peak = self.row_peaks if len(rows) else self.peaks.flops
        out = groups.kernel_groups(rows, by, peak, self.peaks.bw)
        if len(out) and by in rows.columns:
            k = rows[by]
            k = k.astype(object).where(k.notna(), "(unnamed)") if k.isna().any() else k
            small = pd.DataFrame({"key": k, "dur_ns": rows["dur_ns"], "dtype": rows["dtype"],
                                  "category": rows["category"]}, index=rows.index)
            out = self._with_mix(out, small, ["key"])
        return out

    @cached_property
    def first_rank(self) -> int | None:
        """The lowest rank among the timed rows: the one the phase table and the gap describe (ranks
        run side by side, so their kernels do not add up); None when the rows carry no rank."""
        t = self.timed
        if "rank" not in t.columns or not t["rank"].notna().any():
            return None
        return int(t["rank"].min())

    def kernels(self, phase=None, step=None, path_prefix=None, key=None, by="short_name", rank=None,
                device=None) -> pd.DataFrame:
        rows = self.timed
        if rank is not None and "rank" in rows.columns:
            rows = rows[rows["rank"] == rank]
        if device is not None and "device" in rows.columns:  # one GPU of several (per_device.py)
            rows = rows[rows["device"] == device]
        if phase is not None:
            rows = rows[rows["phase"] == phase]
        if step is not None:
            rows = rows[rows["step"] == step]
        if path_prefix:
            p = rows["path"].astype(object).fillna("")
            rows = rows[(p == path_prefix) | p.str.startswith(path_prefix + "/")]
        if key is not None:
            rows = rows[rows[by] == key]
        return rows

    def range_tree(self, phase, step, rank=None, max_nodes: int | None = None, device=None) -> pd.DataFrame:
        events, timed = self.trace.events, self.timed
        if rank is not None and "rank" in timed.columns:
            events, timed = events[events["rank"] == rank], timed[timed["rank"] == rank]
        if device is not None and "device" in timed.columns:  # the GPU work of one device; ranges are host-side
            timed = timed[timed["device"] == device]
        return tree.range_tree(events, timed, phase, step, max_nodes)

    def roofline(self, by: str = "short_name", phase: str | None = None) -> pd.DataFrame:
        """Roofline points: one per kernel group and phase (the same GEMM kernel is compute-bound
        in prefill and memory-bound in decode: one point for both would sit nowhere), biggest first."""
        if phase is not None:
            return groups.roofline_points(self.groups(by, phase))
        phases = [p for p in pd.unique(self.timed["phase"]) if isinstance(p, str)]
        frames = [groups.roofline_points(self.groups(by, p)).assign(phase=p) for p in phases]
        frames = [f for f in frames if not f.empty]
        if not frames:
            return groups.roofline_points(self.groups(by))
        pts = pd.concat(frames, ignore_index=True)
        return pts.sort_values("time_ns", ascending=False, kind="stable").reset_index(drop=True)

    # --- stalls ---------------------------------------------------------------------------------
    @cached_property
    def has_counters(self) -> bool:
        return bool(stalls.counted(self.timed).any())

    def stalls(self, by: str = "phase") -> pd.DataFrame | None:
        return stalls.stall_shares(self.timed, by)

    @cached_property
    def stalls_missing(self) -> str:
        """Why `stalls()` is None for this trace, and what would fill it (docs: stalls)."""
        return stalls.missing_reason(self.timed, self.trace.meta.get("source"), self.trace.modeled)

    def stall_top_kernels(self, reason: str, n: int = 5, phase: str | None = None) -> pd.DataFrame:
        rows = self.timed
        if phase is not None:
            rows = rows[rows["phase"] == phase]
        return stalls.top_kernels(rows, reason, n)

    # --- diagnosis ------------------------------------------------------------------------------
    @cached_property
    def attention(self) -> list[attention.Verdict]:
        return attention.verdicts(self.timed, self.trace.meta, self.trace.modeled)

    @cached_property
    def findings(self) -> list[Finding]:
        out = findings.phase_findings(self.phases, self.peaks, self.trace.meta, self.attention,
                                      self.stalls("phase"), self.trace.modeled, self.timed, self.idle_phases)
        if not self.trace.modeled:  # a modeled kernel sits exactly on its roof
            out += findings.above_roof_findings(self.groups("short_name"), self.peaks)
            out += findings.copy_findings(self.copies)
            out += findings.comm_findings(self.comm_devices, self.rank_steps)
        return out

    @cached_property
    def _gap_split(self) -> pd.DataFrame | None:
        """The per-step split both `gap` and `gap_steps` are made from (computed once for both)."""
        row_peaks = self.row_peaks if self._mixed_dtypes else None  # (one dtype: the trace's peak is each row's)
        return gap.split(self.timed, self.peaks.flops, self.peaks.bw, self.steps, self._edges, row_peaks)

    # --- what the GPU waited for (idle by cause, exposed communication, host copies) -------------
    @cached_property
    def _gpu_rows(self) -> pd.DataFrame | None:
        t = self.timed
        if t.empty or "kind" not in t.columns or not t["kind"].isin(("kernel", "memcpy", "memset")).any():
            return None  # a CPU-only run has ops, not GPU rows
        return t

    @cached_property
    def idle_causes(self) -> "idle.Causes | None":
        """The idle stretches of every (rank, device, step) window, cut by cause (`idle.Causes`)."""
        rows = self._gpu_rows
        if rows is None or self.trace.modeled:
            return None
        return idle.Causes(rows, self.trace.runtime_rows())

    @cached_property
    def idle(self) -> pd.DataFrame | None:
        """Idle time by cause per (rank, device, phase, step) window."""
        c = self.idle_causes
        return None if c is None else c.table()

    @cached_property
    def _edges(self) -> pd.DataFrame | None:
        """Edge idle per (phase, step) of the lowest rank (summed over its devices), for the gap."""
        t = self.idle
        if t is None or t.empty:
            return None
        if self.first_rank is not None:
            t = t[t["rank"] == self.first_rank]
        return t.groupby(["phase", "step"], sort=False)["edge_ns"].sum().reset_index()

    @cached_property
    def layers(self) -> pd.DataFrame | None:
        """Kernel time per (phase, layer) of the lowest rank, with where each layer came from
        (`layer_source`: the trace, or inferred from CUDA-graph replays); None without layers."""
        t = self.timed
        if "layer" not in t.columns or not t["layer"].notna().any():
            return None
        if self.first_rank is not None:
            t = t[t["rank"] == self.first_rank]
        t = t[t["layer"].notna()]
        src = t["layer_source"] if "layer_source" in t.columns else pd.Series("trace", index=t.index)
        f = pd.DataFrame({"phase": t["phase"].astype(object), "layer": t["layer"].astype("int64"),
                          "layer_source": src.astype(object), "dur_ns": t["dur_ns"]})
        g = f.groupby(["phase", "layer", "layer_source"], sort=True)
        out = g["dur_ns"].agg(kernels="size", time_ns="sum").reset_index()
        steps = t.groupby(["phase", "layer"], observed=True)["step"].nunique() if "step" in t.columns else None
        if steps is not None:
            out["steps"] = steps.reindex(pd.MultiIndex.from_frame(out[["phase", "layer"]])).to_numpy()
        return out

    @cached_property
    def idle_phases(self) -> pd.DataFrame | None:
        """Idle by cause per phase of the lowest rank, its devices summed (what the phase table,
        which is that rank's, is read against)."""
        t = self.idle
        if t is None or t.empty:
            return None
        if self.first_rank is not None:
            t = t[t["rank"] == self.first_rank]
        return idle.per_phase(t.assign(device=-1))

    @cached_property
    def comm_devices(self) -> pd.DataFrame | None:
        """Exposed communication per (rank, device), over the whole run."""
        return None if self.overlap is None else comm.per_device(self.overlap.table())

    @cached_property
    def overlap(self) -> "comm.Overlap | None":
        """Communication against compute per window (`comm.Overlap`); None without comm kernels."""
        rows = self._gpu_rows
        if rows is None:
            return None
        o = comm.Overlap(rows)
        return o if o.has_comm else None

    @cached_property
    def copies(self) -> pd.DataFrame | None:
        """Host and peer copies per (rank, device), against their link (`copies.copy_table`)."""
        rows = self._gpu_rows
        return None if rows is None else copies.copy_table(rows, self.peaks.gpu.key if self.peaks.gpu is not None else None)

    @cached_property
    def gap(self) -> pd.DataFrame | None:
        if self.trace.modeled:
            return None  # a modeled trace is the ideal
        if self.phases.empty:
            return None
        return gap.gap_table(self.timed, self.phases, self.peaks.flops, self.peaks.bw, self.steps, split=self._gap_split)

    @cached_property
    def gap_steps(self) -> pd.DataFrame | None:
        """The gap to ideal of every step (per kernel where costs cover it, else from model bytes)."""
        if self.trace.modeled:
            return None
        return gap.gap_steps(self.timed, self.peaks.flops, self.peaks.bw, self.steps, split=self._gap_split)

    def full_names(self, key: str, by: str = "short_name", limit: int = 20) -> list[str]:
        """The distinct full (demangled) names behind one group key, most time first, at most `limit`."""
        rows = self.kernels(key=key, by=by)
        if rows.empty or "name" not in rows.columns:
            return []
        t = rows.groupby(rows["name"].astype(object), sort=False)["dur_ns"].sum().sort_values(ascending=False)
        return [str(n) for n in t.index[:limit]]

    # --- what the user should know before trusting the numbers ---------------------------------------
    # Below this share of a phase's kernel time with known bytes, its MBU and TB/s say too little.
    COVERAGE_WARN_BELOW = 0.9

    @property
    def trace_warnings(self) -> list[tuple[str, str]]:
        """(where, message) known from the file alone: the importer's and reader's warnings (rows
        dropped, values ignored), a truncated capture, an unknown device. Cheap: no analysis."""
        out = [("import", str(w)) for w in self.trace.warnings]
        if self.trace.cut_note:
            out.append(("import", self.trace.cut_note))
        if self.trace.meta.get("incomplete"):
            out.append(("capture", "incomplete capture: the run stopped early; only what was recorded is analysed"))
        if self.peaks.source is None:
            out.append(("device", f"no peaks: {self.peaks.reason or 'device not recognised'}; MBU, MFU and the "
                                  "roofline are unknown"))
        return out

    @cached_property
    def warnings(self) -> list[tuple[str, str]]:
        """`trace_warnings` plus what the analysis found: phases whose bytes are known for too little
        of their kernel time (their MBU counts only the known part)."""
        out = list(self.trace_warnings)
        ph = self.phases
        if "bytes_coverage" in ph.columns:
            for r in ph[["phase", "bytes_coverage"]].to_dict("records"):
                cov = r["bytes_coverage"]
                if not is_unknown(cov) and cov < self.COVERAGE_WARN_BELOW:
                    out.append(("coverage", f"{r['phase']}: bytes known for {fmt_pct(cov, 0)} of kernel time; "
                                            "MBU and TB/s count only that part"))
        # physics: a peak or utilization above what the device can do is a bug or wrong input, said
        out += [("physics", v) for v in physics.violations(self)]
        return out

    # --- identity and detail --------------------------------------------------------------------
    @cached_property
    def identity(self) -> dict:
        out = trace_identity(self.trace, self.has_counters)
        # kernels, memcpy and memset counted apart: a kernel count never includes copies
        out["gpu_work"] = gpu_work_counts(self.trace.events)
        return out

    def is_computed(self, name: str) -> bool:
        """Whether the cached result `name` (`phases`, `findings`, `warnings`, ...) is computed
        already, so reading it costs nothing (a screen decides what to paint at once)."""
        return name in self.__dict__

    # --- scoped views: a drill-down keeps the phase, step or rank it came from ---------------------
    def scoped_groups(self, by: str = "short_name", phase: str | None = None, step: int | None = None,
                      rank: int | None = None, device: int | None = None) -> pd.DataFrame:
        """Kernel groups of one phase, one step of a phase, one rank or one device (time share within
        that scope)."""
        if step is None and rank is None and device is None:
            return self.groups(by, phase)
        return self._groups_of(self.kernels(phase=phase, step=step, rank=rank, device=device), by)

    def scoped_stalls(self, by: str = "short_name", phase: str | None = None, step: int | None = None,
                      rank: int | None = None, device: int | None = None) -> pd.DataFrame | None:
        """`stalls(by)` over one scope's launches only."""
        return stalls.stall_shares(self.kernels(phase=phase, step=step, rank=rank, device=device), by)

    def group_stalls(self, key: str, by: str = "short_name", phase: str | None = None, step: int | None = None,
                     rank: int | None = None, device: int | None = None) -> pd.Series | None:
        """One kernel group's stall shares in a scope (`scoped_stalls`); None without counters for it."""
        sh = self.scoped_stalls(by, phase, step, rank, device)
        return sh.loc[key] if sh is not None and key in sh.index else None

    def scoped_roofline(self, by: str = "short_name", phase: str | None = None, step: int | None = None,
                        rank: int | None = None, device: int | None = None) -> pd.DataFrame:
        """Roofline points of one scope's groups; the whole trace gives one point per group and phase."""
        if phase is None and step is None and rank is None and device is None:
            return self.roofline(by)
        pts = groups.roofline_points(self.scoped_groups(by, phase, step, rank, device))
        return pts if phase is None else pts.assign(phase=phase)

    def group_point(self, key: str, by: str = "short_name", phase: str | None = None, step: int | None = None,
                    rank: int | None = None, device: int | None = None) -> pd.DataFrame:
        """The roofline point of one kernel group in a scope (over the whole trace, one per phase it
        ran in); empty where its FLOPs and bytes are not both known."""
        pts = self.scoped_roofline(by, phase, step, rank, device)
        return pts[pts["key"] == key].reset_index(drop=True)

    def groups_by_phase(self, by: str = "short_name") -> pd.DataFrame:
        """One row per (group, phase): each phase's own numbers for the group; `time_share` is of all
        kernel time, so the rows add up as the plain groups do."""
        phases = [p for p in pd.unique(self.timed["phase"]) if isinstance(p, str)]
        frames = [self.groups(by, p).assign(phase=p) for p in phases]
        frames = [f for f in frames if not f.empty]
        if not frames:
            return self.groups(by)
        out = pd.concat(frames, ignore_index=True)
        total = self.timed["dur_ns"].sum()
        out["time_share"] = out["time_ns"] / total if total else float("nan")
        return out.sort_values("time_ns", ascending=False, kind="stable").reset_index(drop=True)

    @cached_property
    def gap_before(self) -> pd.Series:
        """Per timed row (same index): idle time on its GPU before it started, in ns: its start minus
        the latest end of the earlier kernels on the same rank and device (0 when it overlaps one),
        null for the first kernel on a device."""
        t = self.timed
        if t.empty:
            return pd.Series(dtype="float64", index=t.index)
        keys = [t[c].astype("float64").fillna(-1).to_numpy() for c in ("rank", "device") if c in t.columns]
        start = t["start_ns"].to_numpy(dtype="float64")
        end = t["end_ns"].to_numpy(dtype="float64")
        order = np.lexsort((start, *reversed(keys))) if keys else np.argsort(start, kind="stable")
        gid = (pd.DataFrame({i: k[order] for i, k in enumerate(keys)}).groupby(list(range(len(keys))), sort=False)
               .ngroup().to_numpy() if keys else np.zeros(len(t), dtype=int))
        run_end = pd.Series(end[order]).groupby(gid).cummax()
        prev = run_end.groupby(gid).shift(1).to_numpy()
        gap = np.clip(start[order] - prev, 0, None)  # NaN (first on its device) stays NaN
        out = np.empty(len(t))
        out[order] = gap
        return pd.Series(out, index=t.index, name="gap_before_ns")

    def launches(self, key: str, by: str = "short_name", phase: str | None = None, step: int | None = None,
                 rank: int | None = None, device: int | None = None) -> pd.DataFrame:
        """Every launch of one kernel group in a scope, in time order, with `gap_before_ns` (see
        `gap_before`) and the launch shape as text (`grid_dims`, `block_dims`: "132x1x1")."""
        rows = self.kernels(phase=phase, step=step, rank=rank, key=key, by=by, device=device)
        rows = rows.assign(gap_before_ns=self.gap_before.reindex(rows.index),
                           grid_dims=_dims(rows.get("grid")), block_dims=_dims(rows.get("block")))
        return rows.sort_values("start_ns", kind="stable")

    def kernel_detail(self, key: str, by: str = "short_name", phase: str | None = None, step: int | None = None,
                      rank: int | None = None, device: int | None = None) -> list[tuple[str, str, str]]:
        """(label, value with unit, source) for one kernel group, over the whole trace or one scope
        (a phase, a step of a phase, a rank, a device): then every number is of that scope's launches only."""
        return kernel_detail(self, key, by, phase, step, rank, device)


def _dims(values: pd.Series | None) -> pd.Series | None:
    """Launch shapes (lists of ints) as `132x1x1` text, vectorised through Arrow; null stays null."""
    if values is None:
        return None
    try:  # stored as float arrays after pandas; a shape is whole numbers
        arr = pa.array(values.to_numpy(dtype=object), type=pa.list_(pa.float64()), from_pandas=True)
        arr = pc.cast(arr, pa.list_(pa.int64()))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pd.Series([None] * len(values), index=values.index, dtype=object)
    text = pc.binary_join(pc.cast(arr, pa.list_(pa.string())), "x")
    return pd.Series(text.to_numpy(zero_copy_only=False), index=values.index, dtype=object)


def analyze(trace: Trace, peaks: Peaks | None = None, model: ModelSpec | None = None,
            workload: Workload | None = None) -> Analysis:
    return Analysis(trace, peaks, model, workload)


def compare(a: Analysis, b: Analysis) -> diff.Diff:
    added, removed, changed = diff.findings_diff(a.findings, b.findings)
    return diff.Diff(a.trace.label, b.trace.label, diff.phase_diff(a.phases, b.phases),
                     diff.group_diff(a.groups("short_name"), b.groups("short_name")), added, removed, changed)
