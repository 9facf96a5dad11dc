"""Long lists of flat records (the metadata's per-step entries: thousands of small dicts of numbers
and labels), copied and checked in C instead of one Python call per value.

A 1M-kernel capture's metadata holds a step entry per step (14,000 in a scaled nsys export), and
every load walks it three times (strict JSON, redaction, scrubbing): ~300k Python calls each. Its
JSON text answers the same questions at C speed: the text is searched once (for a secret's gate, a
lone surrogate, an integer past int64) and parsed back into the copy. Anything the text cannot
vouch for (nested values, NaN, objects JSON does not know, a brace inside a string) goes the slow
way, value by value, as before."""
from __future__ import annotations

import json
import re
from typing import Any

MIN_RECORDS = 64  # shorter lists: the per-value walk is as cheap as the detour
_BIG_INT = re.compile(r"\d{19}")  # a run of 19+ digits: maybe past int64 (json_safe nulls those)
_SURROGATE = re.compile("[\ud800-\udfff]")


def flat_text(obj: Any, allow_nan: bool) -> str | None:
    """The JSON text of `obj` where it is a list of at least MIN_RECORDS flat values (dicts whose
    values are strings, numbers, bools or nulls; plain strings or numbers) and the text shows it:
    one `[`/`]` pair and one `{`/`}` pair per element (a brace inside a string breaks the count:
    then None, the slow way; a string that makes up for a missing dict is judged as text, as the
    walk would judge it). None otherwise."""
    if not isinstance(obj, list) or len(obj) < MIN_RECORDS or not isinstance(obj[0], dict):
        return None
    try:
        text = json.dumps(obj, ensure_ascii=False, allow_nan=allow_nan, check_circular=False)
    except (TypeError, ValueError, RecursionError):  # a value JSON cannot hold, NaN where refused
        return None
    n = len(obj)
    if text.count("[") != 1 or text.count("]") != 1 or text.count("{") != n or text.count("}") != n:
        return None
    return text


def plain_copy(text: str) -> list:
    """The records back from their text: a new list of new dicts (keys as text, as JSON has them)."""
    return json.loads(text)


def strict(text: str) -> bool:
    """Whether the records of `text` (no NaN: `flat_text(..., allow_nan=False)`) are strict JSON
    already: no lone surrogate, no integer that might pass int64."""
    return _SURROGATE.search(text) is None and _BIG_INT.search(text) is None
