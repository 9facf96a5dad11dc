"""`rooftop export TRACE --perfetto OUT`: the Chrome trace event JSON Perfetto UI opens, read back
with an independent reader (the standard library's json, strict: no NaN) and checked against the
source: every GPU row a slice on its device's and stream's track, every range a slice, one slice
and one counter sample per known figure for each step of rooftop's step table."""
from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from rooftop.analysis import analyze
from rooftop_cli import main
from rooftop.present.perfetto import PHASES_TRACK, RANGES_TRACK, STEPS_TRACK, write_perfetto
from rooftop.trace import load_trace, write_trace

KINETO = "facebookresearch__HolisticTraceAnalysis__tests__data__trace_filter__sampled_rank-{}.json.gz"


def _reject_constant(name):
    raise ValueError(f"not JSON: {name}")


def read(path: Path) -> dict:
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw, parse_constant=_reject_constant)  # strict: NaN/Infinity are not JSON


class View:
    """The written trace as tracks: process and thread names, slices per (process, thread) name."""

    def __init__(self, doc: dict):
        ev = doc["traceEvents"]
        self.doc = doc
        self.procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
        self.threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
                        if e["ph"] == "M" and e["name"] == "thread_name"}
        self.slices = [e for e in ev if e["ph"] == "X"]
        self.counters = [e for e in ev if e["ph"] == "C"]
        for e in self.slices:  # every slice lies on a named thread of a named process
            assert e["pid"] in self.procs and (e["pid"], e["tid"]) in self.threads, e

    def track(self, e: dict) -> tuple[str, str]:
        return self.procs[e["pid"]], self.threads[(e["pid"], e["tid"])]

    def on(self, thread: str, process: str | None = None) -> list[dict]:
        return [e for e in self.slices if self.threads[(e["pid"], e["tid"])] == thread
                and (process is None or self.procs[e["pid"]] == process)]


def k(name, start, dur, path, device=0, stream=7, kind="kernel", **kw):
    return dict(kind=kind, name=name, start_ns=start, dur_ns=dur, path=path, device=device, stream=stream, **kw)


@pytest.fixture
def small(tmp_path):
    """Two devices, two streams, a copy, ranges, three steps (prefill 0, decode 0 and 1)."""
    rows = [
        k("prefill_gemm", 0, 1000, "prefill/step=0/layer=0/mlp", model_flops=4e6, model_bytes=1e6),
        k("gemv_a", 10_000, 100, "decode/step=0/layer=0/mlp", model_flops=1e4, model_bytes=1000),
        k('weird "name" \\ with\ttab and ünïcode', 10_150, 100, "decode/step=0/layer=0/mlp", model_flops=1e4,
          model_bytes=2000),
        k("gemv_b", 10_200, 100, "decode/step=0/layer=1/mlp", stream=8, model_flops=1e4, model_bytes=3000),
        k("Memcpy DtoD", 10_250, 40, "decode/step=0", kind="memcpy", device=1, stream=3),
        k("gemv_a", 20_000, 100, "decode/step=1/layer=0/mlp", counters=True, dram_read=500.0, dram_write=500.0,
          flops=100.0),
        dict(kind="range", name="decode", start_ns=9_000, dur_ns=12_000, path="decode"),
        dict(kind="range", name="step=0", start_ns=9_500, dur_ns=1_000, path="decode/step=0"),
    ]
    steps = [{"phase": "prefill", "index": 0, "batch": 1, "new_tokens": 16, "context": 16},
             {"phase": "decode", "index": 0, "batch": 1, "new_tokens": 1, "context": 16},
             {"phase": "decode", "index": 1, "batch": 1, "new_tokens": 1, "context": 17}]
    meta = {"device": {"name": "NVIDIA H100 80GB HBM3"}, "workload": {"batch": 1, "dtype": "bf16"}, "steps": steps}
    return load_trace(write_trace(tmp_path / "small.parquet", rows, meta))


def test_every_gpu_row_is_a_slice_on_its_device_and_stream(small, tmp_path):
    a = analyze(small)
    view = View(read(write_perfetto(a, tmp_path / "out.json")))
    ev = small.events
    gpu = ev[ev["kind"].isin(["kernel", "memcpy", "memset"])]
    got = sorted((e["name"], round(e["ts"] * 1000), round(e["dur"] * 1000), view.track(e)[1], e["cat"])
                 for e in view.slices if e["cat"] in ("kernel", "memcpy", "memset"))
    want = sorted((r.name, r.start_ns, r.dur_ns, f"GPU {r.device} · stream {r.stream}", r.kind)
                  for r in gpu.itertuples())
    assert got == want and len(got) == 6
    assert {view.track(e)[0] for e in view.slices} == {"small.parquet"}  # one process: one trace
    # the row's identity and what rooftop derived from its path travel in args
    first = next(e for e in view.slices if e["name"] == "gemv_b")
    assert first["args"]["step"] == 0 and first["args"]["layer"] == 1 and first["args"]["phase"] == "decode"
    assert first["args"]["id"] in set(gpu["id"])


def test_ranges_steps_phases_and_counters_equal_the_analysis(small, tmp_path):
    a = analyze(small)
    view = View(read(write_perfetto(a, tmp_path / "out.json.gz")))
    ranges = view.on(RANGES_TRACK)
    assert sorted((e["name"], e["ts"], e["dur"]) for e in ranges) == [("decode", 9.0, 12.0), ("step=0", 9.5, 1.0)]
    # one steps track per device (a step's rows on each GPU are that device's step, issue 34)
    steps = [e for e in view.slices if view.track(e)[1].startswith(STEPS_TRACK)]
    table = a.steps
    assert len(steps) == len(table) == 4 and set(table["device"]) == {0, 1}
    for row in table.itertuples():
        s = next(e for e in steps if e["args"]["phase"] == row.phase and e["args"]["step"] == row.step
                 and view.track(e)[1] == f"{STEPS_TRACK} · GPU {row.device}")
        assert s["ts"] * 1000 == row.start_ns and s["dur"] * 1000 == row.span_ns  # first start to last end
        assert (s["args"]["mbu"] is None if pd.isna(row.mbu) else s["args"]["mbu"] == pytest.approx(row.mbu))
        assert s["args"]["idle_ns"] == row.idle_ns
        assert s["args"]["bound"] == row.bound
        assert (f"{row.bound}-bound" in s["name"]) == (row.bound is not None)
    # one sample per step and known figure, at the step's start, equal to the table's (a counter per device)
    def samples(base):
        return sorted((c["ts"], c["args"]["value"]) for c in view.counters if c["name"].split(" · GPU")[0] == base)
    known = table[table["mbu"].notna()]
    assert samples("MBU %") == sorted(zip(known["start_ns"] / 1000, known["mbu"] * 100))
    assert samples("idle %") == pytest.approx(sorted(zip(table["start_ns"] / 1000, table["idle_frac"] * 100)))
    assert {c["name"].split(" · GPU")[0] for c in view.counters} >= {"MBU %", "idle %", "AI / ridge"}
    ratio = dict(samples("AI / ridge"))
    for row in table[table["ai"].notna()].itertuples():
        assert ratio[row.start_ns / 1000] == pytest.approx(row.ai / a.ridge)
        # one dtype (bf16) here: left of its ridge where the step's mix says memory, right where compute
        # (a step of sub-5 us kernels is latency-bound, whatever its AI)
        if row.bound in ("memory", "compute"):
            assert (ratio[row.start_ns / 1000] < 1) == (row.bound == "memory")
    # a phase slice per device: its first step's start to its last step's end
    phases = [e for e in view.slices if view.track(e)[1].startswith(PHASES_TRACK)]
    want = table.assign(end=table["start_ns"] + table["span_ns"]).groupby(["device", "phase"]).agg(
        start=("start_ns", "min"), end=("end", "max")).reset_index()
    assert sorted((e["name"], view.track(e)[1], e["ts"], e["dur"]) for e in phases) == pytest.approx(sorted(
        (r.phase, f"{PHASES_TRACK} · GPU {r.device}", r.start / 1000, (r.end - r.start) / 1000) for r in want.itertuples()))


def test_unknown_figures_write_no_counter_sample(tmp_path):
    rows = [k("mystery_kernel", 0, 100, "decode/step=0"), k("mystery_kernel", 1000, 100, "decode/step=1")]
    t = load_trace(write_trace(tmp_path / "t.parquet", rows, {"device": {"name": "NVIDIA H100 80GB HBM3"}}))
    a = analyze(t)
    assert a.steps["mbu"].isna().all()  # no bytes known: unknown, never 0
    view = View(read(write_perfetto(a, tmp_path / "out.json")))
    assert not [c for c in view.counters if c["name"] in ("MBU %", "MFU %")]
    assert all(s["args"]["mbu"] is None for s in view.on(STEPS_TRACK))


def test_kineto_fixture_counts_and_cpu_threads(fixtures_dir, tmp_path, capsys):
    src = fixtures_dir / "traces" / KINETO.format(0)
    out = tmp_path / "k.json"
    assert main(["export", str(src), "--perfetto", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    view = View(read(out))
    from collectors.open import open_trace
    t = open_trace(src)
    ev = t.events
    counts = Counter(e["cat"] for e in view.slices)
    for kind in ("kernel", "memcpy", "memset", "range"):
        assert counts[kind] == int((ev["kind"] == kind).sum()) > 0
    host = t.runtime_rows()
    assert counts["runtime"] == len(host)
    threads = {view.track(e)[1] for e in view.slices if e["cat"] == "runtime"}
    assert threads == {f"thread {th}" for th in host["thread"].dropna().unique()}
    streams = {view.track(e)[1] for e in view.slices if e["cat"] == "kernel"}
    assert streams == {f"GPU {d} · stream {s}" for d, s in ev[ev["kind"] == "kernel"][["device", "stream"]]
                       .drop_duplicates().itertuples(index=False)}
    assert len(view.on(STEPS_TRACK)) == len(analyze(t).steps) > 0
    assert any(c["name"] == "idle %" for c in view.counters)


def test_directory_of_ranks_is_one_process_per_rank(fixtures_dir, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for r in (0, 1):
        (run / f"rank-{r}.json.gz").symlink_to(fixtures_dir / "traces" / KINETO.format(r))
    out = tmp_path / "ranks.json"
    assert main(["export", str(run), "--perfetto", str(out)]) == 0
    view = View(read(out))
    from collectors.open import open_trace
    ev = open_trace(run).events
    assert {"rank 0", "rank 1"} <= set(view.procs.values())
    for r in (0, 1):
        kernels = [e for e in view.slices if e["cat"] == "kernel" and view.track(e)[0] == f"rank {r}"]
        assert len(kernels) == int(((ev["kind"] == "kernel") & (ev["rank"] == r)).sum()) > 0
        assert view.on(STEPS_TRACK, f"rank {r}")


def test_bad_output_is_one_line_and_leaves_nothing(small, tmp_path, capsys):
    (tmp_path / "adir").mkdir()
    assert main(["export", str(small.path), "--perfetto", str(tmp_path / "adir")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rooftop: error:" in err and "directory" in err
    assert main(["export", str(small.path), "--perfetto", str(tmp_path / "f" / "x.json")]) == 0
    assert [p.name for p in (tmp_path / "f").iterdir()] == ["x.json"]  # no temporary file left
    assert main(["export", str(small.path)]) == 2  # --perfetto is required
    assert "--perfetto" in capsys.readouterr().err


def test_busy_fractions_by_hand():
    from rooftop.present.perfetto import busy_fractions, busy_window_ns
    import numpy as np
    # [0,100) and [50,150) overlap (union 150), [300,400) alone; touching [400,450) joins it
    start = np.array([300, 0, 50, 400])
    end = np.array([400, 100, 150, 450])
    got = busy_fractions(start, end, np.array([0, 200, 400, 600]))
    assert got.tolist() == [150 / 200, 100 / 200, 50 / 200]
    assert busy_window_ns(20_100) == 1000 and busy_window_ns(3_000_000) == 2000 and busy_window_ns(7_000_000) == 5000


def test_busy_counter_needs_no_steps_and_sums_to_the_union(small, tmp_path):
    view = View(read(write_perfetto(analyze(small), tmp_path / "out.json")))
    busy = sorted((c["ts"], c["args"]["value"]) for c in view.counters if c["name"] == "GPU 0 busy %")
    # device 0: [0,1000) [10000,10100) [10150,10250) [10200,10300) [20000,20100): union 1350 ns over
    # 1 us windows (span 20.1 us / 2000, at least 1 us) from 0 to 21 us
    assert [ts for ts, _ in busy] == [float(i) for i in range(21)]
    assert sum(v * 1000 / 100 for _, v in busy) == pytest.approx(1350)
    assert busy[0][1] == 100 and busy[5][1] == 0 and busy[10][1] == pytest.approx(25.0)  # 100 + 150 of [10000, 11000)
    assert any(c["name"] == "GPU 1 busy %" for c in view.counters)  # the copy's device too


def test_export_peaks_are_explicit_numbers(small, tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main(["export", str(small.path), "--perfetto", str(out), "--peaks", "datasheet"]) == 2
    assert "BW_TBps,TFLOPs" in capsys.readouterr().err and not out.exists()
    assert main(["export", str(small.path), "--perfetto", str(out), "--peaks", "1,100"]) == 0
    assert read(out)["otherData"]["peaks"]["bw_bytes_per_s"] == 1e12
