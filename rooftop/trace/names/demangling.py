"""Demangling: Itanium-mangled names (`_ZN7cutlass13device_kernel...`, what CUPTI reports for kernels
launched through the driver API) become C++ names with LLVM's demangler (pycxxfilt), one distinct name
at a time. `rooftop.trace.to_table` applies it to every row, so every importer stores demangled names."""
from __future__ import annotations

import numpy as np
import pandas as pd

try:  # a missing or broken demangler must not take every command down: names then stay as stored
    from pycxxfilt import itanium_demangle as _itanium_demangle
except ImportError:  # pragma: no cover - exercised by tests/test_collect_ready.py in a subprocess
    _itanium_demangle = None


def demangle(name: str | None) -> str | None:
    """The C++ name of an Itanium-mangled symbol; any other text (or a malformed symbol) unchanged."""
    if not isinstance(name, str) or not name.startswith(("_Z", "__Z")) or _itanium_demangle is None:
        return name
    try:
        return _itanium_demangle(name[1:] if name.startswith("__Z") else name) or name
    except ValueError:  # starts like a symbol but is not one (or was cut short): keep what the file says
        return name


def _factorize(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(code per row, distinct values); missing values get code -1. One hash pass over the rows."""
    codes, uniq = pd.factorize(values, use_na_sentinel=True)
    return codes, np.asarray(uniq, dtype=object)


def _take(labels: list, codes: np.ndarray, index) -> pd.Series:
    """Row values from per-distinct `labels` (code -1: missing)."""
    table = np.array(list(labels) + [None], dtype=object)
    return pd.Series(table[codes], index=index, dtype=object)


def demangle_all(names: pd.Series) -> pd.Series:
    """Vectorised `demangle`: only the distinct names that look mangled are demangled."""
    codes, uniq = _factorize(names)
    out = [demangle(n) if isinstance(n, str) else n for n in uniq]
    if all(o is n for o, n in zip(out, uniq)):
        return names
    return _take(out, codes, names.index)
