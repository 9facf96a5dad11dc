"""Which GPUs a trace's rows ran on: what both the step table (`metrics`) and the per-device
tables (`per_device`) ask before they split by device, kept apart so neither imports the other
for it."""
from __future__ import annotations

import pandas as pd


def devices(timed: pd.DataFrame) -> list[int]:
    """The distinct devices of the timed rows (GPU rows carry one; a CPU run's ops none)."""
    if "device" not in timed.columns or not len(timed):
        return []
    d = pd.to_numeric(timed["device"], errors="coerce").dropna().unique()
    return sorted(int(x) for x in d)


def multi_device(timed: pd.DataFrame) -> bool:
    """Whether one rank's rows run on several GPUs (a multi-rank run has one device per rank as a rule;
    there the rank already separates them)."""
    if "device" not in timed.columns or not len(timed):
        return False
    rows = timed
    if "rank" in rows.columns and rows["rank"].notna().any():
        rows = rows[rows["rank"] == rows["rank"].min()]
    return len(devices(rows)) > 1
