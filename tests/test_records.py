"""rooftop/trace/records.py: long lists of flat step entries are checked and copied through their JSON text;
every result must equal the per-value walk's, and whatever the text cannot vouch for goes that way."""
from __future__ import annotations

import math

import pytest

from rooftop.trace import redact as rd
from rooftop.trace.records import MIN_RECORDS, flat_text
from rooftop.trace.meta import json_safe


def _steps(n=200, **extra):
    out = [{"phase": "decode" if i else "prefill", "index": i, "marker": f"decode_step_{i}", "new_tokens": 1,
            "gpu_start_ns": 1000 * i, "ratio": 0.5, "graphs": None, "eager": True} for i in range(n)]
    for i, (k, v) in enumerate(extra.items()):
        out[n // 2 + i][k] = v
    return out


def _slow_redact(obj):
    r = rd._Redactor()
    if isinstance(obj, list):
        return [r.walk(v, 1) for v in obj]
    return r.walk(obj, 0)


def test_clean_steps_take_the_fast_path_and_equal_the_walk(monkeypatch):
    steps = _steps()
    assert flat_text(steps, allow_nan=False) is not None
    got = rd.redact({"steps": steps})["steps"]
    assert got == steps and got is not steps and got[0] is not steps[0]  # a copy, equal
    assert json_safe({"steps": steps})["steps"] == steps


@pytest.mark.parametrize("secret", [
    {"marker": "decode hf_" + "a" * 34},             # a token shape in a label
    {"hf_token": "x"},                               # a secret-named key with a text value
    {"label": "Authorization: Bearer abcdefghijklmnopqrstuvwxyz"},
    {"path": "https://user:hunter22@example.com/x"},
    {"note": 'say "token=abcdefghijklmnop"'},       # escapes: the walk, not the text, judges it
])
def test_a_secret_anywhere_in_the_entries_is_redacted_as_the_walk_does(secret):
    steps = _steps(**secret)
    want = _slow_redact(steps)
    got = rd.redact({"steps": steps})["steps"]
    assert got == want and got != steps  # something was redacted, exactly as value by value


@pytest.mark.parametrize("odd", [{"x": math.nan}, {"x": math.inf}, {"x": 2 ** 70}, {"x": "\ud800 lone"},
                                 {"x": [1, 2]}, {"x": {"y": 1}}, {"x": "a { brace"}, {"x": (1, 2)}])
def test_what_the_text_cannot_vouch_for_goes_value_by_value(odd):
    steps = _steps(**odd)
    want = [json_safe(v, None, 2) for v in steps]  # the per-value rules, entry by entry
    assert json_safe({"steps": steps})["steps"] == want


def test_short_lists_and_lists_of_other_things_stay_on_the_walk():
    assert flat_text(_steps(MIN_RECORDS - 1), allow_nan=True) is None
    assert flat_text(["a"] * 500, allow_nan=True) is None
    assert flat_text([{"a": 1}] * 100 + [{"b": [1]}], allow_nan=True) is None
    # a text that only looks like a record is still judged as text, as the walk judges it
    mixed = [{"a": 1}] * 100 + ["{} hf_" + "b" * 34]
    assert rd.redact({"m": mixed})["m"] == _slow_redact(mixed) != mixed
