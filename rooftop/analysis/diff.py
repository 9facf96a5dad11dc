"""Compare two runs: per-phase metrics and per-kernel-group deltas, and what changed in the findings."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from rooftop.present.format import is_unknown
from rooftop.analysis.findings import Finding

PHASE_METRICS = ("span_ns", "busy_ns", "idle_frac", "tokens_per_s", "tflops", "tbps", "mfu", "mbu", "model_mbu",
                 "flops", "bytes", "kernels")


@dataclass
class Diff:
    label_a: str
    label_b: str
    phases: pd.DataFrame
    groups: pd.DataFrame
    findings_added: list[Finding] = field(default_factory=list)
    findings_removed: list[Finding] = field(default_factory=list)
    findings_changed: list[tuple[Finding, Finding]] = field(default_factory=list)

    def to_dict(self) -> dict:
        def records(df):
            return [{k: (None if is_unknown(v) else v) for k, v in r.items()}
                    for r in df.to_dict(orient="records")]
        return {
            "a": self.label_a, "b": self.label_b,
            "phases": records(self.phases), "groups": records(self.groups),
            "findings_added": [f.to_dict() for f in self.findings_added],
            "findings_removed": [f.to_dict() for f in self.findings_removed],
            "findings_changed": [{"a": x.to_dict(), "b": y.to_dict()} for x, y in self.findings_changed],
        }


def phase_diff(pa_: pd.DataFrame, pb: pd.DataFrame) -> pd.DataFrame:
    """Outer join on phase; for each metric m: m_a, m_b, m_delta (b - a) and m_ratio (b / a)."""
    cols = [m for m in PHASE_METRICS if m in pa_.columns and m in pb.columns]
    a = pa_.set_index("phase")[cols].add_suffix("_a")
    b = pb.set_index("phase")[cols].add_suffix("_b")
    out = a.join(b, how="outer")
    for m in cols:
        xa, xb = out[f"{m}_a"].astype("float64"), out[f"{m}_b"].astype("float64")
        out[f"{m}_delta"] = xb - xa
        out[f"{m}_ratio"] = xb / xa.where(xa != 0)
    order = list(pa_["phase"]) + [p for p in pb["phase"] if p not in set(pa_["phase"])]
    return out.reindex(order).reset_index().rename(columns={"index": "phase"})


def group_diff(ga: pd.DataFrame, gb: pd.DataFrame) -> pd.DataFrame:
    """Kernel groups matched by short name: time and bytes in each run and the deltas, largest |time delta| first."""
    a = ga.set_index("key")[["category", "count", "time_ns", "bytes"]]
    b = gb.set_index("key")[["category", "count", "time_ns", "bytes"]]
    out = a.add_suffix("_a").join(b.add_suffix("_b"), how="outer")
    out["category"] = out["category_a"].where(out["category_a"].notna(), out["category_b"])
    out["time_delta"] = out["time_ns_b"].fillna(0) - out["time_ns_a"].fillna(0)
    out["bytes_delta"] = out["bytes_b"] - out["bytes_a"]
    out["status"] = ["only in B" if pd.isna(x) else ("only in A" if pd.isna(y) else "both")
                     for x, y in zip(out["time_ns_a"], out["time_ns_b"])]
    # Signed B - A like time_delta: a group only one run has counts by its own bytes (new in B: +B,
    # gone from A: -A), so it ranks by its size; null where a run that has the group lacks its bytes.
    only_b, only_a = out["status"] == "only in B", out["status"] == "only in A"
    ba, bb = out["bytes_a"].astype("float64"), out["bytes_b"].astype("float64")
    out["bytes_change"] = np.where(only_b, bb, np.where(only_a, -ba, bb - ba))
    out = out.drop(columns=["category_a", "category_b"])
    out = out.reindex(out["time_delta"].abs().sort_values(ascending=False).index)
    return out.reset_index().rename(columns={"index": "key"})


def findings_diff(fa: list[Finding], fb: list[Finding]):
    ia = {f.id: f for f in fa}
    ib = {f.id: f for f in fb}
    added = [f for k, f in ib.items() if k not in ia]
    removed = [f for k, f in ia.items() if k not in ib]
    changed = [(ia[k], ib[k]) for k in ia if k in ib and ia[k].title != ib[k].title]
    return added, removed, changed
