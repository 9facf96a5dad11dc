"""Names for what ran and for a scope of it, from the metadata alone: a first paint shows them while the
rows load."""
from __future__ import annotations

from rooftop.trace import Trace


def trace_identity(trace: Trace, counters: bool | None) -> dict:
    """What ran, from the metadata alone (no rows needed: a big trace's first paint shows it while
    its events load); `counters` is whether the rows carry hardware counters (None: not known yet)."""
    m = trace.meta
    model = m.get("model") or {}
    wl = m.get("workload") or {}
    src = m.get("source") or {}
    dev = m.get("device") or {}
    parts = []
    for k, label in (("batch", "batch"), ("prompt_len", "prompt"), ("gen_len", "gen"), ("dtype", ""),
                     ("attn", "attn"), ("cuda_graphs", "graphs")):
        v = wl.get(k)
        if v is not None:
            parts.append(f"{label} {v}".strip() if k != "cuda_graphs" else ("CUDA graphs" if v else "no graphs"))
    return {
        "label": trace.label,
        "model": model.get("name"),
        "workload": ", ".join(parts) or None,
        "device": dev.get("name"),
        "source": " ".join(str(x) for x in (src.get("tool"), src.get("version")) if x) or None,
        "modeled": trace.modeled,
        "counters": counters,
        "incomplete": bool(m.get("incomplete")),
        "ranks": trace.ranks,
    }


def scope_name(phase: str | None = None, step: int | None = None, rank: int | None = None,
               device: int | None = None) -> str | None:
    """`decode`, `decode step 3`, `rank 1 · decode step 3`, `device 1 · decode step 3`; None for the
    whole trace."""
    parts = []
    if rank is not None:
        parts.append(f"rank {rank}")
    if device is not None:
        parts.append(f"device {device}")
    if phase is not None or step is not None:
        parts.append(" ".join(str(x) for x in (phase, None if step is None else f"step {step}") if x is not None))
    return " · ".join(parts) or None
