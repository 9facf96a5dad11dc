"""The `steps` metadata entries (batch, tokens, context, how the phase was found) as frames keyed by
phase and step, and finding a step table's row for each."""
from __future__ import annotations

import numpy as np
import pandas as pd



def step_meta(meta: dict) -> pd.DataFrame:
    """The `steps` metadata (batch, new tokens, context per step) as a frame keyed by phase/step."""
    steps = [s for s in meta.get("steps") or [] if isinstance(s, dict)]
    frame = step_records(steps, {"phase": lambda s: s.get("phase"), "step": lambda s: s.get("index", s.get("step")),
                                 "batch": lambda s: s.get("batch"), "new_tokens": lambda s: s.get("new_tokens"),
                                 "tokens": lambda s: s.get("tokens", s.get("new_tokens")),
                                 "context": lambda s: s.get("context")})
    return frame.drop_duplicates(["phase", "step"])


def _with_phase_sources(out: pd.DataFrame, meta: dict) -> pd.DataFrame:
    """`phase_source` (marker / inferred, rooftop.trace.steps.infer_phases) and `phase_reason` of each step row,
    from its metadata entry (text columns: `step_meta` keeps numbers only)."""
    src, why = {}, {}
    for s in meta.get("steps") or []:
        if isinstance(s, dict) and isinstance(s.get("phase"), str):
            key = (s["phase"], s.get("index", s.get("step")))
            src.setdefault(key, s.get("phase_source"))
            why.setdefault(key, s.get("phase_reason"))
    keys = list(zip(out["phase"].astype(object).tolist(), out["step"].tolist()))
    return out.assign(phase_source=[src.get(k) for k in keys], phase_reason=[why.get(k) for k in keys])


def step_records(steps: list[dict], fields: dict, floats: bool = False) -> pd.DataFrame:
    """One row per step entry, one column per field (`fields`: name -> how it is read from an
    entry): "phase" as given, every other column `pd.to_numeric` (errors null; then float64 if
    `floats`) of what a frame of the entries holds. Made from arrays where the phases are text and
    every number a plain int or float (what writers store: a long run has thousands of steps);
    pandas' own way otherwise."""
    values = {name: [get(s) for s in steps] for name, get in fields.items()}
    numbers = _plain_numbers({k: v for k, v in values.items() if k != "phase"}) if steps else None
    if numbers is not None and all(type(p) is str for p in values["phase"]):
        if floats:
            numbers = {k: v.astype("float64") for k, v in numbers.items()}
        return pd.DataFrame({"phase": pd.array(values["phase"], dtype="str"), **numbers})
    frame = pd.DataFrame([dict(zip(values, row)) for row in zip(*values.values())], columns=list(fields))
    for c in frame.columns[1:]:
        frame[c] = pd.to_numeric(frame[c], errors="coerce")
        if floats:
            frame[c] = frame[c].astype("float64")
    return frame


def first_positions(keys, wanted) -> np.ndarray:
    """For each key of `wanted`, the position of its first occurrence among `keys` (-1: none; a key
    given as None is no key): a step table's row of each (phase, step), through a dict rather than
    a MultiIndex `reindex`."""
    at: dict = {}
    for i, key in enumerate(keys):
        if key is not None:
            at.setdefault(key, i)
    return np.fromiter((at.get(key, -1) for key in wanted), dtype=np.int64)


def taken(values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """`values[at]` as float64, NaN where `at` is -1 (a new array)."""
    values = np.asarray(values, dtype="float64")
    return np.where(at >= 0, values[at.clip(0)], np.nan) if len(values) else np.full(len(at), np.nan)


def _plain_numbers(columns: dict[str, list]) -> dict[str, np.ndarray] | None:
    """Each list as `pd.to_numeric` makes a frame's column of it: int64 where every value is an int,
    float64 (NaN for None) where each is an int, a float or None; None if any value is something
    else (text, a bool) or an int past int64."""
    out = {}
    for name, vals in columns.items():
        kinds = set(map(type, vals))
        if not kinds <= {int, float, type(None)}:
            return None
        if int in kinds and any(type(v) is int and not -(1 << 63) <= v < 1 << 63 for v in vals):
            return None
        out[name] = np.array(vals, dtype=np.int64) if kinds == {int} else \
            np.array([np.nan if v is None else v for v in vals], dtype="float64")
    return out
