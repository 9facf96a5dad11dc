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


_SI = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
_TIME = [(1e9, "s"), (1e6, "ms"), (1e3, "µs")]


def _scaled(v, units: list[tuple[float, str]], base: str, suffix: str = "", small: str = ".0f") -> str:
    """`v` in the largest unit it reaches (3 significant digits), else in the base unit."""
    if _unknown(v):
        return UNKNOWN
    v = float(v)
    for scale, prefix in units:
        if abs(v) >= scale:
            return f"{v / scale:.3g} {prefix}{suffix}"
    return f"{v:{small}} {base}".rstrip()


def fmt_ns(v) -> str:
    """Duration in ns -> `12.3 µs`, `4.56 ms`, `1.2 s`."""
    return _scaled(v, _TIME, "ns")


def fmt_bytes(v) -> str:
    return _scaled(v, _SI, "B", "B")


def fmt_flops(v) -> str:
    return _scaled(v, _SI, "")


def fmt_rate(v, unit: str = "B/s") -> str:
    """Bytes/s or FLOP/s: `3.35 TB/s`, `989 TFLOP/s`."""
    return _scaled(v, _SI, unit, unit, small=".3g")


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
