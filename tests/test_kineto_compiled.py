"""The compiled Kineto batch decoder (collectors/readers/_kineto_fast.c) against the typed path it
stands in for: the same columns for every batch it takes, the batch left to the Python paths
(None) for every batch it does not, and never a crash: random events rendered every way JSON
allows, every cut and random corruption of a batch, hostile text, and the real captures."""
from __future__ import annotations

import json
import os
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import make_kineto
from collectors.readers import _jsonstream
from collectors.readers import _kineto_events as ke
from collectors.readers._kineto_events import Collector
from collectors.readers._kineto_values import Columns

try:  # built, whatever ROOFTOP_COMPILED or ROOFTOP_SPEEDUPS say: this file tests it
    from collectors.readers import _kineto_fast as fast
except ImportError:
    fast = None
needs_compiled = pytest.mark.skipif(fast is None, reason="the compiled decoder is not built (no C compiler)")


@pytest.fixture(autouse=True)
def compiled_on(monkeypatch):
    """The decoder, and msgspec's typed path it is compared with, on in this file's readers even in
    the run with every speedup off (.ci/run)."""
    monkeypatch.setattr(ke, "_kineto_fast", fast)
    monkeypatch.setenv("ROOFTOP_MSGSPEC", "1")
    if ke.msgspec is None:  # (turned off by an earlier read in this process: looked up again)
        monkeypatch.setattr(ke, "msgspec", ...)


def test_built_where_required():
    """CI builds it (a C compiler is on its machine) and sets ROOFTOP_REQUIRE_COMPILED=1: a build
    that failed quietly (the extension is optional) would otherwise leave these tests skipped.
    Built is asked of the module itself: `ROOFTOP_COMPILED=0` (or `ROOFTOP_SPEEDUPS=0`) leaves it
    built but unused."""
    if fast is None:
        if os.environ.get("ROOFTOP_REQUIRE_COMPILED") == "1":
            pytest.fail("ROOFTOP_REQUIRE_COMPILED=1 but collectors.readers._kineto_fast is not built")
        pytest.skip("the compiled decoder is not built")


def _state(c: Collector) -> dict:
    out = {}
    for k, v in vars(c).items():
        if k in ("compiled", "typed"):
            continue
        if isinstance(v, Columns):
            v = {f: v.np(f).tolist() for f in v.fields}
        elif isinstance(v, dict):
            v = list(v.items())
        out[k] = v
    return out


def _feed(c: Collector, texts: list[str], spans: bool = False):
    """The batches added in order -> the error they end in, if any. `spans`: each batch
    "[" + body + "]" handed over as its body inside a larger buffer (`add_span`, what the stream
    does), with text around it that must not be read."""
    try:
        for t in texts:
            if spans and t.startswith("[") and t.endswith("]"):
                buf = PAD + t[1:-1] + PAD
                c.add_span(buf, len(PAD), len(buf) - len(PAD))
            else:
                c.add_text(t)
    except (ValueError, RecursionError) as exc:  # (what the reader turns into a one-line error)
        return type(exc), str(exc)
    return None


PAD = '},\n {"ph": "X", "cat": "kernel", "ts": 1'  # (a partial event either side of the body)


def _same(*texts: str) -> None:
    """Both collectors, fed the same batches, end equal (or fail with the same error); and so does
    one fed them as spans of a larger buffer."""
    compiled, typed, spans = Collector(), Collector(), Collector()
    typed.compiled = False
    fed = _feed(typed, list(texts))
    assert _feed(compiled, list(texts)) == fed == _feed(spans, list(texts), spans=True)
    assert _state(compiled) == _state(typed) == _state(spans)


def _same_body(body: str) -> None:
    """The compiled decoder reads a body in a buffer as it reads "[" + body + "]" (ASCII: else it
    leaves the span to the caller)."""
    buf = PAD + body + PAD
    got = fast.decode(buf, len(PAD), len(PAD) + len(body))
    assert got == (fast.decode("[" + body + "]") if buf.isascii() else None)
    raw = buf.encode("utf-8", "surrogatepass")  # the bytes as read from a file: the same (None beyond ASCII)
    assert fast.decode(raw, len(PAD), len(raw) - len(PAD)) == got


def _batches(path) -> list[str]:
    texts = []

    class Sink:
        def add_text(self, text):
            texts.append(text)

        def add_objects(self, events):
            pass

    _jsonstream.document(_jsonstream.Stream(path, None, 1 << 20), "traceEvents", Sink())
    return texts


@needs_compiled
def test_real_captures_are_read_compiled_and_equal(fixtures_dir):
    paths = sorted((fixtures_dir / "traces").glob("*.json*"))
    assert paths
    for path in paths:
        texts = _batches(path)
        taken = sum(fast.decode(t) is not None for t in texts)
        assert taken == len(texts), f"{path.name}: {taken} of {len(texts)} batches compiled"
        _same(*texts)


@needs_compiled
def test_real_captures_import_the_same_rows(fixtures_dir, monkeypatch):
    """Whole reads, one process: the rows and metadata with the compiled decoder and without it."""
    from collectors.readers.kineto import read_kineto

    for path in sorted((fixtures_dir / "traces").glob("*.json*")):
        rows, meta = read_kineto(path, workers=1)
        with monkeypatch.context() as m:
            m.setattr(ke, "_kineto_fast", None)
            typed_rows, typed_meta = read_kineto(path, workers=1)
        assert rows.equals(typed_rows) and meta == typed_meta, path.name


@needs_compiled
def test_synthetic_decode_loop_equal(tmp_path):
    path = tmp_path / "t.json"
    make_kineto.make(path, 3000, synthetic=True)
    texts = _batches(path)
    assert len(texts) > 1 and all(fast.decode(t) is not None for t in texts)
    _same(*texts)


# --- random events, rendered with JSON's freedoms (spacing, escapes, key order, repeats) ---

class Raw(str):
    """Text put into the JSON as it is (numbers JSON can spell that Python would not print)."""


NUMBERS = ["0", "-0", "7", "-3", "1.5", "1e3", "2.5E-1", "123456789.123", "1700000000123456.789",
           "0.1234", "9007199254740993", "12345678901234567890", "4611686018427387904",
           "-4611686018427387904", "9223372036854775807", "9223372036854775808", "1e400", "3.0"]
texts = st.one_of(st.sampled_from(["", "aten::mm", "void k<1>(float*)", "decode", "step=3", "ProfilerStep#2",
                                   "a\"b\\c", "tab\there", "\u00e9\u4e2d", "\U0001f600", "\ud800x", "\x00",
                                   "nccl:all_reduce"]), st.text(max_size=6))
ids = st.one_of(st.integers(-5, 5), st.integers(-(2**64), 2**64), texts, st.none(), st.floats(allow_nan=False, allow_infinity=False),
                st.booleans(), st.builds(Raw, st.sampled_from(NUMBERS)))
dims = st.one_of(st.lists(st.integers(-2, 2**63), max_size=4), st.just([1, 2, 3]),
                 st.lists(st.one_of(st.integers(0, 9), st.none(), st.floats(0, 9), texts), min_size=3, max_size=3),
                 texts, st.none(), st.integers(0, 4))
ARG_KEYS = ["External id", "correlation", "device", "stream", "registers per thread", "shared memory", "bytes"]
args = st.one_of(
    st.none(), st.just([]), st.integers(),
    st.lists(st.one_of(st.tuples(st.sampled_from(ARG_KEYS), ids), st.tuples(st.sampled_from(["grid", "block"]), dims),
                       st.tuples(st.sampled_from(["Input Dims", "Input type", "Concrete Inputs"]),
                                 st.recursive(st.one_of(st.integers(0, 9), texts, st.none()),
                                              lambda c: st.lists(c, max_size=3), max_leaves=6)),
                       st.tuples(texts, ids)), max_size=6))
CATS = sorted(ke.WANTED) + ["ac2g", "other"]
event = st.lists(st.one_of(
    st.tuples(st.just("ph"), st.one_of(st.sampled_from(["X"] * 6 + ["s", "f", "i", "M", "Q", ""]), st.none(), st.integers(0, 2))),
    st.tuples(st.just("cat"), st.one_of(st.sampled_from(CATS), st.none(), st.integers(0, 2))),
    st.tuples(st.just("name"), st.one_of(texts, st.none(), st.integers(0, 2))),
    st.tuples(st.sampled_from(["pid", "tid"]), ids),
    st.tuples(st.sampled_from(["ts", "dur"]), st.one_of(st.builds(Raw, st.sampled_from(NUMBERS)), st.none(), texts,
                                                        st.floats(-1e6, 1e15, allow_nan=False))),
    st.tuples(st.just("args"), args),
    st.tuples(texts, ids)), max_size=9)
# most events in the plain subset, so that the compiled path is the one mostly compared
plain = st.builds(lambda cat, name, pid, tid, ts, dur, corr, ext: [
    ("ph", "X"), ("cat", cat), ("name", name), ("pid", pid), ("tid", tid), ("ts", Raw(ts)), ("dur", Raw(dur)),
    ("args", [("correlation", corr), ("External id", ext), ("grid", [1, 2, 3])])],
    st.sampled_from(CATS), texts, st.integers(0, 3), st.integers(0, 3), st.sampled_from(["5", "1.5", "7.25", "100.001"]),
    st.sampled_from(["0", "2", "1.5"]), st.integers(0, 9), st.integers(-1, 9))


def _render(v, rnd: random.Random) -> str:
    sp = rnd.choice(["", " ", "\n  ", "\t"])
    if isinstance(v, Raw):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=rnd.random() < 0.5)
    if isinstance(v, list) and v and all(isinstance(p, tuple) for p in v):  # an object's pairs, repeats kept
        return "{" + sp + ("," + sp).join(f"{_render(k, rnd)}{sp}:{sp}{_render(x, rnd)}" for k, x in v) + sp + "}"
    if isinstance(v, list):
        return "[" + ("," + sp).join(_render(x, rnd) for x in v) + sp + "]"
    return json.dumps(v)


@needs_compiled
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(plain, event), min_size=1, max_size=12), st.integers(0, 2**32))
def test_random_events_equal(events, seed):
    rnd = random.Random(seed)
    text = "[" + ",\n".join(_render(e if e else [], rnd) for e in events) + "]"
    _same(text)


@needs_compiled
@given(st.lists(plain, min_size=2, max_size=20), st.integers(0, 2**32))
@settings(max_examples=100, deadline=None)
def test_batches_compiled_and_not_mix(events, seed):
    """Ids (names, threads, shapes) numbered across batches the same whichever path read each."""
    rnd = random.Random(seed)
    half = len(events) // 2
    first = "[" + ",".join(_render(e, rnd) for e in events[:half]) + "]"
    odd = events[half:] + [[("ph", "X"), ("cat", "cpu_op"), ("name", "x"), ("ts", Raw("1")),
                            ("args", [("External id", None)])]]  # null id: not the plain subset
    second = "[" + ",".join(_render(e, rnd) for e in odd) + "]"
    assert fast.decode(second) is None
    _same(first, second, first)


# --- what it leaves to the Python paths, and hostile text ---

BASE = ('{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.5, "dur": 2,'
        ' "args": {"correlation": 5, "External id": 3, "grid": [1, 2, 3], "block": [4, 1, 1], "device": 0}}')


@needs_compiled
@pytest.mark.parametrize("text", [
    "[" + BASE.replace('"External id": 3', '"External id": null') + "]",
    "[" + BASE.replace('"External id": 3', '"External id": "3"') + "]",
    "[" + BASE.replace('"External id": 3', '"External id": 3.0') + "]",
    "[" + BASE.replace('"correlation": 5', '"correlation": 99999999999999999999') + "]",
    "[" + BASE.replace('"grid": [1, 2, 3]', '"grid": [1, null, 3]') + "]",
    "[" + BASE.replace('"name": "k"', '"name": "\\ud800"') + "]",
    "[" + BASE.replace('"name": "k"', '"na\\u006de": "k"') + "]",
    "[" + BASE.replace('"ts": 10.5', '"ts": 10.5, "ts": 11') + "]",
    "[" + BASE.replace('"ph": "X"', '"ph": "Z"') + "]",
    "[" + BASE.replace('"ts": 10.5', '"ts": "10.5"') + "]",
    "[" + BASE.replace('"dur": 2', '"dur": true') + "]",
    "[" + BASE.replace('"args": {', '"args": [') .replace("}}", "]}") + "]",
    "[" + BASE + ",]",
    "[" + BASE + "] x",
    "[" + BASE.replace('"tid": 7', '"tid": 07') + "]",
    "[" + BASE.replace('"name": "k"', '"name": "a\x01b"') + "]",
    "[" + BASE.replace('"device": 0', '"device": ' + "[" * 2000 + "]" * 2000) + "]",
    "[" + BASE.replace('"name": "k"', '"name": "k\ud800"') + "]",  # a lone surrogate in the str itself
    "[" + BASE.replace('"cat": "kernel"', '"cat": "ac2g"').replace('"name": "k"', '"name": "\\udc00"') + "]",
    "[" + BASE.replace('"cat": "kernel"', '"cat": "ac2g"').replace('"name": "k"', '"name": "\\ue83d\\ude00"') + "]",
], ids=lambda t: t[:90])
def test_left_to_the_python_paths(text):
    assert fast.decode(text) is None
    _same(text)


@needs_compiled
def test_taken_cases_by_hand():
    text = "[" + BASE + "," + BASE.replace('"device": 0', '"x": {"y": [1, {"z": null}]}') + "]"
    cols = fast.decode(text)
    g = cols["kernel"]
    assert np.frombuffer(g["ts"], np.float64).tolist() == [10.5, 10.5]
    assert np.frombuffer(g["device"], np.int64).tolist() == [0, 0]  # the second from its pid
    assert np.frombuffer(g["gy"], np.int64).tolist() == [2, 2] and g["names"] == ["k"]
    _same(text)


@needs_compiled
def test_names_and_ids_at_every_word_boundary():
    """The decoder scans strings and hashes names eight bytes at a time, and reads ids of up to 18
    digits without overflow checks: names of every length up to 40 with an escape, a character
    beyond ASCII or a control character at every position, names differing only in their last
    byte, and ids either side of int64's limits read as the typed path reads them."""
    def event(name: str, corr: str = "5") -> str:
        return BASE.replace('"name": "k"', f'"name": "{name}"').replace('"correlation": 5', f'"correlation": {corr}')

    for ins in ('\\"', "\\\\", "\\n", "\\u00e9", "\u00e9", "\x01"):
        batch = []
        for n in range(41):
            for i in range(n + 1):
                batch.append(event("k" * i + ins + "k" * (n - i)))
        text = "[" + ",".join(batch) + "]"
        assert (fast.decode(text) is None) == (ins == "\x01")  # (a control character: the typed path says what)
        _same(text)
    # long names alike but for their last bytes: distinct names, however the hash spreads them
    similar = [event("n" * n + tail) for n in (7, 8, 9, 15, 16, 17, 64) for tail in ("a", "b", "ab", "ba", "")]
    text = "[" + ",".join(similar + similar[::-1]) + "]"
    assert len(fast.decode(text)["kernel"]["names"]) == len(similar)
    _same(text)
    for corr in ("0", "-0", "-5", "99999999999999999", "999999999999999999", "-999999999999999999",
                 "9223372036854775807", "-9223372036854775808", "9223372036854775808", "-9223372036854775809",
                 "12345678901234567890", "-1e3", "1.0"):
        text = "[" + event("k", corr) + "]"
        taken = fast.decode(text) is not None
        assert taken == (corr.lstrip("-").isdigit() and -(2 ** 63) <= int(corr) < 2 ** 63), corr
        _same(text)


@needs_compiled
def test_every_cut_and_random_corruption():
    rnd = random.Random(5)
    events = [BASE, BASE.replace('"kernel"', '"cpu_op"').replace('"device": 0', '"Input Dims": [[2, 3], []]'),
              '{"ph": "f", "id": 1, "pid": 0, "tid": 1, "ts": 1, "cat": "ac2g", "name": "x\\u00e9\\ud83d\\ude00", "bp": "e"}',
              BASE.replace('"kernel"', '"python_function"').replace('"name": "k"', '"name": "step(a.py:3)"')]
    text = "[" + ",\n".join(events) + "]"
    assert fast.decode(text) is not None
    for cut in range(len(text) + 1):
        fast.decode(text[:cut])  # never a crash, whatever it returns
    alphabet = '{}[]":,\\ 0123456789.e-+EXnulltrfaud\x00\x1f\u00e9'
    for _ in range(3000):
        chars = list(text)
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randrange(len(chars))
            op = rnd.random()
            if op < 0.4:
                chars[i] = rnd.choice(alphabet)
            elif op < 0.7:
                del chars[i]
            else:
                chars.insert(i, rnd.choice(alphabet))
        mutated = "".join(chars)
        if fast.decode(mutated) is not None:  # taken: then it must be what the typed path reads
            _same(mutated)
        _same_body(mutated[1:-1])
    for cut in range(1, len(text) - 1):
        _same_body(text[1:cut])


def test_non_text_is_refused():
    if fast is None:
        pytest.skip("the compiled decoder is not built")
    with pytest.raises(TypeError):
        fast.decode(b"[]")  # (bytes: an array's body only, with its start and stop)
    assert fast.decode(b" [] ", 1, 3) is None and fast.decode(b"x  y", 1, 3) == {}
    assert fast.decode(b"[\xc3\xa9]", 1, 3) is None  # (not ASCII)
    assert fast.decode("[]") == {} and fast.decode(" [ ] ") == {}
    assert fast.decode("x  y", 1, 3) == {} and fast.decode("[\u00e9]", 1, 1) is None  # (not ASCII)
    for start, stop in ((-1, 2), (3, 2), (0, 5)):
        with pytest.raises(ValueError):
            fast.decode("[  ]", start, stop)
    with pytest.raises(TypeError):
        fast.decode("[]", 1)


def test_turned_off_by_the_environment():
    import subprocess
    import sys

    code = "from collectors.readers import _kineto_events as ke; print(ke._kineto_fast is None, ke.Collector().compiled)"
    for value, off in (("0", True), ("1", fast is None)):
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "ROOFTOP_COMPILED": value})
        assert p.stdout.split() == [str(off), str(not off)], p.stderr
