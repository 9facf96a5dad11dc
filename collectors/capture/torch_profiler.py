"""A finished torch.profiler session -> rooftop rows, through the same importer as every Kineto file.

The profiler writes its Kineto trace (`prof.export_chrome_trace`) and `collectors.readers.kineto`
reads it back: the collector's rows are exactly what `rooftop import` makes of that file, on a CPU
as on the H100/B200 captures users bring (kernels, copies, ranges, CUDA-graph replays, steps, op
costs from the recorded shapes). Only what the profiler cannot write (model, workload, the steps'
batch and context) is added afterwards, by the Recorder. torch is never imported here.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd


def import_session(prof: Any, keep: str | os.PathLike | None = None) -> tuple[pd.DataFrame, dict]:
    """Export `prof`'s Kineto trace and import it. `keep`: where to leave the JSON (else a
    temporary file, removed)."""
    from collectors.readers.kineto import read_kineto

    if keep is not None:
        keep = Path(keep)
        keep.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(keep))
        return read_kineto(keep)
    with tempfile.TemporaryDirectory(prefix="rooftop-") as tmp:
        out = Path(tmp) / "trace.pt.trace.json"
        prof.export_chrome_trace(str(out))
        return read_kineto(out)


def merge_steps(found: list[dict], declared: list[dict]) -> list[dict]:
    """The steps the trace shows (`found`, with their GPU windows) updated with what the caller
    declared for them (batch, context, new tokens), matched by (phase, index); declared steps the
    trace lacks are kept, after the others."""
    by_key = {(d.get("phase"), d.get("index")): d for d in declared if isinstance(d, dict)}
    out, used = [], set()
    for f in found:
        key = (f.get("phase"), f.get("index"))
        entry = dict(f)
        if key in by_key:
            entry.update({k: v for k, v in by_key[key].items()})
            used.add(key)
        out.append(entry)
    out += [dict(d) for k, d in by_key.items() if k not in used]
    return out
