"""Kineto importer against the real HTA traces, checked by an independent plain-`json` reader."""
from __future__ import annotations

import gzip
import json
import re
import zlib
from collections import Counter
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import collectors.readers._kineto_events as events
from collectors.readers._kineto_exact import ExactBatch
from collectors.readers import kineto
from collectors.readers.importers import write_ranks
from collectors.readers.kineto import KinetoError, read_kineto
from rooftop.trace.redact import REDACTED
from rooftop.trace import load_trace, to_table

PREFIX = "facebookresearch__HolisticTraceAnalysis__tests__data__"
FILES = ["nccl_parser_config__nccl_data.json.gz", "trace_filter__sampled_rank-0.json.gz",
         "trace_filter__sampled_rank-1.json.gz", "triton_example__triton_example.json.gz"]
KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}


@pytest.fixture
def typed_on(monkeypatch):
    """msgspec's typed path on, even in the run with every speedup off (.ci/run): the tests that
    use it compare that path with the exact one."""
    from collectors.readers import _kineto_events

    monkeypatch.setenv("ROOFTOP_MSGSPEC", "1")
    if _kineto_events.msgspec is None:  # (turned off by an earlier read in this process: looked up again)
        monkeypatch.setattr(_kineto_events, "msgspec", ...)


def _ns(v) -> int:
    return int(Decimal(str(v)) * 1000)


def _plain(path: Path) -> dict:
    with gzip.open(path, "rt") as fh:
        return json.load(fh, parse_float=Decimal)  # exact decimals, never a double


@pytest.fixture(params=FILES, ids=lambda f: f.split("__")[-1])
def fixture(request, fixtures_dir):
    return fixtures_dir / "traces" / (PREFIX + request.param)


def test_counts_durations_and_args_match_plain_reader(fixture):
    doc = _plain(fixture)
    x = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    rows, meta = read_kineto(fixture)
    for cat, kind in KINDS.items():
        want = [e for e in x if e.get("cat") == cat]
        got = rows[rows["kind"] == kind]
        assert len(got) == len(want), kind
        assert int(got["dur_ns"].sum()) == sum(_ns(e["dur"]) for e in want), kind
    kern = [e for e in x if e["cat"] == "kernel"]
    got = rows[rows["kind"] == "kernel"]
    # start offsets between kernels are exact (decimal µs -> int ns)
    t0 = min(_ns(e["ts"]) for e in kern)
    want_args = sorted((_ns(e["ts"]) - t0, e["args"]["correlation"], tuple(e["args"]["grid"]),
                        tuple(e["args"]["block"]), e["args"]["registers per thread"], e["args"]["shared memory"])
                       for e in kern)
    s0 = int(got["start_ns"].min())
    got_args = sorted((int(r.start_ns) - s0, int(r.correlation), tuple(r.grid), tuple(r.block), int(r.registers),
                       int(r.shared_mem)) for r in got.itertuples())
    assert got_args == want_args
    # device name from deviceProperties, for the device the kernels ran on
    devs = Counter(e["args"]["device"] for e in kern).most_common(1)[0][0]
    props = {p["id"]: p["name"] for p in doc.get("deviceProperties", [])}
    assert meta["device"]["name"] == props.get(devs)
    assert meta["device"]["index"] == devs
    assert meta["rank"] == doc.get("distributedInfo", {}).get("rank")
    assert (rows[rows["kind"] == "range"]["name"].tolist() ==
            [e["name"] for e in sorted((e for e in x if e["cat"] == "user_annotation"), key=lambda e: _ns(e["ts"]))])


def _spans(events) -> dict:
    """(pid, tid) -> [(start_ns, end_ns, name)], sorted outermost first."""
    out: dict = {}
    for a in events:
        t = _ns(a["ts"])
        out.setdefault((a["pid"], a["tid"]), []).append((t, t + _ns(a["dur"]), a["name"]))
    return {k: sorted(v, key=lambda s: (s[0], -s[1])) for k, v in out.items()}


def _around(spans, key, t):
    """Names of the spans on `key` containing t, outermost first."""
    return "/".join(n for s, e, n in spans.get(key, ()) if s <= t < e) or None


def _text(v):
    """A text cell of the reader's rows (categorical columns: missing reads as NaN) -> str or None."""
    return None if pd.isna(v) else v


def test_paths_and_ops_match_plain_join(fixture):
    """kernel -> runtime (correlation) -> cpu_op (External id, else the innermost cpu_op around the
    launch on its thread); path = user_annotations around the launch, else gpu_user_annotations."""
    doc = _plain(fixture)
    x = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    rt = {e["args"]["correlation"]: e for e in x if e["cat"] in ("cuda_runtime", "cuda_driver")}
    cpu_ops = [e for e in x if e["cat"] == "cpu_op"]
    ops = {e["args"]["External id"]: e["name"] for e in cpu_ops}
    cpu_ops = _spans(cpu_ops)
    ann = _spans(e for e in x if e["cat"] == "user_annotation")
    gann = _spans(e for e in x if e["cat"] == "gpu_user_annotation")
    rows, _ = read_kineto(fixture)
    got = rows[rows["kind"] == "kernel"].set_index("correlation")
    by_source = Counter()
    for k in (e for e in x if e["cat"] == "kernel"):
        r = rt[k["args"]["correlation"]]
        op = ops.get(r["args"].get("External id"))
        if op is None:
            inner = _around(cpu_ops, (r["pid"], r["tid"]), _ns(r["ts"]))
            op = inner.split("/")[-1] if inner else None
        row = got.loc[k["args"]["correlation"]]
        assert _text(row["op"]) == op
        path = _around(ann, (r["pid"], r["tid"]), _ns(r["ts"]))
        by_source["cpu" if path else "gpu"] += 1
        path = path or _around(gann, (k["pid"], k["tid"]), _ns(k["ts"]))
        assert _text(row["path"]) == path
    if "nccl" in fixture.name:
        assert by_source == {"cpu": 939, "gpu": 1761}
        assert int((rows["path"] == "nccl:all_reduce").sum()) == 30


def test_timestamps_origin_and_steps(fixtures_dir):
    path = fixtures_dir / "traces" / (PREFIX + FILES[0])
    doc = _plain(path)
    rows, meta = read_kineto(path)
    firsts = [_ns(e["ts"]) for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in
              ("kernel", "gpu_memcpy", "gpu_memset", "cpu_op", "cuda_runtime", "cuda_driver", "user_annotation",
               "gpu_user_annotation")]
    assert meta["origin_ns"] == doc["baseTimeNanoseconds"] + min(firsts)
    assert [s["index"] for s in meta["steps"]] == [4, 5, 6]
    table = to_table(rows)
    steps = table.column("step").to_pylist()
    assert {s for s, k in zip(steps, table.column("kind").to_pylist()) if k == "kernel"} >= {4, 5, 6}


def _write(path: Path, doc: dict, gz: bool = False) -> Path:
    data = json.dumps(doc, indent=1).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def _synthetic() -> dict:
    """A vLLM-style step: an mm launched inside annotations, a second kernel without External id on
    the runtime call (found by containment), a copy, and a kernel only under a GPU annotation."""
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "execute_context_1(128)_generation_0(0)", "pid": 1, "tid": 1,
         "ts": 1000.000, "dur": 100.0},
        {"ph": "X", "cat": "user_annotation", "name": "layer=0", "pid": 1, "tid": 1, "ts": 1001.5, "dur": 50.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1002.0, "dur": 10.0,
         "args": {"External id": 7, "Input Dims": [[128, 256], [256, 512]], "Input type": ["c10::BFloat16"] * 2}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1003.0,
         "dur": 2.0, "args": {"correlation": 11, "External id": 7}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1006.0,
         "dur": 2.0, "args": {"correlation": 12}},
        {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16", "pid": 0, "tid": 7, "ts": 1234567.891,
         "dur": 3.0, "args": {"device": 0, "stream": 7, "correlation": 11, "grid": [4, 2, 1], "block": [128, 1, 1],
                              "registers per thread": 168, "shared memory": 1024}},
        {"ph": "X", "cat": "kernel", "name": "splitk_reduce", "pid": 0, "tid": 7, "ts": 1234571.0, "dur": 1.0,
         "args": {"device": 0, "stream": 7, "correlation": 12, "grid": [1, 1, 1], "block": [32, 1, 1]}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "pid": 0, "tid": 7, "ts": 1234580.5, "dur": 0.25,
         "args": {"device": 0, "stream": 7, "correlation": 99, "bytes": 4096}},
        {"ph": "X", "cat": "gpu_user_annotation", "name": "graph_replay", "pid": 0, "tid": 7, "ts": 1234580.0,
         "dur": 5.0},
        {"ph": "X", "cat": "python_function", "name": "ignored", "pid": 1, "tid": 1, "ts": 999.0, "dur": 1.0},
    ]
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9,
                                                       "computeMinor": 0, "numSms": 132}],
            "traceEvents": ev, "baseTimeNanoseconds": 1700000000000000000}


def test_synthetic_exact_joins_and_cost_split(tmp_path):
    rows, meta = read_kineto(_write(tmp_path / "t.json", _synthetic()))
    k = rows[rows["kind"] == "kernel"].set_index("name")
    # 1234567.891 µs -> ...891 ns exactly; origin is the first kept event (ts 1000 µs)
    assert int(k.loc["sm90_xmma_gemm_bf16", "start_ns"]) == 1234567891 - 1000000
    assert meta["origin_ns"] == 1700000000000000000 + 1000000
    assert k.loc["sm90_xmma_gemm_bf16", "path"] == "execute_context_1(128)_generation_0(0)/layer=0"
    assert k.loc["splitk_reduce", "op"] == "aten::mm"  # runtime without External id: by containment
    flops = 2 * 128 * 256 * 512
    assert k["model_flops"].sum() == pytest.approx(flops)
    assert k.loc["sm90_xmma_gemm_bf16", "model_flops"] == pytest.approx(flops * 3 / 4)
    assert k.loc["sm90_xmma_gemm_bf16", "model_bytes"] == pytest.approx((128 * 256 + 256 * 512 + 128 * 512) * 2 * 3 / 4)
    copy = rows[rows["kind"] == "memcpy"].iloc[0]
    # a device-to-device copy of N bytes reads N and writes N bytes of HBM
    assert copy["path"] == "graph_replay" and copy["model_bytes"] == 2 * 4096 and int(copy["dur_ns"]) == 250
    t = to_table(rows).to_pandas()
    kern = t[t["kind"] == "kernel"]
    assert set(kern["phase"]) == {"prefill"} and set(kern["layer"]) == {0}
    assert meta["device"] == {"index": 0, "name": "NVIDIA H100 80GB HBM3", "cc": "9.0", "sms": 132,
                              "memory_bytes": None}
    ranges = rows[rows["kind"] == "range"]
    assert ranges["path"].tolist() == ["execute_context_1(128)_generation_0(0)",
                                       "execute_context_1(128)_generation_0(0)/layer=0"]



def test_rows_stored_in_the_order_a_load_splits_them(tmp_path, fixtures_dir):
    """An import's rows: the GPU rows, then the other events, then the runtime calls, each part in
    time order (a load then cuts slices, `split_runtime`); loaded, the events and host rows are
    those of the same rows stored in time order."""
    from rooftop.trace import write_trace

    for src in (_write(tmp_path / "t.json", _synthetic()), fixtures_dir / "traces" / (PREFIX + FILES[0])):
        rows, meta = read_kineto(src)
        kind = rows["kind"].astype(str)
        part = np.select([kind.isin(["kernel", "memcpy", "memset"]), kind == "runtime"], [0, 2], 1)
        assert (np.diff(part) >= 0).all() and len(set(part)) == 3
        for p in range(3):
            assert (np.diff(rows["start_ns"].to_numpy()[part == p]) >= 0).all()
        stored = load_trace(write_trace(tmp_path / "stored.parquet", rows, meta))
        order = np.argsort(rows["start_ns"].to_numpy(), kind="stable")
        assert (order != np.arange(len(rows))).any()  # another order indeed
        by_time = rows.iloc[order]
        timed = load_trace(write_trace(tmp_path / "timed.parquet", by_time, meta))
        a, b = (t.events.sort_values("id").drop(columns=["grid", "block"]).reset_index(drop=True)
                for t in (stored, timed))
        assert a.equals(b) and stored.host.equals(timed.host)  # (the runtime calls: in time order either way)

def test_tiny_chunks_give_same_rows(tmp_path, fixtures_dir, monkeypatch):
    path = fixtures_dir / "traces" / (PREFIX + FILES[1])
    full, _ = read_kineto(path)
    monkeypatch.setattr(kineto, "CHUNK", 997)  # odd size: boundaries inside tokens and UTF-8 sequences
    seen = []
    small, _ = read_kineto(path, progress=lambda d, t: seen.append((d, t)))
    assert full.equals(small)
    assert seen[-1][0] == seen[-1][1] == path.stat().st_size and len(seen) > 10


def test_compact_and_pretty_and_plain_json_agree(tmp_path):
    doc = _synthetic()
    a, _ = read_kineto(_write(tmp_path / "a.json", doc))
    (tmp_path / "b.json").write_text(json.dumps(doc, separators=(",", ":")))
    b, _ = read_kineto(tmp_path / "b.json")
    c, _ = read_kineto(_write(tmp_path / "c.pt.trace.json.gz", doc, gz=True))
    assert a.equals(b) and a.equals(c)


@pytest.fixture(scope="module")
def nccl_text(fixtures_dir):
    text = gzip.open(fixtures_dir / "traces" / (PREFIX + FILES[0])).read()
    return text, gzip.compress(text, compresslevel=1)


@pytest.mark.parametrize("frac", [0.3, 0.55, 0.999])
def test_truncated_file_loads_prefix_with_warning(tmp_path, nccl_text, frac):
    text, packed = nccl_text
    cut = int(len(text) * frac)
    for gz in (False, True):
        p = tmp_path / f"cut{int(gz)}.json"
        p.write_bytes(packed[: int(len(packed) * frac)] if gz else text[:cut])
        rows, meta = read_kineto(p)
        assert any("truncated" in w for w in meta["warnings"])
        n = int((rows["kind"] == "kernel").sum())
        # what survives the cut, read independently (zlib keeps every byte it could inflate)
        prefix = zlib.decompressobj(31).decompress(p.read_bytes()) if gz else text[:cut]
        # every kernel event that is complete before the cut is kept, at most one is lost mid-event
        assert prefix.count(b'"cat": "kernel"') - 1 <= n <= prefix.count(b'"cat": "kernel"')


def test_cut_inside_header_is_an_error(tmp_path, nccl_text):
    p = tmp_path / "head.json"
    p.write_bytes(nccl_text[0][:3000])  # inside deviceProperties: no event at all
    with pytest.raises(KinetoError, match="not a readable Kineto trace"):
        read_kineto(p)


@pytest.mark.parametrize("content", [b"", b"garbage\x00\xff", b"{}", b"[1, 2, 3]", b'{"traceEvents": 5}',
                                     b'{"schemaVersion": 1, "devicePro', gzip.compress(b"not json")[:10]])
def test_garbage_is_one_line_kineto_error(tmp_path, content):
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    with pytest.raises(KinetoError) as info:
        read_kineto(p)
    assert "\n" not in str(info.value) and str(p) in str(info.value)


def test_secrets_in_names_and_meta_are_redacted(tmp_path):
    doc = _synthetic()
    token = "hf_" + "Q" * 34
    doc["traceEvents"][1]["name"] = f"--token {token}"
    doc["cupti_version"] = f"HF_TOKEN={token}"
    rows, meta = read_kineto(_write(tmp_path / "s.json", doc))
    assert token not in repr(meta) and token not in "".join(rows["path"].dropna())
    assert REDACTED in "".join(rows["path"].dropna())


def test_import_dir_writes_one_file_per_rank(tmp_path, fixtures_dir):
    src = tmp_path / "ranks"
    src.mkdir()
    for name in FILES[1:3]:
        (src / name.split("__")[-1]).write_bytes((fixtures_dir / "traces" / (PREFIX + name)).read_bytes())
    written, _ = write_ranks(src, tmp_path / "out", None)
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in written) == \
        ["rank=0/trace.parquet", "rank=1/trace.parquet"]
    trace = load_trace(tmp_path / "out")
    assert trace.ranks == [0, 1]
    assert int((trace.events["kind"] == "kernel").sum()) == 1154 + 1104


# --- the typed fast path (msgspec) against the exact path, and its exactness ------------------------
# (the compiled decoder, ahead of both, is off here: tests/test_kineto_compiled.py checks it against
# the typed path)


def _exact_only(monkeypatch):
    monkeypatch.setattr(events, "msgspec", None)  # Collector() then takes the stdlib exact path only
    monkeypatch.setattr(events, "_kineto_fast", None)


def _count_exact(monkeypatch) -> list:
    """Sizes of the batches that go through the per-event exact path, from now on (read typed)."""
    monkeypatch.setattr(events, "_kineto_fast", None)
    slow: list = []
    real = ExactBatch.add
    monkeypatch.setattr(ExactBatch, "add", lambda self, evs: (slow.append(len(evs)), real(self, evs))[1])
    return slow


@pytest.mark.usefixtures("typed_on")
def test_fast_path_handles_the_fixtures_and_agrees_with_exact_path(fixture, monkeypatch):
    pytest.importorskip("msgspec")
    slow = _count_exact(monkeypatch)
    fast, fmeta = read_kineto(fixture)
    # only the odd event at a buffer boundary goes through the per-event path
    assert sum(slow) <= 2 * len(slow) and len(slow) <= 3
    _exact_only(monkeypatch)
    exact, emeta = read_kineto(fixture)
    assert fast.equals(exact) and fmeta == emeta


def test_doubles_give_exact_ns_for_every_fixture_timestamp(fixtures_dir):
    """msgspec parses `ts`/`dur` as doubles; every value in the fixtures must come back exact."""
    msgspec = pytest.importorskip("msgspec")
    for name in FILES:
        evs = _plain(fixtures_dir / "traces" / (PREFIX + name))["traceEvents"]
        vals = [e[k] for e in evs for k in ("ts", "dur") if isinstance(e.get(k), (int, Decimal))]
        doubles = msgspec.json.decode("[" + ",".join(str(v) for v in vals) + "]", type=list[float])
        got = events.exact_ns(np.array(doubles))
        assert got is not None and got.tolist() == [_ns(v) for v in vals], name


def test_exact_ns_on_random_decimals_and_refuses_what_a_double_cannot_hold():
    msgspec = pytest.importorskip("msgspec")
    rng = np.random.default_rng(7)
    ns = rng.integers(0, 2 ** 43 * 1000 - 1, 200_000)  # every µs value below 2**43 with 3 decimals
    text = [f"{v // 1000}.{v % 1000:03d}" for v in ns.tolist()]
    doubles = msgspec.json.decode("[" + ",".join(text) + "]", type=list[float])
    assert events.exact_ns(np.array(doubles)).tolist() == ns.tolist()
    assert events.exact_ns(np.array([1669783687389324.0])).tolist() == [1669783687389324000]  # epoch µs
    assert events.exact_ns(np.array([1712195495505772.8])) is None  # fractional epoch µs: exact path
    assert events.exact_ns(np.array([float("nan")])).tolist() == [events.NULL]


def _odd_types() -> dict:
    """What the typed decoder rejects or must not trust: fractional epoch µs, ids as strings,
    string pids, a Triton cpu_op with a text "grid", a kernel grid of two numbers."""
    ev = [
        {"ph": "X", "cat": "cpu_op", "name": "triton_op", "pid": "host", "tid": 3, "ts": "@1712195495505772.8",
         "dur": 20, "args": {"External id": "7", "grid": "(1, 1, 1)", "Input Dims": None}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": "host", "tid": 3,
         "ts": "@1712195495505773.123", "dur": 1, "args": {"correlation": 11, "External id": 7}},
        {"ph": "X", "cat": "kernel", "name": "k1", "pid": 0, "tid": 7, "ts": "@1712195495505780.001", "dur": 2.5,
         "args": {"device": 0, "stream": 7, "correlation": 11, "grid": [4, 2], "block": [128, 1, 1]}},
        {"ph": "i", "cat": ["not", "a", "string"], "name": "marker", "pid": 1, "tid": 1, "ts": 1},
    ]
    return {"traceEvents": ev}


@pytest.mark.parametrize("compact", [False, True])
def test_unexpected_types_take_the_exact_path(tmp_path, monkeypatch, compact):
    doc = _odd_types()
    p = tmp_path / "odd.json"
    text = json.dumps(doc, separators=(",", ":")) if compact else json.dumps(doc, indent=1)
    p.write_text(re.sub(r'"@([0-9.]+)"', r"\1", text))  # numbers a Python float cannot hold, as text
    rows, meta = read_kineto(p)
    k = rows[rows["kind"] == "kernel"].iloc[0]
    # ns relative to the first event, from the decimal text: .8 µs -> 800 ns, never a double's .75
    assert int(k["start_ns"]) == 1712195495505780001 - 1712195495505772800
    assert int(k["dur_ns"]) == 2500 and k["grid"] is pd.NA and list(k["block"]) == [128, 1, 1]
    assert k["op"] == "triton_op" and meta["origin_ns"] == 1712195495505772800
    _exact_only(monkeypatch)
    again, _ = read_kineto(p)
    assert rows.equals(again)


@pytest.mark.usefixtures("typed_on")
def test_odd_launch_shapes_on_the_typed_path_read_as_on_the_exact_path(tmp_path, monkeypatch):
    """Every odd launch shape (two numbers, text, a fraction, a huge number, null, a nested list,
    none) reads on the typed path as on the per-event exact path: a fraction was unknown on the
    typed path when its batch held a shape NumPy refuses, and truncated otherwise."""
    pytest.importorskip("msgspec")
    shapes = [[4, 2], "(1, 1, 1)", [1.5, 1, 1], [2 ** 40, 1, 1], None, [[1], 2, 3], [8, 1, 1], [8, 1, 1], "absent"]
    ev = []
    for i, g in enumerate(shapes * 2):
        args = {"device": 0, "stream": 7, "correlation": 100 + i, "block": [128, 1, 1] if i % 2 else [64, 2, 1]}
        if g != "absent":
            args["grid"] = g
        ev.append({"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 1000 + 10 * i, "dur": 5,
                   "args": args})
    p = _write(tmp_path / "shapes.json", {"traceEvents": ev})
    slow = _count_exact(monkeypatch)
    fast, _ = read_kineto(p)
    assert sum(slow) <= 1  # typed, but for the odd event at the end of the read
    _exact_only(monkeypatch)
    exact, _ = read_kineto(p)
    assert fast.equals(exact)
    grids = [None if g is pd.NA or g is None else list(g) for g in fast.sort_values("start_ns")["grid"]]
    assert grids[6:8] == [[8, 1, 1], [8, 1, 1]] and grids[0] is None and grids == grids[9:] * 2


@pytest.mark.usefixtures("typed_on")
def test_phases_the_typed_decode_does_not_know_read_as_on_the_exact_path(tmp_path, monkeypatch):
    """The typed decode knows a complete event ("X", its phase anywhere in the object) and skips the
    fields of the format's other phases; an unknown phase, a null one or none makes its batch go
    the exact path, which reads the same rows."""
    pytest.importorskip("msgspec")
    base = _synthetic()["traceEvents"]
    odd = [{"ph": "Q", "cat": "kernel", "name": "weird", "pid": 0, "tid": 7, "ts": 5, "dur": 1},
           {"cat": "kernel", "name": "no phase", "pid": 0, "tid": 7, "ts": 6, "dur": 1},
           {"ph": None, "cat": "kernel", "name": "null phase", "pid": 0, "tid": 7, "ts": 7, "dur": 1}]
    last = [{**{k: v for k, v in e.items() if k != "ph"}, "ph": e["ph"]} for e in base]  # the phase last
    flows = [{"ph": p, "id": i, "pid": 0, "tid": 7, "ts": 10 + i, "cat": "ac2g", "name": "ac2g", "bp": "e"}
             for i, p in enumerate("sfsf")] + [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "x"}}]
    for doc, typed in (({"traceEvents": last + flows}, True), ({"traceEvents": base + odd}, False)):
        p = _write(tmp_path / "phases.json", doc)
        slow = _count_exact(monkeypatch)
        fast, fmeta = read_kineto(p)
        assert (sum(slow) <= 1) if typed else sum(slow) >= len(base)  # the whole batch when a phase is odd
        monkeypatch.undo()
        _exact_only(monkeypatch)
        exact, emeta = read_kineto(p)
        monkeypatch.undo()
        assert fast.equals(exact) and fmeta == emeta
        plain, _ = read_kineto(_write(tmp_path / "base.json", {"traceEvents": base}))
        assert "weird" not in set(fast["name"]) and len(fast) == len(plain)


@pytest.mark.usefixtures("typed_on")
def test_many_batches_and_gzip_agree_with_one_batch(tmp_path, monkeypatch):
    """A replicated synthetic trace read in ~100 typed batches equals the exact path's result."""
    doc = _synthetic()
    base = doc["traceEvents"]
    evs = []
    for i in range(300):
        for e in base:
            e = json.loads(json.dumps(e))
            e["ts"] = round(e["ts"] + i * 1000, 3)
            if e["name"] == "splitk_reduce":  # non-ASCII text split across chunk boundaries
                e["name"] = f"splitk_reduce<Ŧ{i}→名>"
            for key in ("External id", "correlation"):
                if key in e.get("args", {}):
                    e["args"][key] += 1000 * i
            evs.append(e)
    doc["traceEvents"] = evs
    p = _write(tmp_path / "many.json.gz", doc, gz=True)
    monkeypatch.setattr(kineto, "CHUNK", 20_000)
    slow = _count_exact(monkeypatch)
    fast, _ = read_kineto(p)
    assert len(slow) <= 2 and sum(slow) <= 2  # all but the last event or so decoded in typed batches
    kernels = fast[fast["kind"] == "kernel"]
    assert len(kernels) == 600 and kernels["op"].notna().sum() == 600
    assert "splitk_reduce<Ŧ299→名>" in set(fast["name"])
    _exact_only(monkeypatch)
    exact, _ = read_kineto(p)
    assert fast.equals(exact)


def test_cpu_only_trace_gives_outermost_op_rows(tmp_path):
    """A CPU-only profile (no GPU activity): one `op` row per cpu_op no other op of its thread
    encloses, with the ranges around it, its step and its cost from the recorded shapes."""
    def x(cat, name, ts, dur, tid=1, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}
    ev = [x("user_annotation", "decode", 0.0, 100.0), x("user_annotation", "step=2", 1.0, 50.0),
          x("cpu_op", "aten::linear", 2.0, 20.0, **{"External id": 1, "Input Dims": [[2, 3], [4, 3], []],
                                                    "Input type": ["float", "float", ""]}),
          x("cpu_op", "aten::t", 2.0, 1.0, **{"External id": 2}),          # same start, inside linear
          x("cpu_op", "aten::addmm", 4.0, 10.0, **{"External id": 3}),     # inside linear
          x("cpu_op", "aten::mul", 30.0, 5.0, **{"External id": 4}),
          x("cpu_op", "aten::add", 3.0, 2.0, tid=2, **{"External id": 5}),  # another thread: its own outermost
          x("cpu_op", "aten::cat", 60.0, 1.0, **{"External id": 6})]        # after the step
    rows, meta = read_kineto(_write(tmp_path / "cpu.json", {"traceEvents": ev}))
    ops = rows[rows["kind"] == "op"].set_index("name")
    assert sorted(ops.index) == ["aten::add", "aten::cat", "aten::linear", "aten::mul"]
    assert ops.loc["aten::linear", "path"] == "decode/step=2" and ops.loc["aten::linear", "model_flops"] == 2 * 2 * 4 * 3
    assert ops.loc["aten::linear", "op"] == "aten::linear" and int(ops.loc["aten::linear", "dur_ns"]) == 20000
    assert pd.isna(ops.loc["aten::add", "path"]) and ops.loc["aten::cat", "path"] == "decode"
    t = to_table(rows).to_pandas().set_index("name")
    assert t.loc["aten::linear", ["phase", "step"]].tolist() == ["decode", 2]
    assert t.loc["aten::cat", "phase"] == "decode" and pd.isna(t.loc["aten::cat", "step"])
    assert [(s["phase"], s["index"]) for s in meta["steps"]] == [("decode", 2)]


def test_an_import_names_its_stages_after_the_read(tmp_path, monkeypatch):
    """`rooftop import` says which stage it is in once the file is read (the join, deriving names
    and steps, the summary and the write: about half of a large import), each once, in order, after
    the bytes, on one line; a progress callable without `stage` hears only bytes."""
    import io

    from collectors.readers import importers, progress

    src = _write(tmp_path / "step.json", _synthetic())
    lines = []

    class Line(progress.ProgressLine):
        def __init__(self, label, size=0):
            super().__init__(label, stream=io.StringIO(), min_bytes=0, size=size)
            lines.append(self)

    monkeypatch.setattr(importers, "_ProgressLine", Line)
    args = type("Args", (), {"src": str(src), "output": str(tmp_path / "out.parquet")})()
    assert importers.run(args) == 0
    drawn = lines[0].stream.getvalue()
    size = src.stat().st_size >> 20
    stages = [progress.JOINING, progress.DERIVING, progress.SUMMARIZING]
    shown = [part.rstrip() for part in drawn.split("\r")[1:]]
    assert shown[-3:] == [f"importing step.json: {size} MB read · {s}" for s in stages]
    assert all(" · " not in part for part in shown[:-3]) and drawn.endswith("\n")
    # a shorter line is padded over a longer one (the terminal keeps what `\r` does not overwrite)
    assert len(drawn.split("\r")[-1].rstrip("\n")) == max(map(len, shown))
    heard = []  # a plain callable: bytes only, as before
    read_kineto(src, progress=lambda d, t: heard.append((d, t)))
    assert heard and all(len(h) == 2 for h in heard)


@pytest.mark.usefixtures("typed_on")
def test_untimed_counted_once_when_a_batch_falls_to_the_exact_path(monkeypatch):
    """A typed batch with untimed events in some categories and a timestamp a double cannot hold in
    the last one it converts is read again on the exact path: its untimed events count once."""
    monkeypatch.setattr(events, "_kineto_fast", None)
    cats = list(events.WANTED)  # (the order the typed path converts them in)
    evs = [{"ph": "X", "cat": c, "name": "n", "pid": 0, "tid": 0, "ts": None, "dur": 1,
            "args": {"correlation": 1}} for c in cats[:-1]]
    evs.append({"ph": "X", "cat": cats[-1], "name": "n", "pid": 0, "tid": 0, "ts": 1712195495505772.8, "dur": 1,
                "args": {"correlation": 1}})
    c = events.Collector()
    assert c.typed
    c.add_text(json.dumps(evs))
    assert c.untimed == len(cats) - 1
