"""Human formatting of numbers with units. Unknown (None/NaN) is shown as an em dash, never 0."""
from __future__ import annotations

import math

UNKNOWN = "—"


def _unknown(v) -> bool:
    if v is None:
        return True
    try:
        return math.isnan(float(v))
    except (TypeError, ValueError):
        return True


def _scaled(v: float, units: list[tuple[float, str]], digits: int = 3) -> str:
    for scale, unit in units:
        if abs(v) >= scale:
            return f"{v / scale:.{digits}g} {unit}"
    scale, unit = units[-1]
    return f"{v / scale:.{digits}g} {unit}"


def fmt_ns(v) -> str:
    """Duration in ns -> `12.3 µs`, `4.56 ms`, `1.2 s`."""
    if _unknown(v):
        return UNKNOWN
    v = float(v)
    if abs(v) < 1e3:
        return f"{v:.0f} ns"
    return _scaled(v, [(1e9, "s"), (1e6, "ms"), (1e3, "µs")])


def fmt_bytes(v) -> str:
    if _unknown(v):
        return UNKNOWN
    v = float(v)
    if abs(v) < 1e3:
        return f"{v:.0f} B"
    return _scaled(v, [(1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")])


def fmt_flops(v) -> str:
    if _unknown(v):
        return UNKNOWN
    v = float(v)
    if abs(v) < 1e3:
        return f"{v:.0f}"
    return _scaled(v, [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")])


def fmt_rate(v, unit: str = "B/s") -> str:
    """Bytes/s or FLOP/s: `3.35 TB/s`, `989 TFLOP/s`."""
    if _unknown(v):
        return UNKNOWN
    v = float(v)
    for scale, p in [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]:
        if abs(v) >= scale:
            return f"{v / scale:.3g} {p}{unit}"
    return f"{v:.3g} {unit}"


def fmt_pct(v, digits: int = 1) -> str:
    """A 0..1 fraction as a percentage."""
    if _unknown(v):
        return UNKNOWN
    v = 100 * float(v)
    if 0 < abs(v) < 0.1:
        return f"{v:.2g}%"
    return f"{v:.{digits}f}%"


def fmt_num(v, digits: int = 3) -> str:
    if _unknown(v):
        return UNKNOWN
    v = float(v)
    if v == int(v) and abs(v) < 1e6:
        return f"{int(v)}"
    return f"{v:.{digits}g}"
