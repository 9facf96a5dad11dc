"""Human formatting of numbers with units. Unknown (None/NaN) is shown as an em dash, never 0."""
from __future__ import annotations

import math

UNKNOWN = "—"


def is_unknown(v) -> bool:
    """Whether a value is missing: None, NaN, pandas' NA or NaT, of any type (text included).
    The one test the report, the analysis and the TUI use for "unknown"."""
    if v is None:
        return True
    if isinstance(v, str) or hasattr(v, "__len__"):  # text, a launch shape, an array: a value
        return False
    try:
        return bool(v != v)  # NaN and NaT are the values unequal to themselves
    except TypeError:  # pandas' NA: its comparisons are NA, whose truth is undefined
        return True


def _no_number(v) -> bool:
    """Unknown, or not a number at all: the formatters show an em dash for both."""
    if is_unknown(v):
        return True
    try:
        float(v)
    except (TypeError, ValueError):
        return True
    return False


_SI = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
_TIME = [(1e9, "s"), (1e6, "ms"), (1e3, "µs")]
# Below the base unit: a tiny non-zero value keeps its size (`79.7 µB/s`), never `0` or `7.97e-05`.
_SUB = [(1e-3, "m"), (1e-6, "µ"), (1e-9, "n"), (1e-12, "p"), (1e-15, "f")]


def _scaled(v, units: list[tuple[float, str]], base: str, suffix: str = "", small: str = ".0f") -> str:
    """`v` in the largest unit it reaches (3 significant digits), else in the base unit; below one
    base unit, a value the base format would show as 0 gets a sub-unit prefix."""
    if _no_number(v):
        return UNKNOWN
    v = float(v)
    for scale, prefix in units:
        if abs(v) >= scale:
            return f"{v / scale:.3g} {prefix}{suffix}"
    if v != 0 and abs(v) < 1:
        return _sub(v, suffix or base)
    return f"{v:{small}} {base}".rstrip()


def _sub(v: float, unit: str) -> str:
    """A magnitude below 1 with an SI sub-unit prefix: 0.0797 -> `79.7 m`, 7.97e-05 -> `79.7 µ`."""
    for scale, prefix in _SUB:
        if abs(v) >= scale:
            return f"{v / scale:.3g} {prefix}{unit}".rstrip()
    return f"{'>-' if v < 0 else '<'}1 {_SUB[-1][1]}{unit}"  # below the last prefix: say so


def fmt_ns(v) -> str:
    """Duration in ns -> `12.3 µs`, `4.56 ms`, `1.2 s`; under 1 ns in ps (`500 ps`)."""
    if not _no_number(v) and 0 < abs(float(v)) < 1:
        return _sub(float(v) * 1e-9, "s")
    return _scaled(v, _TIME, "ns")


def fmt_ns_at(v: float, resolution: float) -> str:
    """A time in ns in its own unit with the decimals `resolution` (ns) needs: a ruler's ticks
    `20 ms`, `200 µs`, and deep in a zoom `49.605 ms` beside `49.61 ms`, never two reading `49.6 ms`."""
    scale, unit = next(((f, u) for f, u in _TIME if abs(v) >= f), (1.0, "ns"))
    step = resolution / scale
    digits = max(0, math.ceil(-math.log10(step) - 1e-9)) if 0 < step < 1 else 0
    return f"{v / scale:.{digits}f} {unit}"


def fmt_bytes(v) -> str:
    return _scaled(v, _SI, "B", "B")


def fmt_flops(v) -> str:
    return _scaled(v, _SI, "")


def fmt_rate(v, unit: str = "B/s") -> str:
    """Bytes/s or FLOP/s: `3.35 TB/s`, `989 TFLOP/s`."""
    return _scaled(v, _SI, unit, unit, small=".3g")


def fmt_tera(v, unit: str) -> str:
    """A rate stored in tera-units (`unit` is `TFLOP/s` or `TB/s`) under a header that names the unit:
    the bare number from 0.01 up (`1.23`), and below that the rate with its own unit (`529 MFLOP/s`,
    `83.7 MB/s`), never a prefix on a prefix (`529 µ TFLOP/s`)."""
    if _no_number(v) or abs(float(v)) >= 0.01 or float(v) == 0:
        return fmt_num(v)
    return fmt_rate(float(v) * 1e12, unit[1:])


def fmt_pct(v, digits: int = 1) -> str:
    """A 0..1 fraction as a percentage."""
    if _no_number(v):
        return UNKNOWN
    v = 100 * float(v)
    if 0 < abs(v) < 1e-4:  # what `.2g` would print with an exponent
        return f"{'>-' if v < 0 else '<'}0.0001%"
    if 0 < abs(v) < 0.1:
        return f"{v:.2g}%"
    return f"{v:.{digits}f}%"


# A rate over kernels covering less of the time than this is a lower bound: the rest moved or
# computed something nobody counted (0.995: a rounding of "all").
FULL_COVERAGE = 0.995


def bounded_cell(cell: str, status, coverage=None) -> str:
    """A formatted rate with its coverage: ">=x" where it is a lower bound (its status says so, or
    its coverage is below full), the cell as it is otherwise."""
    partial = not _no_number(coverage) and float(coverage) < FULL_COVERAGE
    return f">={cell}" if (status == "lower bound" or partial) and cell != UNKNOWN else cell


def fmt_bounded(value, status, fmt=None, coverage=None) -> str:
    """The one way a phase or step rate/utilization is shown (report text, TUI): unknown ("—")
    where the value or its status is unknown (coverage below the minimum: a sliver says nothing,
    and is never 0), ">=x" where it is a lower bound (status "lower bound", or `coverage` below
    full), x where the work it counts covers all the time. `fmt`: the value's formatter (fmt_pct
    by default)."""
    if status == "unknown" or _no_number(value):
        return UNKNOWN
    return bounded_cell((fmt or fmt_pct)(value), status, coverage)


def fmt_num(v, digits: int = 3) -> str:
    """A plain number: whole numbers as they are, others to `digits` significant digits; from a
    million up and below 0.001 with an SI prefix (`1.5 M`, `79.7 µ`), never an exponent."""
    if _no_number(v):
        return UNKNOWN
    v = float(v)
    if v == int(v) and abs(v) < 1e6:
        return f"{int(v)}"
    if abs(v) >= 1e3 and v != int(v) or abs(v) >= 1e6:  # `.3g` would print 1.2e+03
        return _scaled(v, _SI, "")
    if abs(v) < 1e-3:
        return _sub(v, "")
    return f"{v:.{digits}g}"


def fmt_count(n: int, noun: str, plural: str | None = None) -> str:
    """`1 row`, `1,471 rows`: a count with its noun in the right number."""
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"


def fmt_value(v, kind: str, unit: str = "") -> str:
    """A value by its column's format kind (`rooftop.present.columns`): ns, pct, bytes, flops,
    rate (per second, `unit`), int or num; text passes through (unknown: an em dash)."""
    if kind == "text":
        return UNKNOWN if is_unknown(v) else str(v)
    if kind == "ns":
        return fmt_ns(v)
    if kind == "pct":
        return fmt_pct(v)
    if kind == "bytes":
        return fmt_bytes(v)
    if kind == "flops":
        return fmt_flops(v)
    if kind == "rate":
        return fmt_rate(v, unit)
    return fmt_num(v)
