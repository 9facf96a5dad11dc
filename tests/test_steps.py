"""rooftop.trace.steps: step markers of every serving stack, and GPU work -> the step window it runs in.

Hand-made cases for the rules, then the real captures checked by independent readers (plain
json+gzip for Kineto): the vLLM v1 GB10 trace (repeated annotation names, CUDA graphs) and the HTA
ProfilerStep traces.
"""
from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from collectors.readers.kineto import read_kineto
from rooftop.trace import steps as st
from rooftop.trace import to_table

VLLM = ("Navi-AI-Lab__nvllm__benchmarks__nvllm__traces__cute_paged_attn__2026-04-13-nsys__"
        "rank0.1776116491109655086.pt.trace.json.gz")
HTA = "facebookresearch__HolisticTraceAnalysis__tests__data__"


# --- markers ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name, source, phase, index, workload", [
    ("execute_context_2(14721)_generation_0(0)", "vllm", "prefill", None,
     dict(prefill_requests=2, prefill_tokens=14721, decode_requests=0, decode_tokens=0, new_tokens=14721, batch=2)),
    ("execute_context_0(0)_generation_64(64)", "vllm", "decode", None,
     dict(prefill_requests=0, prefill_tokens=0, decode_requests=64, decode_tokens=64, new_tokens=64, batch=64)),
    ("execute_context_2(6144)_generation_3(3)", "vllm", "mixed", None,
     dict(prefill_requests=2, prefill_tokens=6144, decode_requests=3, decode_tokens=3, new_tokens=6147, batch=5)),
    ("execute_6147_context_2(sq6144sk7144sqsq20971520sqsk23019520)_generation_3(sq3sk6144sqsq3sqsk6144)", "vllm",
     "mixed", None,
     dict(prefill_requests=2, prefill_tokens=6144, decode_requests=3, decode_tokens=3, new_tokens=6147, batch=5)),
    ("step[EXTEND bs=2 toks=14721]", "sglang", "prefill", None,
     dict(prefill_requests=2, prefill_tokens=14721, decode_requests=0, decode_tokens=0, new_tokens=14721, batch=2)),
    ("step[DECODE bs=64]", "sglang", "decode", None,
     dict(prefill_requests=0, prefill_tokens=0, decode_requests=64, decode_tokens=64, new_tokens=64, batch=64)),
    ("decode[bs=117/128 tok=117 d=117]", "atom", "decode", None,
     dict(prefill_requests=0, prefill_tokens=0, decode_requests=117, decode_tokens=117, new_tokens=117, batch=117)),
    ("[Executor] _forward_step 12: 0 ctx reqs, 64 gen reqs", "trtllm", "decode", 12,
     dict(prefill_requests=0, prefill_tokens=0, decode_requests=64, decode_tokens=64, new_tokens=64, batch=64)),
    ("executeStep: 3 ctx reqs, 5 gen reqs", "trtllm", "mixed", None,
     dict(prefill_requests=3, decode_requests=5, batch=8)),  # a context request's prompt length: unknown
    ("step=3", "recorder", None, 3, {}),
    ("ProfilerStep#551", "profiler", None, 551, {}),
])
def test_marker_names(name, source, phase, index, workload):
    m = st.parse_marker(name)
    assert (m.source, m.phase, m.index) == (source, phase, index)
    assert {k: v for k, v in m.workload.items() if v is not None} == workload


@pytest.mark.parametrize("name", ["layer=3", "stepper", "DECODE_LOOP", "nccl:all_reduce", "## forward ##", "step=3/attn",
                                  "ProfilerStep#x", "execute_model"])
def test_not_markers(name):
    assert st.parse_marker(name) is None


def test_user_pattern_named_groups_and_errors():
    rx = st.compile_user_pattern(r"iter(?P<step>\d+)_(?P<phase>prefill|decode)_(?P<tokens>\d+)")
    m = st.parse_marker("iter7_decode_32", rx)
    assert (m.source, m.phase, m.index, m.workload) == ("user", "decode", 7, {"new_tokens": 32})
    assert st.parse_marker("ProfilerStep#3", rx) is None  # the user's pattern replaces the built-in ones
    with pytest.raises(ValueError, match="not a regular expression"):
        st.compile_user_pattern("(unclosed")
    with pytest.raises(ValueError, match="unknown named group"):
        st.compile_user_pattern("(?P<size>\\d+)")


def test_path_phases_of_vllm_markers():
    assert st.parse_path("execute_context_2(6144)_generation_3(3)/layer=1")[0] == "mixed"
    assert st.parse_path("execute_context_0(0)_generation_8(8)")[:2] == ("decode", None)  # index: by occurrence
    assert st.parse_path("decode/step=12/layer=3/attn") == ("decode", 12, 3)


# --- the vectorised rules ------------------------------------------------------------------------

def test_outermost_per_thread():
    thread = np.array([1, 1, 1, 2, 1])
    start = np.array([0, 10, 10, 5, 50])
    end = np.array([100, 20, 15, 8, 60])
    # [0,100) encloses the next two on thread 1; thread 2's range is its own; [50,60) is inside [0,100)
    assert st.outermost(thread, start, end).tolist() == [True, False, False, True, False]


def test_assign_windows_outside_labels_and_overlap_cut():
    lo, hi = np.array([100, 300, 250]), np.array([200, 400, 320])  # the third overlaps the second
    index, phases = np.array([0, 2, 1]), ["prefill", "decode", "decode"]
    t = np.array([50, 100, 199, 200, 260, 310, 399, 400, 999])
    step, phase = st.assign(lo, hi, index, phases, t)
    # sorted windows: [100,200) step 0, [250,300) step 1 (cut at the next start), [300,400) step 2
    assert step.fillna(-1).tolist() == [-1, 0, 0, -1, 1, 2, 2, -1, -1]
    assert phase.tolist() == [st.BEFORE_FIRST_STEP, "prefill", "prefill", st.BETWEEN_STEPS, "decode", "decode",
                              "decode", st.AFTER_LAST_STEP, st.AFTER_LAST_STEP]


def test_best_tier_only_and_repeated_names_numbered_by_occurrence():
    names = ["ProfilerStep#5", "execute_context_0(0)_generation_4(4)", "execute_context_0(0)_generation_4(4)",
             "execute_context_1(9)_generation_3(3)"]
    s = st.find_steps(names, names, np.array([1, 1, 1, 1]), np.array([0, 10, 30, 50]), np.array([100, 20, 40, 60]))
    assert s.row.tolist() == [1, 2, 3] and s.index.tolist() == [0, 1, 2]
    assert s.phase == ["decode", "decode", "mixed"]
    assert [e["batch"] for e in s.entries] == [4, 4, 4] and s.entries[2]["new_tokens"] == 12


def test_python_frames_when_no_annotation():
    t = np.array([1, 1, 1, 1])
    names = ["vllm/v1/worker/gpu_worker.py(807): execute_model", "vllm/v1/worker/gpu_worker.py(747): execute_model",
             "vllm/v1/worker/gpu_worker.py(741): sample_tokens", "vllm/v1/worker/gpu_worker.py(747): execute_model"]
    assert [st.wanted_python_frame(n) for n in names] == [True, True, False, True]
    s = st.find_steps([], [], np.zeros(0), np.zeros(0), np.zeros(0),
                      py=(t, np.array([0, 100, 60, 110]), np.array([50, 200, 90, 150]), names))
    # the nested execute_model frame is not a second step
    assert s.start.tolist() == [0, 100] and s.index.tolist() == [0, 1] and s.phase == [None, None]
    sg = ["sglang/srt/model_executor/model_runner.py(1700): forward_extend",
          "sglang/srt/model_executor/model_runner.py(1650): forward_decode"]
    s = st.find_steps([], [], np.zeros(0), np.zeros(0), np.zeros(0),
                      py=(np.array([3, 3]), np.array([0, 10]), np.array([5, 15]), sg))
    assert s.phase == ["prefill", "decode"]


def test_hugging_face_generate_first_forward_is_prefill():
    gen = "transformers/generation/utils.py(2215): generate"
    fwd = "transformers/models/llama/modeling_llama.py(1190): forward"
    inner = "transformers/models/llama/modeling_llama.py(900): forward"
    names = [gen, fwd, inner, fwd, fwd, gen, fwd, fwd]
    start = np.array([0, 10, 11, 30, 50, 100, 110, 130])
    end = np.array([90, 20, 19, 40, 60, 190, 120, 140])
    s = st.find_steps([], [], np.zeros(0), np.zeros(0), np.zeros(0), py=(np.ones(8, np.int64), start, end, names))
    assert s.start.tolist() == [10, 30, 50, 110, 130]
    assert s.phase == ["prefill", "decode", "decode", "prefill", "decode"]


# --- a Kineto file: GPU work by window, whoever launched it ---------------------------------------

def _x(cat, name, ts, dur, pid=1, tid=7, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _kernel(name, ts, dur, corr, cat="kernel"):
    return _x(cat, name, ts, dur, pid=0, tid=7, device=0, stream=7, correlation=corr)


def _session() -> dict:
    """Two Recorder-style decode steps; a CUDA graph replay; a launch from another thread; GPU work
    with no launch record; work before, between and after the steps. Times in µs."""
    ev = [
        _x("cuda_runtime", "cudaLaunchKernel", 0.2, 0.1, correlation=800),
        _x("user_annotation", "decode", 1.0, 12.0, **{"External id": 1}),
        _x("user_annotation", "step=0", 1.1, 8.0, **{"External id": 2}),
        _x("user_annotation", "layer=0", 1.2, 3.0, **{"External id": 3}),
        _x("cpu_op", "aten::mm", 1.4, 0.5, **{"External id": 10, "Input Dims": [[1, 4096], [4096, 4096]],
                                              "Input type": ["c10::BFloat16", "c10::BFloat16"]}),
        _x("cuda_runtime", "cudaLaunchKernel", 1.5, 0.1, correlation=900, **{"External id": 10}),
        _x("cuda_runtime", "cudaGraphLaunch", 5.0, 0.08, correlation=903),
        _x("cuda_runtime", "cudaLaunchKernel", 2.5, 0.1, tid=8, correlation=906),  # another thread, no markers
        _x("user_annotation", "step=1", 10.0, 2.0, **{"External id": 4}),
        _x("cuda_runtime", "cudaLaunchKernel", 10.5, 0.1, correlation=905),
        _kernel("warm_kernel", 0.5, 0.1, 800),
        _kernel("gemv_splitk", 3.0, 0.3, 900),
        _kernel("other_thread_kernel", 4.0, 0.1, 906),
        _kernel("no_launch_record", 4.5, 0.1, 999),
        _kernel("graph_kernel_a", 5.2, 0.04, 903),
        _kernel("graph_kernel_b", 5.24, 0.04, 903),
        _kernel("orphan_between", 8.0, 0.01, 998),
        _kernel("step1_kernel", 13.0, 0.2, 905),
        _kernel("late", 20.0, 0.1, 997),
        _x("gpu_user_annotation", "layer=0", 3.0, 0.3, pid=0, tid=7, **{"External id": 3}),
    ]
    return {"schemaVersion": 1, "traceEvents": ev, "baseTimeNanoseconds": 1700000000000000000,
            "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0}]}


def test_kineto_gpu_work_belongs_to_the_window_it_runs_in(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(_session()))
    rows, meta = read_kineto(path)
    t = to_table(rows).to_pandas().set_index("name")
    step = t["step"].astype(object).where(t["step"].notna(), None).to_dict()
    phase = t["phase"].astype(object).to_dict()
    # step 0's window: first to last GPU work launched inside `step=0` on its thread: [3.0, 5.28] µs
    for k in ("gemv_splitk", "other_thread_kernel", "no_launch_record", "graph_kernel_a", "graph_kernel_b"):
        assert (step[k], phase[k]) == (0, "decode"), k
    assert (step["step1_kernel"], phase["step1_kernel"]) == (1, "decode")
    assert (step["warm_kernel"], phase["warm_kernel"]) == (None, st.BEFORE_FIRST_STEP)
    assert (step["orphan_between"], phase["orphan_between"]) == (None, st.BETWEEN_STEPS)
    assert (step["late"], phase["late"]) == (None, st.AFTER_LAST_STEP)
    assert t.loc["graph_kernel_a", "path"] == "decode/step=0"  # the replay inherits the ranges around it
    assert t.loc["graph_kernel_a", "op"] == "cudaGraphLaunch" and meta["workload"]["cuda_graphs"] is True
    assert t.loc["gemv_splitk", "op"] == "aten::mm" and pd.isna(t.loc["no_launch_record", "op"])
    assert t.loc["gemv_splitk", "path"] == "decode/step=0/layer=0" and t.loc["gemv_splitk", "layer"] == 0
    assert [(s["phase"], s["index"], s["window"]) for s in meta["steps"]] == [
        ("decode", 0, "launches"), ("decode", 1, "launches")]
    origin = 200  # ns: the first event, the warm-up launch at 0.2 µs
    assert (meta["steps"][0]["gpu_start_ns"], meta["steps"][0]["gpu_end_ns"]) == (3000 - origin, 5280 - origin)


def test_analysis_counts_no_step_outside_the_windows(tmp_path):
    from rooftop.analysis.metrics import phase_table, step_table

    path = tmp_path / "s.json"
    path.write_text(json.dumps(_session()))
    rows, meta = read_kineto(path)
    timed = to_table(rows).to_pandas()
    timed = timed[timed["kind"] == "kernel"]
    steps = step_table(timed, meta)
    assert steps["step"].tolist() == [0, 1] and steps["kernels"].tolist() == [5, 1]
    phases = phase_table(timed, steps, meta).set_index("phase")
    assert phases.loc["decode", "steps"] == 2
    for label in (st.BEFORE_FIRST_STEP, st.BETWEEN_STEPS, st.AFTER_LAST_STEP):
        assert phases.loc[label, "steps"] == 0 and phases.loc[label, "kernels"] == 1
        assert phases.loc[label, "span_ns"] == phases.loc[label, "busy_ns"]  # no span across the run


# --- real captures, against an independent reader ---------------------------------------------------

def _ns(v) -> int:
    return int(Decimal(str(v)) * 1000)


def _events(path: Path) -> list:
    with gzip.open(path, "rt") as fh:
        return json.load(fh, parse_float=Decimal)["traceEvents"]


def test_vllm_gb10_decode_steps_match_plain_reader(fixtures_dir):
    path = fixtures_dir / "traces" / VLLM
    ev = [e for e in _events(path) if e.get("ph") == "X"]
    name = "execute_context_0(0)_generation_4(4)"
    cpu = [e for e in ev if e["cat"] == "user_annotation" and e["name"] == name]
    gpu = sorted((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in ev
                 if e["cat"] == "gpu_user_annotation" and e["name"] == name)
    assert len(cpu) == len(gpu) == 10  # SOURCES.md's 20 annotations: 10 on the CPU, 10 on the GPU
    work = [_ns(e["ts"]) for e in ev if e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset")]
    want = [sum(lo <= t < hi for t in work) for lo, hi in gpu]
    outside = [t for t in work if not any(lo <= t < hi for lo, hi in gpu)]
    rows, meta = read_kineto(path)
    t = to_table(rows).to_pandas()
    w = t[t["kind"].isin(["kernel", "memcpy", "memset"])]
    got = w.groupby("step")["id"].count()
    assert got.index.tolist() == list(range(10)) and got.tolist() == want
    assert set(w.loc[w["step"].notna(), "phase"]) == {"decode"}
    out = w[w["step"].isna()]
    assert len(out) == len(outside) == 411  # vLLM's sampling, launched between the annotations
    first, last = gpu[0][0], gpu[-1][1]
    assert not any(x < first for x in outside)
    n_after = sum(x >= last for x in outside)
    assert (out["phase"] == st.AFTER_LAST_STEP).sum() == n_after
    assert (out["phase"] == st.BETWEEN_STEPS).sum() == len(outside) - n_after
    # CUDA-graph replays: every GPU row launched by a cudaGraphLaunch says so
    graph = {e["args"]["correlation"] for e in ev if e["name"] == "cudaGraphLaunch"}
    replayed = [e for e in ev if e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset") and e["args"]["correlation"] in graph]
    assert len(replayed) == (w["op"] == "cudaGraphLaunch").sum() == 12820 and meta["workload"]["cuda_graphs"]
    assert [s["index"] for s in meta["steps"]] == list(range(10))
    assert all(s["phase"] == "decode" and s["batch"] == 4 and s["new_tokens"] == 4 and s["decode_requests"] == 4
               and s["prefill_requests"] == 0 for s in meta["steps"])
    base = 1775078550000000000  # the file's baseTimeNanoseconds: origin_ns is absolute
    origin = meta["origin_ns"] - base
    assert [(s["gpu_start_ns"] + origin, s["gpu_end_ns"] + origin) for s in meta["steps"]] == gpu


def test_vllm_gb10_report_has_ten_decode_steps(fixtures_dir):
    from collectors.open import open_trace
    from rooftop.analysis import analyze
    from rooftop.present.report import report_dict

    doc = report_dict(analyze(open_trace(fixtures_dir / "traces" / VLLM)), 5)
    phases = {p["phase"]: p for p in doc["phases"]}
    assert phases["decode"]["steps"] == 10 and "run" not in phases
    assert phases[st.BETWEEN_STEPS]["steps"] == 0 and phases[st.AFTER_LAST_STEP]["steps"] == 0
    assert sorted(s["step"] for s in doc["steps"]) == list(range(10))


@pytest.mark.parametrize("name", ["nccl_parser_config__nccl_data.json.gz", "trace_filter__sampled_rank-0.json.gz",
                                  "trace_filter__sampled_rank-1.json.gz"])
def test_hta_profiler_steps_match_plain_reader(fixtures_dir, name):
    """ProfilerStep#N: each GPU activity launched inside step N's CPU range (its runtime call, by
    correlation, on the step's thread) is in step N."""
    path = fixtures_dir / "traces" / (HTA + name)
    ev = [e for e in _events(path) if e.get("ph") == "X"]
    marks = [e for e in ev if e["cat"] == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    launch = {e["args"]["correlation"]: e for e in ev if e["cat"] in ("cuda_runtime", "cuda_driver")
              and "correlation" in e.get("args", {})}
    want = {}
    for e in ev:
        if e["cat"] not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        r = launch.get(e["args"].get("correlation"))
        for m in marks:
            if r is not None and (r["pid"], r["tid"]) == (m["pid"], m["tid"]) and \
                    _ns(m["ts"]) <= _ns(r["ts"]) < _ns(m["ts"]) + _ns(m["dur"]):
                want[(e["args"]["correlation"], _ns(e["ts"]))] = int(m["name"].split("#")[1])
    rows, meta = read_kineto(path)
    assert [s["index"] for s in meta["steps"]] == sorted(int(m["name"].split("#")[1]) for m in marks)
    t = to_table(rows).to_pandas()
    w = t[t["kind"].isin(["kernel", "memcpy", "memset"])]
    base = _ns(min(e["ts"] for e in ev if e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset"))) - int(w["start_ns"].min())
    got = {(int(c), int(s) + base): int(n) for c, s, n in zip(w["correlation"], w["start_ns"], w["step"])
           if n == n and n is not None}
    assert len(want) > 600 and all(got.get(k) == v for k, v in want.items())


# --- `--steps REGEX` on the command line ----------------------------------------------------------

def test_cli_steps_pattern_on_report_and_its_errors(fixtures_dir, tmp_path, capsys):
    from rooftop_cli import main

    src = fixtures_dir / "traces" / (HTA + "nccl_parser_config__nccl_data.json.gz")
    assert main(["report", str(src), "--json", "--steps", r"^## (?P<phase>forward|backward) ##$"]) == 0
    doc = json.loads(capsys.readouterr().out)
    phases = {p["phase"]: p["steps"] for p in doc["phases"]}
    # 3 profiler steps, each with one forward and one backward range: 3 + 3 steps, numbered in order
    assert phases["forward"] == 3 and phases["backward"] == 3
    assert sorted(s["step"] for s in doc["steps"]) == list(range(6))
    assert st.user_pattern() is None  # the pattern lasts one command
    assert main(["report", str(src), "--json"]) == 0  # without it: the ProfilerStep#N steps
    assert sorted(s["step"] for s in json.loads(capsys.readouterr().out)["steps"]) == [4, 5, 6]
    assert main(["report", str(src), "--steps", "(unclosed"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rooftop: error: --steps") and err.count("\n") == 1
    out = tmp_path / "t.parquet"
    assert main(["import", str(src), "-o", str(out), "--steps", r"ProfilerStep#(?P<step>\d+)"]) == 0
    assert main(["report", str(out), "--steps", "x"]) == 2
    assert "rooftop trace already" in capsys.readouterr().err


def test_vllm_python_stack_frames_are_the_steps_without_annotations(fixtures_dir, tmp_path):
    """The same capture with its annotations taken out (a with_stack trace of a vLLM without
    annotations): each outermost `gpu_worker.py(L): execute_model` frame is a step, and holds the GPU
    work launched inside it (checked with plain json: launches by correlation, frames by time)."""
    with gzip.open(fixtures_dir / "traces" / VLLM, "rt") as fh:
        doc = json.load(fh)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") not in ("user_annotation", "gpu_user_annotation")]
    path = tmp_path / "no_annotations.json"
    path.write_text(json.dumps(doc))
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    frames = sorted((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in ev if e["cat"] == "python_function"
                    and "gpu_worker.py(" in e["name"] and e["name"].endswith(": execute_model"))
    outer = [f for f in frames if not any(o[0] <= f[0] and f[1] <= o[1] and o != f for o in frames)]
    launch = {e["args"]["correlation"]: _ns(e["ts"]) for e in ev if e["cat"] in ("cuda_runtime", "cuda_driver")}
    work = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), launch.get(e["args"]["correlation"])) for e in ev
            if e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset")]
    windows = []  # per frame: first start to last end of the GPU work launched inside it
    for lo, hi in outer:
        mine = [(s, e) for s, e, t in work if t is not None and lo <= t < hi]
        windows.append((min(s for s, _ in mine), max(e for _, e in mine)) if mine else None)
    want = [sum(w[0] <= s < w[1] for s, _, _ in work) if w else 0 for w in windows]
    rows, meta = read_kineto(path)
    assert len(outer) == len(meta["steps"]) == 11  # the 11th ran when the profiler stopped (no annotation)
    # the 11th launched nothing: no window, so it cannot take the kernels of the 10th, still running
    assert [(s["source"], s.get("window")) for s in meta["steps"]] == [("python", "launches")] * 10 + [("python", None)]
    t = to_table(rows).to_pandas()
    w = t[t["kind"].isin(["kernel", "memcpy", "memset"])]
    assert w.groupby("step")["id"].count().tolist() == want[:10] and want[10] == 0
    rest = w[w["step"].isna()]  # vLLM's sampling, after each model step
    assert len(rest) == len(w) - sum(want) and set(rest["phase"]) == {st.BETWEEN_STEPS, st.AFTER_LAST_STEP}


def test_cli_open_shortcut_takes_steps(tmp_path, monkeypatch):
    """`rooftop TRACE --steps REGEX` is `rooftop open TRACE --steps REGEX`: the pattern is in force
    while the explorer loads the trace."""
    import rooftop_cli.commands as cli

    seen = []
    monkeypatch.setattr(cli, "cmd_open", lambda paths, *rest: seen.append((paths, st.user_pattern().pattern)) or 0)
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(_session()))
    assert cli.main([str(trace), "--steps", r"step=(?P<step>\d+)"]) == 0
    assert seen == [([str(trace)], r"step=(?P<step>\d+)")] and st.user_pattern() is None
