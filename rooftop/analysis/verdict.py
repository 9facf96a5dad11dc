"""The verdict of a comparison: per phase and overall, is B faster or slower than A per unit of work,
by how much, is that outside the runs' own noise, and what caused it.

Definitions (DESIGN.md: a comparison is per unit of work):

- **Unit of work.** Where a phase has steps in both runs, the unit is one step: the measure is the
  mean step time (a step's span; in a multi-rank run the slowest rank's span, since the step ends
  when its last rank does). Where it has none, the unit is one repetition of the work the window
  holds: the work ratio r (B's work / A's work) is the time-weighted median, over kernel families
  matched in both runs (`matching.py`), of count_B / count_A, and the measure is the phase's span
  per repetition, span_A against span_B / r. Two fixed-length windows that hold different amounts of
  the same work are thereby compared per repetition, never by their totals.
- **Noise.** Per step: the standard error of the difference of the mean step times,
  sqrt(s_A²/n_A + s_B²/n_B) with s the step-to-step standard deviation; the change is outside the
  noise when |mean_B - mean_A| > 2 · that (about 95% for a normal spread). A side with one step
  borrows the other side's spread; with one step on both sides the noise is unknown. Without steps:
  the same test on the matched kernels' time at A's counts, Σ c_A · mean_B against Σ c_A · mean_A,
  whose standard errors come from each family's call-to-call spread.
- **Causes.** Per unit of work, each matched family's time (count per unit x per-call time), the
  GPU's idle time (launch gaps and edge idle: span - busy), grouped also by category (copies and
  memsets as `copy`, NCCL as `comm`). A cause's share is its change over the sum of all causes'
  |changes| (so opposite causes do not give shares of 400%); the net change of the measure need
  not equal the causes' sum where streams overlap (busy is a union, not a sum).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rooftop.present.format import is_unknown
from rooftop.analysis import matching

# Below this relative change B and A are the same ("no change"): float noise, not a result.
SAME = 1e-9
NOISE_SIGMAS = 2.0
# Windows are "the same work, repeated" only when the families matched in both runs hold at least
# this share of each run's kernel time; below it the runs did different things and no per-unit
# verdict is given (a total would compare unlike work).
SAME_WORK = 0.5


def _f(v) -> float | None:
    return None if is_unknown(v) else float(v)


def _first_rank(rows: pd.DataFrame) -> pd.DataFrame:
    """Families are compared on the lowest rank (ranks run side by side: their kernels do not add up)."""
    if "rank" in rows.columns and rows["rank"].notna().any():
        return rows[rows["rank"] == rows["rank"].min()]
    return rows


def step_times(steps: pd.DataFrame, phase: str) -> pd.DataFrame:
    """Per step of `phase`: span and idle, from the slowest rank where the run has several."""
    s = steps[(steps["phase"].astype(object) == phase) & steps["span_ns"].notna()] if len(steps) else steps
    if s is None or s.empty:
        return pd.DataFrame(columns=["step", "span_ns", "idle_ns"])
    if "rank" in s.columns and s["rank"].nunique() > 1:
        s = s.loc[s.groupby("step", sort=False)["span_ns"].idxmax().to_numpy()]
    idle = s["idle_ns"] if "idle_ns" in s.columns else pd.Series(np.nan, index=s.index)
    return pd.DataFrame({"step": s["step"].to_numpy(), "span_ns": s["span_ns"].astype("float64").to_numpy(),
                         "idle_ns": idle.astype("float64").to_numpy()})


def weighted_median(values: np.ndarray, weights: np.ndarray) -> float | None:
    ok = np.isfinite(values) & np.isfinite(weights) & (weights > 0)
    if not ok.any():
        return None
    v, w = values[ok], weights[ok]
    order = np.argsort(v)
    v, w = v[order], w[order]
    cum = np.cumsum(w)
    return float(v[np.searchsorted(cum, cum[-1] / 2)])


def work_ratio(fam: pd.DataFrame) -> tuple[float | None, int]:
    """B's work / A's work: the time-weighted median of count_B / count_A over families in both runs."""
    both = fam[fam["status"] == "both"]
    if both.empty:
        return None, 0
    r = both["count_b"].to_numpy(float) / both["count_a"].to_numpy(float)
    return weighted_median(r, both["time_ns_a"].to_numpy(float)), len(both)


def matched_share(fam: pd.DataFrame) -> tuple[float, float]:
    """The share of each run's kernel time in families matched in both runs (0 when a run has none)."""
    both = fam["status"] == "both"
    ta, tb = fam["time_ns_a"].fillna(0), fam["time_ns_b"].fillna(0)
    return (float(ta[both].sum() / ta.sum()) if ta.sum() else 0.0,
            float(tb[both].sum() / tb.sum()) if tb.sum() else 0.0)


def per_call_index(fam: pd.DataFrame) -> tuple[float | None, float | None]:
    """(Σ c_A · mean_B / Σ c_A · mean_A - 1, its noise as a relative change): the matched kernels'
    time at A's counts, i.e. per call of matched kernels."""
    both = fam[fam["status"] == "both"]
    if both.empty:
        return None, None
    ca = both["count_a"].to_numpy(float)
    ta = float((ca * both["mean_ns_a"].to_numpy(float)).sum())
    tb = float((ca * both["mean_ns_b"].to_numpy(float)).sum())
    if ta <= 0:
        return None, None
    # Var(Σ c_A·mean) = Σ c_A² · var / n per side (n: that side's calls); a family of one call has no spread.
    va = np.nan_to_num(both["var_ns2_a"].to_numpy(float)) * ca
    vb = np.nan_to_num(both["var_ns2_b"].to_numpy(float)) * ca ** 2 / both["count_b"].to_numpy(float)
    se = math.sqrt(float(va.sum() + vb.sum()))
    return tb / ta - 1, NOISE_SIGMAS * se / ta


def _phase_value(table: pd.DataFrame, phase: str, col: str):
    if table is None or table.empty or col not in table.columns:
        return None
    hit = table[table["phase"].astype(object) == phase]
    return None if hit.empty else _f(hit[col].iloc[0])


def _direction(change: float | None) -> str | None:
    if change is None:
        return None
    if abs(change) < SAME:
        return "no change"
    return "slower" if change > 0 else "faster"


def phase_verdict(a, b, phase: str) -> dict:
    """The verdict of one phase (see the module docstring); `a`, `b` are `Analysis` objects."""
    sa, sb = step_times(a.steps, phase), step_times(b.steps, phase)
    rows_a = _first_rank(a.timed)
    rows_b = _first_rank(b.timed)
    rows_a = rows_a[rows_a["phase"].astype(object) == phase]
    rows_b = rows_b[rows_b["phase"].astype(object) == phase]
    out: dict = {"phase": phase}
    if len(sa) and len(sb):
        # Per step: only rows inside a step count (phase span = the sum of its steps' spans).
        rows_a, rows_b = rows_a[rows_a["step"].notna()], rows_b[rows_b["step"].notna()]
        fam = matching.families(rows_a, rows_b)
        na, nb = len(sa), len(sb)
        ma, mb = float(sa["span_ns"].mean()), float(sb["span_ns"].mean())
        sda = float(sa["span_ns"].std(ddof=1)) if na > 1 else None
        sdb = float(sb["span_ns"].std(ddof=1)) if nb > 1 else None
        sda, sdb = (sda if sda is not None else sdb), (sdb if sdb is not None else sda)
        noise = None
        if sda is not None and ma:
            noise = NOISE_SIGMAS * math.sqrt(sda ** 2 / na + sdb ** 2 / nb) / ma
        out.update(basis="step", measure=("decode step time" if phase == "decode" else "step time"),
                   units_a=float(na), units_b=float(nb), a_ns=ma, b_ns=mb,
                   idle_a=_f(sa["idle_ns"].mean()), idle_b=_f(sb["idle_ns"].mean()),
                   noise_basis=f"step-to-step spread ({na} and {nb} steps)" if noise is not None
                   else "noise unknown (one step in each run)")
        out["work_ratio"], _ = work_ratio(fam)
        out["per_call_change"], _ = per_call_index(fam)
        # Steps are the unit, but steps of different work (another model, another job) compare
        # nothing: the line says how much of the kernel time matched when that is under half.
        out["matched_share_a"], out["matched_share_b"] = matched_share(fam)
    else:
        fam = matching.families(rows_a, rows_b)
        r, n = work_ratio(fam)
        span_a, span_b = _phase_value(a.phases, phase, "span_ns"), _phase_value(b.phases, phase, "span_ns")
        pc, pc_noise = per_call_index(fam)
        cover_a, cover_b = matched_share(fam)
        out.update(basis="work", measure="time per unit of work", work_ratio=r, matched_families=n,
                   per_call_change=pc, matched_share_a=cover_a, matched_share_b=cover_b)
        if rows_a.empty or rows_b.empty:
            out.update(units_a=1.0, units_b=None, a_ns=span_a, b_ns=None, idle_a=None, idle_b=None, noise=None,
                       noise_basis=f"the phase is only in {'A' if rows_b.empty else 'B'}")
        elif r is None or not r or span_a is None or span_b is None or not span_a or min(cover_a, cover_b) < SAME_WORK:
            out.update(units_a=1.0, units_b=None, a_ns=span_a, b_ns=None, idle_a=None, idle_b=None, noise=None,
                       different_work=True,
                       noise_basis=(f"A and B do different work: matched kernels are {100 * cover_a:.0f}% of A's "
                                    f"kernel time and {100 * cover_b:.0f}% of B's; no per-unit verdict"))
        else:
            out.update(units_a=1.0, units_b=r, a_ns=span_a, b_ns=span_b / r,
                       idle_a=_phase_value(a.phases, phase, "idle_ns"),
                       idle_b=None if _phase_value(b.phases, phase, "idle_ns") is None
                       else _phase_value(b.phases, phase, "idle_ns") / r,
                       noise_basis=f"call-to-call spread of {n} matched kernel families")
        noise = pc_noise
    out["noise"] = noise
    change = None if out.get("a_ns") in (None, 0) or out.get("b_ns") is None else out["b_ns"] / out["a_ns"] - 1
    out["change"] = change
    out["direction"] = _direction(change)
    out["within_noise"] = (None if noise is None or change is None or out["direction"] == "no change"
                           else abs(change) <= noise)
    # The phase table (tokens/s, MBU, MFU) of a multi-rank run is its lowest rank's: said so.
    out["metrics_rank"] = a.first_rank if len(a.trace.ranks) > 1 else None
    for col in ("tokens_per_s", "mbu", "mfu", "model_mbu"):
        out[f"{col}_a"], out[f"{col}_b"] = _phase_value(a.phases, phase, col), _phase_value(b.phases, phase, col)
    # Share of the roof (groups.py: achieved / attainable at the kernel's AI, against each run's own
    # peaks) of each family's top kernel: the fair measure when the GPUs differ.
    for side, an in (("a", a), ("b", b)):
        g = an.groups("short_name", phase)
        roof = g.set_index("key")["pct_of_roof"] if len(g) and "pct_of_roof" in g.columns else pd.Series(dtype=float)
        fam[f"roof_{side}"] = fam[f"name_{side}"].map(roof[~roof.index.duplicated()]).astype("float64")
    out["causes"], out["categories"] = causes(fam, out)
    out["families"] = fam
    return out


def causes(fam: pd.DataFrame, v: dict) -> tuple[list[dict], list[dict]]:
    """Per unit of work, the change of each family's time and of idle, largest |change| first, with its
    share of the gross change (Σ |Δ| over causes) and its part of the net change (`of_change`); and
    the same summed per category."""
    ua, ub = v.get("units_a"), v.get("units_b")
    if not ua or not ub:
        return [], []
    f = fam.copy()
    f["per_unit_a"] = f["time_ns_a"].fillna(0) / ua
    f["per_unit_b"] = f["time_ns_b"].fillna(0) / ub
    f["delta_ns"] = f["per_unit_b"] - f["per_unit_a"]
    f["calls_a"] = f["count_a"] / ua
    f["calls_b"] = f["count_b"] / ub
    total = None if v.get("a_ns") is None or v.get("b_ns") is None else v["b_ns"] - v["a_ns"]
    roof = [c for c in ("roof_a", "roof_b") if c in f.columns]
    rows = f[["key", "how", "status", "category", "name_a", "name_b", "calls_a", "calls_b", "mean_ns_a", "mean_ns_b",
              "per_unit_a", "per_unit_b", "delta_ns", *roof]].assign(kind="kernels")
    if v.get("idle_a") is not None and v.get("idle_b") is not None:
        # Within a step (first start to last end) all idle is between kernels: launch gaps. A window
        # without steps also holds the idle before its first and after its last kernel.
        label = "launch gaps (GPU idle in the step)" if v.get("basis") == "step" else "GPU idle (launch gaps, edge idle)"
        idle = pd.DataFrame([{"key": label, "how": None, "status": "both",
                              "category": "idle", "kind": "idle", "per_unit_a": v["idle_a"],
                              "per_unit_b": v["idle_b"], "delta_ns": v["idle_b"] - v["idle_a"]}])
        rows = pd.concat([rows, idle], ignore_index=True)
    # Share of the gross change: Σ |Δ| over causes, so that shares stay within ±100% even when causes
    # cancel (a kernel 17 ms slower, idle 12 ms shorter, net +4 ms); `of_change` is Δ / the net change.
    gross = float(rows["delta_ns"].abs().sum())
    rows["share"] = rows["delta_ns"] / gross if gross else np.nan
    rows["of_change"] = rows["delta_ns"] / total if total else np.nan
    rows = rows.reindex(rows["delta_ns"].abs().sort_values(ascending=False, kind="stable").index)
    cats = rows.groupby("category", sort=False).agg(per_unit_a=("per_unit_a", "sum"), per_unit_b=("per_unit_b", "sum"),
                                                    delta_ns=("delta_ns", "sum"), families=("key", "size"))
    cats["share"] = cats["delta_ns"] / gross if gross else np.nan
    cats = cats.reindex(cats["delta_ns"].abs().sort_values(ascending=False, kind="stable").index).reset_index()
    return _records(rows), _records(cats)


def _records(df: pd.DataFrame) -> list[dict]:
    return [{k: (None if is_unknown(x) else (x.item() if isinstance(x, np.generic) else x)) for k, x in r.items()}
            for r in df.to_dict("records")]


def overall(phases: list[dict]) -> dict:
    """All phases together at A's amount of work: Σ units_A · per-unit time, for A and for B."""
    known = [p for p in phases if p.get("a_ns") is not None and p.get("b_ns") is not None and p.get("units_a")]
    out = {"phase": "overall", "basis": "step" if known and all(p["basis"] == "step" for p in known) else "work",
           "measure": "time per unit of work"}
    if not known:
        why = "; ".join(str(p.get("noise_basis")) for p in phases if p.get("noise_basis")) or "no phase to compare"
        out.update(a_ns=None, b_ns=None, change=None, noise=None, direction=None, within_noise=None, noise_basis=why)
        return out
    # One phase compared: its per-unit numbers are the overall's (a total of its steps would read
    # as a step time); several: Σ units_A · per-unit time.
    scale = [1.0] if len(known) == 1 else [p["units_a"] for p in known]
    ta = sum(u * p["a_ns"] for u, p in zip(scale, known))
    tb = sum(u * p["b_ns"] for u, p in zip(scale, known))
    if out["basis"] == "step":
        out["measure"] = "step time" if len(known) == 1 else "time of all steps at A's step counts"
    noises = [p.get("noise") for p in known]
    noise = None
    if ta and all(n is not None for n in noises):
        noise = math.sqrt(sum((n * p["a_ns"] * u) ** 2 for n, u, p in zip(noises, scale, known))) / ta
    change = tb / ta - 1 if ta else None
    if len(known) == 1:  # one phase: its words (work ratio, per-call change) are the overall's
        out.update({k: known[0].get(k) for k in ("work_ratio", "per_call_change", "units_a", "units_b")})
        out["measure"] = known[0]["measure"]
    left = [p["phase"] for p in phases if p not in known]
    if left:
        out["measure"] += f" ({', '.join(left)} not compared)"
    out.update(a_ns=ta, b_ns=tb, change=change, noise=noise, direction=_direction(change),
               within_noise=None if noise is None or change is None or abs(change) < SAME else abs(change) <= noise,
               noise_basis="combined over phases" if noise is not None else "noise unknown in some phase")
    return out


def hardware(a, b) -> list[dict]:
    """What differs between the machines the two runs measured: device, compute capability, SMs,
    SM clock, peaks (and where they came from), world size, dtype. Empty when nothing differs."""
    def facts(an) -> dict:
        d, p = an.trace.device_meta, an.peaks
        clocks = d.get("clocks") if isinstance(d.get("clocks"), dict) else {}
        wl = an.trace.meta.get("workload") or {}
        return {
            "device": d.get("name") or (p.gpu.name if p.gpu is not None else None),
            "compute capability": d.get("cc"),
            "SMs": d.get("sms"),
            "SM clock MHz": None if not clocks.get("sm_hz") else round(clocks["sm_hz"] / 1e6),
            "peak TB/s": None if p.bw is None else round(p.bw / 1e12, 3),
            "peak TFLOP/s": None if p.flops is None else round(p.flops / 1e12, 1),
            "peaks from": p.source,
            "world size": an.trace.meta.get("world_size") or (len(an.trace.ranks) or None),
            "dtype": wl.get("dtype") or (an.model.dtype if an.model is not None and hasattr(an.model, "dtype") else None),
        }
    fa, fb = facts(a), facts(b)
    # A fact one side does not record is no difference, except the device itself (and its peaks):
    # an unknown GPU against a known one is worth saying.
    either = ("device", "peak TB/s", "peak TFLOP/s")
    return [{"what": k, "a": fa[k], "b": fb[k]} for k in fa
            if fa[k] != fb[k] and ((fa[k] is not None and fb[k] is not None) or (k in either))]


def phases_of(a, b) -> list[str]:
    order = []
    for an in (a, b):
        if an.phases is not None and len(an.phases):
            order += [str(p) for p in an.phases["phase"].astype(object) if str(p) not in order]
    return order


def verdicts(a, b) -> dict:
    """Everything the verdict says: per phase, overall, and the hardware differences."""
    from rooftop.analysis import rank_diff

    phases = [phase_verdict(a, b, p) for p in phases_of(a, b)]
    table = rank_diff.rank_table(a, b)
    changed = {p["phase"]: p.get("change") for p in phases if p.get("direction") != "no change"}
    drivers = [d for d in rank_diff.driving_ranks(table, changed) if d["phase"] in changed]
    return {"phases": phases, "overall": overall(phases), "hardware": hardware(a, b),
            "modeled": {"a": a.trace.modeled, "b": b.trace.modeled},
            "ranks": _records(table) if table is not None else None, "drivers": drivers}


METRICS = ("auto", "decode", "step", "work")


def gate_measure(v: dict, metric: str = "auto") -> tuple[dict | None, str]:
    """The measure the gate reads: `decode` (decode step time), `step` (the step time of all phases
    with steps), `work` (the overall time per unit of work); `auto`: decode where there are decode
    steps, else the step time where every phase has steps, else the work-normalized time."""
    by = {p["phase"]: p for p in v["phases"]}
    decode = by.get("decode")
    if metric in ("auto", "decode") and decode is not None and decode["basis"] == "step":
        return decode, "decode step time"
    if metric == "decode":
        return None, "no decode steps in both runs"
    ov = v["overall"]
    if metric == "step":
        return (ov, ov["measure"]) if ov["basis"] == "step" and ov.get("change") is not None else \
            (None, "no steps in both runs")
    return ov, ov["measure"]


def gate(v: dict, fail_above: float, metric: str = "auto") -> tuple[int, str]:
    """Exit status and its reason: 1 when B is slower than A by more than `fail_above` percent on
    the gate's measure AND outside the noise (unknown noise does not excuse a regression), else 0,
    also when the measure cannot be computed (no decode steps for `--metric decode`, runs that did
    different work): then the reason says so."""
    m, words = gate_measure(v, metric)
    if m is None or m.get("change") is None:
        return 0, f"gate: no verdict: {words if m is None else m.get('noise_basis', 'no matched work')}"
    pct = 100 * m["change"]
    noise = m.get("noise")
    noise_words = ("noise unknown" if noise is None else f"noise ±{100 * noise:.1f}%")
    head = f"{words}: B {abs(pct):.1f}% {'slower' if pct > 0 else 'faster'} than A ({noise_words})"
    if abs(m["change"]) < SAME:
        return 0, f"gate: pass: {words}: no change"
    if pct > fail_above and not m.get("within_noise"):
        return 1, f"gate: FAIL: {head}, above the {fail_above:g}% limit"
    if pct > fail_above:
        return 0, f"gate: pass: {head}: above {fail_above:g}% but within noise"
    return 0, f"gate: pass: {head}, limit {fail_above:g}%"
