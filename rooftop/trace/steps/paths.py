"""NVTX / annotation paths: the phase, step and layer one path names (`decode/step=12/layer=3/attn`),
one at a time and vectorised (each distinct path once; plain ASCII paths through Arrow's RE2)."""
from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from rooftop.trace.codes import categorical
from rooftop.trace.steps.markers import _engine_marker


_STEP_RE = re.compile(r"(?:^|/)(?:step[=_# ]?|ProfilerStep#)(\d+)(?:/|$)")
# A layer: `layer=3`, `layer_12_computation`, a module path's `layers.7.` / `block.3.` / `h.5.` (GPT-2),
# else a module path's list index (`encoder.0.conv`: letters on both sides, so no version number).
# No lookahead (the same pattern runs in Arrow's RE2): the character after the number is consumed.
_LAYER_RE = re.compile(r"(?:^|[/.: ])(?:layers?[=_.# ]?|blocks?[=_.# ]?|h\.)(\d+)(?:[/._ ]|$)")
_LAYER_DOT_RE = re.compile(r"(?:^|[/: ])[A-Za-z_]+(?:\.[A-Za-z_]+)*\.(\d+)\.[A-Za-z_]")
_LAYER_RE2 = _LAYER_RE.pattern.replace(r"(\d+)", r"(?P<n>\d+)")  # the same, for Arrow (named group)
_LAYER_DOT_RE2 = _LAYER_DOT_RE.pattern.replace(r"(\d+)", r"(?P<n>\d+)")
_PHASE_RE = re.compile(r"(?:^|/)(prefill|decode)(?=/|$|[=_ ])", re.IGNORECASE)
# SGLang's profiler labels forward passes with the forward mode.
_SGLANG_RE = re.compile(r"(?:forward_)?(extend|prefill|decode)(?:_batch)?\b", re.IGNORECASE)


def parse_path(path: str | None) -> tuple[str | None, int | None, int | None]:
    """(phase, step, layer) from a path like `decode/step=12/layer=3/attn`; None where absent.

    The step number is the one the path names; a marker that repeats its name (vLLM) gets its
    step from the importer (`assign`), not from here."""
    if not path:
        return None, None, None
    phase = None
    m = _PHASE_RE.search(path)
    if m:
        phase = m.group(1).lower()
    else:
        for seg in reversed(path.split("/")):  # the innermost engine marker says the phase
            mk = _engine_marker(seg)
            if mk is not None and mk.phase:
                phase = mk.phase
                break
        else:
            s = _SGLANG_RE.search(path)
            if s:
                phase = "prefill" if s.group(1).lower() in ("extend", "prefill") else "decode"
    m = _STEP_RE.search(path)
    step = _int32(m.group(1)) if m else None
    return phase, step, parse_layer(path)


def parse_layer(path: str | None) -> int | None:
    """The layer a path names (`.../layer=3/...`), or None: `parse_path`'s third value alone."""
    m = (_LAYER_RE.search(path) or _LAYER_DOT_RE.search(path)) if path else None
    return _int32(m.group(1)) if m else None


def _int32(digits: str) -> int | None:
    """A step or layer number; one that does not fit the int32 column is not a number we can use."""
    v = int(digits[:12])
    return v if len(digits) <= 10 and v < 2**31 else None


def parse_paths(paths: pd.Series, full: np.ndarray | None = None) -> pd.DataFrame:
    """Vectorised `parse_path` -> DataFrame(phase, step, layer) aligned with `paths` (phase: a
    categorical, missing where none). Each distinct path is parsed once; `full` (a row mask) limits
    the phase and step to those rows' paths (the others get the layer alone, the cheap part: a
    million-kernel trace holds ~350k distinct paths, most already placed by the importer)."""
    codes, uniq = pd.factorize(paths, use_na_sentinel=True)
    uniq = np.asarray(uniq, dtype=object)
    if full is None:
        wanted = np.arange(len(uniq))
    else:
        mask = np.zeros(len(uniq), dtype=bool)
        c = codes[np.asarray(full, dtype=bool)]
        mask[c[c >= 0]] = True
        wanted = np.flatnonzero(mask)
    phase = np.full(len(uniq), None, dtype=object)
    step = np.full(len(uniq) + 1, np.nan)  # the last entry: code -1, no path
    arrow = _plain_texts(uniq)  # (converted to Arrow once, for the phases, steps and layers)
    found, steps_found = _phases_and_steps(uniq[wanted], None if arrow is None else (arrow[0].take(wanted),
                                                                                    arrow[1][wanted]))
    phase[wanted] = found
    step[wanted] = steps_found
    layers = np.append(parse_layers(uniq, arrow), np.nan)
    return pd.DataFrame({
        "phase": categorical(phase, codes),
        "step": pd.array(step[codes], dtype="Int32"),
        "layer": pd.array(layers[codes], dtype="Int32"),
    }, index=paths.index)


def _phases_and_steps(paths: np.ndarray, arrow: tuple | None = ...) -> tuple[np.ndarray, np.ndarray]:
    """`parse_path`'s phase (object, None where none) and step (float64, NaN where none) of each
    path (an object array of texts). Plain ASCII paths that name their phase take Arrow's regex
    engine, all at once, as `parse_layers` does (a lookahead RE2 lacks is a consumed character
    there: the same first match); any other path (one whose phase an engine marker names, say)
    takes `parse_path`. `arrow`: `_plain_texts(paths)`, where the caller has it."""
    phase = np.full(len(paths), None, dtype=object)
    step = np.full(len(paths), np.nan)
    arrow = _plain_texts(paths) if arrow is ... else arrow
    rest = np.arange(len(paths)) if arrow is None else np.flatnonzero(~arrow[1])
    if arrow is not None and len(rest) < len(paths):
        import pyarrow as pa
        import pyarrow.compute as pc

        arr, plain = arrow
        where = np.flatnonzero(plain)
        sub = arr.take(pa.array(where))
        named = pc.extract_regex(sub, _PHASE_RE2)
        ok = named.is_valid().to_numpy(zero_copy_only=False)
        phase[where[ok]] = np.asarray(pc.utf8_lower(named.field("p").filter(pa.array(ok))).to_pylist(), dtype=object)
        step[where] = _numbers(pc.extract_regex(sub, _STEP_RE2))
        rest = np.sort(np.concatenate([rest, where[~ok]]))  # no phase named: the engine markers' turn
    for i in rest.tolist():
        ph, st, _ = parse_path(paths[i])
        phase[i] = ph
        step[i] = np.nan if st is None else st
    return phase, step


# `_PHASE_RE` and `_STEP_RE` for Arrow: a named group, and the lookahead consumed
_PHASE_RE2 = r"(?i)(?:^|/)(?P<p>prefill|decode)(?:/|$|[=_ ])"
_STEP_RE2 = _STEP_RE.pattern.replace(r"(\d+)", r"(?P<n>\d+)")


def _plain_texts(paths: np.ndarray) -> tuple[Any, np.ndarray] | None:
    """(the paths as an Arrow array, which of them are plain: ASCII without a newline, where RE2
    and Python's `re` match alike), or None if they are not all texts."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        arr = pa.array(paths, type=pa.string(), from_pandas=True)
    except (pa.ArrowException, TypeError, ValueError):
        return None
    plain = pc.and_(pc.string_is_ascii(arr), pc.invert(pc.match_substring(arr, "\n"))).fill_null(False)
    return arr, plain.to_numpy(zero_copy_only=False)


def _numbers(match: Any) -> np.ndarray:
    """The `n` group of an Arrow regex match as `_int32` reads it (float64, NaN where none)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out = np.full(len(match), np.nan)
    found = match.field("n")  # (its entries under a null match are not nulls themselves)
    ok = match.is_valid().to_numpy(zero_copy_only=False) & (pc.utf8_length(found).fill_null(99).to_numpy() <= 10)
    if ok.any():
        digits = found.filter(pa.array(ok)).cast(pa.int64()).to_numpy()
        out[np.flatnonzero(ok)] = np.where(digits < 2**31, digits, np.nan)
    return out


def parse_layers(paths: np.ndarray, arrow: tuple | None = ...) -> np.ndarray:
    """`parse_layer` of each path (object array of texts or None) -> float64, NaN where none.

    Plain ASCII paths take Arrow's regex engine (RE2), all at once: a million-kernel trace holds
    ~350k distinct paths, slow one at a time. The pattern means the same there for ASCII text
    without newlines (RE2's `\\d` is ASCII, its `$` is the very end); other paths take `parse_layer`.
    `arrow`: `_plain_texts(paths)`, where the caller has it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out = np.full(len(paths), np.nan)
    if not len(paths):
        return out
    if arrow is ...:
        arrow = _plain_texts(paths)
    arr, plain = arrow if arrow is not None else (None, np.zeros(len(paths), dtype=bool))
    if plain.any():
        where = np.flatnonzero(plain)
        sub = arr.take(pa.array(where))
        out[where] = _numbers(pc.extract_regex(sub, _LAYER_RE2))
        rest = np.isnan(out[where])
        if rest.any():
            out[where[rest]] = _numbers(pc.extract_regex(sub.filter(pa.array(rest)), _LAYER_DOT_RE2))
    for i in np.flatnonzero(~plain).tolist():
        v = parse_layer(paths[i])
        if v is not None:
            out[i] = v
    return out
