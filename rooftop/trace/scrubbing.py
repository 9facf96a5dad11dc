"""Scrubbing: secrets out of every text column and every metadata string, over-long text cut, absolute
source paths reduced to the file's name."""
from __future__ import annotations

import re
from typing import Any, Mapping

import pyarrow as pa

from rooftop import limits
from rooftop.trace.conform import _is_text


def scrub(table: pa.Table, meta: Mapping[str, Any]) -> tuple[pa.Table, dict[str, Any]]:
    """Secrets out of every text column and every metadata string (see `scrub_all`)."""
    table, meta, _ = scrub_all(table, meta)
    return table, meta


def scrub_all(table: pa.Table, meta: Mapping[str, Any]) -> tuple[pa.Table, dict[str, Any], list[str]]:
    """The one place every load and every import goes through before anything is shown or written:
    - every text column (plain, large or dictionary strings: names, paths, ops, kinds, phases...)
      loses token-shaped and secret-assigned values (`rooftop.trace.redact`), and text longer than the
      `ROOFTOP_MAX_TEXT` budget is cut (so no later pattern meets an absurd string);
    - the metadata: secret-named keys and secret-shaped strings, at any depth; absolute source
      paths become the file's name.
    Each distinct value is looked at once, and a C-level (RE2) gate leaves untouched the values
    that cannot hold a secret. Returns the table, the metadata and warnings."""
    cut = 0
    for i, name in enumerate(table.column_names):
        col = table.column(i)
        if not _is_text(col.type):
            continue
        fixed, n = _scrub_column(col)
        cut += n
        if fixed is not col:
            table = table.set_column(i, name, fixed)
    warnings = [f"{cut} text value(s) longer than {limits.max_text():,} characters cut "
                f"(budget {limits.MAX_TEXT_ENV})"] if cut else []
    return table, _scrub_meta(meta), warnings


def _scrub_column(col: pa.ChunkedArray) -> tuple[pa.ChunkedArray, int]:
    import pyarrow.compute as pc

    from rooftop.trace.redact import GATE, redact_text

    if col.num_chunks == 0 or len(col) == 0:
        return col, 0
    was_dict = pa.types.is_dictionary(col.type)
    if was_dict:
        col = col.unify_dictionaries()
        values = col.chunk(0).dictionary
        chunks = col.chunks
    else:
        encoded = col.dictionary_encode().unify_dictionaries()
        values = encoded.chunk(0).dictionary
        chunks = encoded.chunks
    if len(values) == 0:
        return col, 0
    cap = limits.max_text()
    too_long = pc.greater(pc.utf8_length(values), cap)
    suspect = pc.or_(pc.match_substring_regex(values, GATE.removeprefix("(?i)"), ignore_case=True), too_long)
    hits = pc.indices_nonzero(pc.fill_null(suspect, False)).to_pylist()
    if not hits:
        return col, 0
    texts = values.to_pylist()
    cut = 0
    for j in hits:
        t = texts[j]
        if t is None:
            continue
        if len(t) > cap:
            t = t[: cap - 1] + "…"
            cut += 1
        texts[j] = redact_text(t)
    new_values = pa.array(texts, type=values.type)
    out = pa.chunked_array([pc.take(new_values, c.indices) for c in chunks], type=values.type)
    if was_dict:  # re-encoded: two names may have become one ("k_[redacted]")
        return out.dictionary_encode().cast(col.type), cut
    return out.cast(col.type), cut


_PATH_KEYS = ("file", "path", "src", "source", "input", "report", "trace")


def _scrub_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    from rooftop.trace.redact import redact

    meta = redact(dict(meta))
    source = meta.get("source")
    if isinstance(source, dict):
        for k in _PATH_KEYS:
            v = source.get(k)
            if isinstance(v, str) and (v.startswith(("/", "~")) or re.match(r"^[A-Za-z]:[\\/]", v)):
                source[k] = re.split(r"[\\/]", v.rstrip("/\\"))[-1] or None  # the name, not where it lived
    return meta
