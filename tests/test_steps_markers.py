"""Step markers of every engine version (each format string quoted from its source), hand-written step
ranges, the repeated-range rule, names that look like markers, and a phase from the step's own work.

Sources (docs/steps.md has the table; commits are vLLM's, SGLang's and TensorRT-LLM's):
- vLLM v1 `Worker.annotate_profile`, vllm/v1/worker/gpu_worker.py
- SGLang `_build_step_span_name`, python/sglang/srt/model_executor/model_runner.py (PR #23419)
- TensorRT-LLM `PyExecutor._forward_step`, tensorrt_llm/_torch/pyexecutor/py_executor.py
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from collectors.readers.kineto import read_kineto
from rooftop.trace import steps as st
from rooftop.trace import to_table


def _parsed(name):
    m = st.parse_marker(name)
    assert m is not None, name
    return m.source, m.phase, m.index, {k: v for k, v in m.workload.items() if v is not None}


# vLLM A: gpu_worker.py @ 176765855 (PR #22496, in v0.13.0):
#   f"execute_new_{num_new}_cached_{num_cached}"
# "cached" is any running request (a later prefill chunk or a decode): no phase unless only new ones ran.
def test_vllm_new_cached_form():
    assert _parsed("execute_new_1_cached_0") == ("vllm", "prefill", None,
                                                 dict(batch=1, new_requests=1, cached_requests=0, prefill_requests=1,
                                                      decode_requests=0, decode_tokens=0))
    src, phase, _, wl = _parsed("execute_new_0_cached_8")
    assert (src, phase, wl["batch"]) == ("vllm", None, 8)


# vLLM B: gpu_worker.py @ 6ebe34d6f (PR #31193, v0.14.0 on):
#   "".join(["execute_context_", str(num_ctx_requests), "(", str(num_ctx_tokens), ")_generation_",
#            str(num_generation_requests), "(", str(num_generation_tokens), ")"])
def test_vllm_context_generation_form():
    assert _parsed("execute_context_0(0)_generation_4(4)")[:2] == ("vllm", "decode")
    assert _parsed("execute_context_2(6144)_generation_3(3)")[3]["new_tokens"] == 6147


# vLLM D: a patched B200 build (TraceLens tests/traces/b200/eager_trace.json.gz; TraceLens's perf model reads
# requests[3] as sum_ctx_tokens, requests[4] as sum_ctx_squared_tokens): execute_context_nc(ct_Σct²)_generation_...
def test_vllm_tokens_sum_of_squares_form():
    src, phase, _, wl = _parsed("execute_context_1(888_788544)_generation_0(0)")
    assert (src, phase) == ("vllm", "prefill")
    assert (wl["prefill_requests"], wl["prefill_tokens"], wl["new_tokens"], wl["batch"]) == (1, 888, 888, 1)
    assert 888 ** 2 == 788544  # the second field is the sum of squares, not a second count


# vLLM C, `detailed_trace_annotation` (vllm/config/profiler.py @ 04b02293; TraceLens vllm_v0.13.0.patch @ 8c85b33f):
#   "execute_", str(total_scheduled_tokens), "_context_", nc, "(sq", ct, "sk", ctx_seq_len_sum, "sqsq", ..,
#   "sqsk", .., ")_generation_", ng, "(sq", gt, "sk", gen_seq_len_sum, "sqsq", .., "sqsk", .., ")"
def test_vllm_detailed_form_gives_context():
    src, phase, _, wl = _parsed(
        "execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk32785sqsq32sqsk32785)")
    assert (src, phase, wl["decode_tokens"], wl["batch"]) == ("vllm", "decode", 32, 32)
    assert wl["context"] == pytest.approx(32785 / 32)  # sk: KV lengths summed over the 32 sequences
    assert _parsed("execute_15360_context_15(sq15360sk15360sqsq15728640sqsk15728640)_generation_0(sq0sk0sqsq0sqsk0)"
                   )[3]["prefill_tokens"] == 15360


# SGLang model_runner.py `_build_step_span_name`:
#   if mode == ForwardMode.EXTEND: return f"step[EXTEND bs={bs} toks={ext_toks}]"
#   return f"step[{mode.name} bs={bs}]"   (modes: EXTEND, DECODE, MIXED, IDLE, TARGET_VERIFY, DRAFT_EXTEND, ...)
@pytest.mark.parametrize("name, phase, wl", [
    ("step[EXTEND bs=15 toks=15360]", "prefill", dict(prefill_requests=15, prefill_tokens=15360, batch=15)),
    ("step[DECODE bs=32]", "decode", dict(decode_requests=32, decode_tokens=32, batch=32)),
    ("step[MIXED bs=2]", "mixed", dict(batch=2)),
    ("step[TARGET_VERIFY bs=8]", "decode", dict(decode_requests=8)),
    ("step[DRAFT_EXTEND_V2 bs=4]", "decode", dict(decode_requests=4)),
    ("step[IDLE bs=0]", None, dict(batch=0)),
    # PR #24911's roofline fields inside the same span: g_sq new tokens (speculative), g_sk the KV lengths
    ("step[DECODE bs=64 g_sq=128 g_sqsq=256 g_sqsk=262144 g_sk=131072]", "decode",
     dict(decode_requests=64, decode_tokens=128, context=2048)),
])
def test_sglang_forward_modes(name, phase, wl):
    src, ph, _, got = _parsed(name)
    assert (src, ph) == ("sglang", phase)
    assert {k: got.get(k) for k in wl} == wl


# TensorRT-LLM py_executor.py, `@nvtx_range(...)` on `forward` in `_forward_step`, four versions:
#   f"_forward_step: {len(ctx)} ctx reqs, {len(gen)} gen reqs"
#   f"[Executor] _forward_step: {len(ctx)} ctx reqs, {len(gen)} gen reqs"
#   f"[Executor] _forward_step {self.model_engine.iter_counter}: {len(ctx)} ctx reqs, {len(gen)} gen reqs"
#   f"[Executor] _forward_step {self.model_engine.iter_counter + 1}: ..."  (same text)
@pytest.mark.parametrize("name, phase, index", [
    ("_forward_step: 2 ctx reqs, 0 gen reqs", "prefill", None),
    ("[Executor] _forward_step: 0 ctx reqs, 7 gen reqs", "decode", None),
    ("[Executor] _forward_step 12: 1 ctx reqs, 7 gen reqs", "mixed", 12),
])
def test_trtllm_iteration_ranges(name, phase, index):
    src, ph, idx, wl = _parsed(name)
    assert (src, ph, idx) == ("trtllm", phase, index)
    assert wl["batch"] == wl["prefill_requests"] + wl["decode_requests"]


def test_capture_and_sub_scopes_are_not_steps():
    # vllm/profiler/graph_capture.py: f"capture_{num_tokens}_{mode}"; gpu_model_runner sub-scopes (v1/utils.py)
    for name in ("capture_32_FULL", "capture_32_draft_FULL", "gpu_model_runner: forward", "DECODE_LOOP",
                 "aten::mul, op_id = 314339"):
        assert st.parse_marker(name) is None, name
        assert not st.looks_like_step_marker(name), name


def test_unknown_step_like_names_warn():
    names = ["execute_context_1(888)_generation_x", "step[decode bs=4]", "aten::mm"]
    s = st.find_steps(names, names, np.ones(3, np.int64), np.array([0, 10, 20]), np.array([5, 15, 25]))
    assert len(s) == 0 and len(s.warnings) == 1
    assert "2 range name(s) look like step markers" in s.warnings[0] and "step[decode bs=4]" in s.warnings[0]


# --- hand-written step ranges ------------------------------------------------------------------------

# allenkchau/flash-inference src/scripts/profile_kv_decode_nsys.py @ 38b55cf: range_push("PREFILL"),
# "DECODE_LOOP", f"DECODE_STEP_{i:03d}"; record_function(f"generate_kv_iter_{i}").
@pytest.mark.parametrize("name, phase, index", [
    ("PREFILL", "prefill", None), ("prefill", "prefill", None), ("DECODE_STEP_007", "decode", 7),
    ("decode_step_3_B8_T512", "decode", 3), ("iteration 12", None, 12),
    ("generate_kv_iter_5", None, 5), ("forward", None, None), ("token_17_generation", None, 17),
])
def test_generic_names(name, phase, index):
    assert _parsed(name)[:3] == ("generic", phase, index)


def test_plain_nvtx_decode_loop_gives_prefill_and_decode_steps():
    # PREFILL, then DECODE_LOOP around DECODE_STEP_000..002, then a `decode` range around step 0..1
    names = ["PREFILL", "DECODE_LOOP", "DECODE_STEP_000", "DECODE_STEP_001", "DECODE_STEP_002"]
    paths = ["PREFILL", "DECODE_LOOP", "DECODE_LOOP/DECODE_STEP_000", "DECODE_LOOP/DECODE_STEP_001",
             "DECODE_LOOP/DECODE_STEP_002"]
    s = st.find_steps(names, paths, np.ones(5, np.int64), np.array([0, 100, 110, 120, 130]),
                      np.array([90, 140, 119, 129, 139]))
    assert s.phase == ["prefill", "decode", "decode", "decode"] and s.start.tolist() == [0, 110, 120, 130]
    assert s.rule.startswith("hand-written step ranges")
    names = ["decode", "step 0", "step 1"]
    s = st.find_steps(names, ["decode", "decode/step 0", "decode/step 1"], np.ones(3, np.int64),
                      np.array([0, 1, 10]), np.array([20, 9, 19]))
    assert s.index.tolist() == [0, 1] and s.phase == ["decode", "decode"]  # the `decode` range is their loop


def test_repeated_outermost_range_is_a_step_when_nothing_better():
    names = ["run_batch", "run_batch", "run_batch", "init", "aten::mm", "aten::mm", "aten::mm", "aten::mm"]
    start = np.array([0, 100, 200, 300, 400, 410, 420, 430])
    end = start + 50
    th = np.ones(8, np.int64)
    # launches inside each run_batch (and inside the aten::mm ranges, which are operators, never steps)
    launches = (np.ones(7, np.int64), np.array([10, 110, 210, 401, 411, 421, 431]))
    s = st.find_steps(names, names, th, start, end, launches=launches)
    assert s.start.tolist() == [0, 100, 200] and s.rule.startswith("a repeated outermost range")
    assert [e["source"] for e in s.entries] == ["repeated"] * 3
    # a name + number counts as one name; ranges that launched nothing (host-side passes) are not steps
    names = ["fwd 1", "fwd 2", "fwd 3", "getOutputs", "getOutputs", "getOutputs"]
    start = np.array([0, 100, 200, 300, 400, 500])
    s = st.find_steps(names, names, np.ones(6, np.int64), start, start + 50,
                      launches=(np.ones(3, np.int64), np.array([10, 110, 210])))
    assert s.index.tolist() == [1, 2, 3]
    s = st.find_steps(names[3:], names[3:], np.ones(3, np.int64), start[3:], start[3:] + 50,
                      launches=(np.ones(3, np.int64), np.array([10, 110, 210])))
    assert len(s) == 0
    # twice is no pattern
    s = st.find_steps(names[:2], names[:2], np.ones(2, np.int64), start[:2], start[:2] + 50,
                      launches=(np.ones(2, np.int64), np.array([10, 110])))
    assert len(s) == 0


@pytest.mark.parametrize("path, layer", [
    ("decode/step=3/layer=2/attn", 2), ("layer_12_computation", 12), ("Llama.model.layers.7.self_attn", 7),
    ("nn.Module: LlamaForCausalLM.model.layers.31.mlp", 31), ("encoder.block.3.layer.0", 3),
    ("gpt.transformer.h.5.attn", 5), ("stack.blocks.2.ffn", 2), ("aten::mul, op_id = 314339", None),
    ("v0.13.0/run", None), ("relayer_3", None),
])
def test_layers_from_module_paths(path, layer):
    assert st.parse_layer(path) == layer
    # the vectorised reader (Arrow's RE2 for plain ASCII, `re` for the rest) says the same
    got = st.parse_layers(np.array([path, "ünïcode/" + path], dtype=object))
    want = np.nan if layer is None else float(layer)
    np.testing.assert_array_equal(got, [want, want])


# --- a phase from the step's own work ----------------------------------------------------------------

def _x(cat, name, ts, dur, tid=7, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1 if cat != "kernel" else 0, "tid": tid, "ts": ts,
            "dur": dur, "args": args}


def _v1_capture(prefill_tokens=1049, decodes=3) -> dict:
    """A vLLM v1 capture recorded with Python stacks and no annotation: one eager prefill step, then decode
    steps that replay a CUDA graph. The steps differ only in the per-token kernels' grids and in how the
    kernels were launched."""
    frame = "vllm/v1/worker/gpu_model_runner.py(2907): execute_model"
    per_token = ["void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16>(...)",
                 "void vllm::rms_norm_kernel<c10::BFloat16, 8, 4>(...)", "sm90_xmma_gemm_bf16bf16_bf16f32"]
    ev, corr, t = [], 100, 0.0
    for step in range(1 + decodes):
        ev.append(_x("python_function", frame, t, 50.0))
        tokens = prefill_tokens if step == 0 else 1
        if step == 0:  # eager: one launch per kernel
            for j, k in enumerate(per_token):
                ev.append(_x("cuda_runtime", "cudaLaunchKernel", t + 1 + j, 0.5, correlation=corr))
                ev.append(_x("kernel", k, t + 10 + 5 * j, 4.0, device=0, stream=7, correlation=corr,
                             grid=[tokens, 1, 1], block=[256, 1, 1]))
                corr += 1
        else:  # one cudaGraphLaunch; its kernels carry its correlation
            ev.append(_x("cuda_runtime", "cudaGraphLaunch", t + 1, 0.5, correlation=corr))
            for j, k in enumerate(per_token):
                ev.append(_x("kernel", k, t + 10 + 5 * j, 4.0, device=0, stream=7, correlation=corr,
                             grid=[tokens, 1, 1], block=[256, 1, 1]))
            corr += 1
        t += 100.0
    return {"schemaVersion": 1, "traceEvents": ev, "baseTimeNanoseconds": 1700000000000000000, "with_stack": 1,
            "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0}]}


def test_prefill_and_decode_inferred_from_grids_and_graph_launches(tmp_path):
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(_v1_capture()))
    rows, meta = read_kineto(path)
    s = meta["steps"]
    assert [e["phase"] for e in s] == ["prefill", "decode", "decode", "decode"]
    assert {e["phase_source"] for e in s} == {"inferred"} and meta["step_rule"] == "Python stack frames"
    assert [e["inferred_tokens"] for e in s] == [1049, 1, 1, 1]
    assert [(e["graph_kernels"], e["eager_kernels"]) for e in s] == [(0, 3)] + [(3, 0)] * 3
    assert "1049 tokens per step" in s[0]["phase_reason"] and "one per decoding sequence" in s[1]["phase_reason"]
    assert (s[1]["new_tokens"], s[1]["batch"]) == (1, 1) and s[0]["new_tokens"] == 1049
    t = to_table(rows).to_pandas()
    k = t[t["kind"] == "kernel"]
    assert k.groupby(k["phase"].astype(object))["id"].count().to_dict() == {"prefill": 3, "decode": 9}


def test_marker_phases_are_left_alone():
    s = st.find_steps(["execute_context_0(0)_generation_4(4)"], ["x"], np.ones(1, np.int64), np.array([0]),
                      np.array([10]))
    st.infer_phases(s, np.array([0]), np.array([10]), np.array([1]), np.array([0]),
                    ["void vllm::rms_norm_kernel<float>"], np.array([4096.0]), np.array([False]), np.array([True]))
    assert s.phase == ["decode"] and s.entries[0]["phase_source"] == "marker"


def test_one_token_level_without_graphs_stays_unknown():
    s = st.find_steps(["step 0", "step 1"], ["a", "b"], np.ones(2, np.int64), np.array([0, 20]), np.array([10, 30]))
    st.infer_phases(s, np.array([0, 20]), np.array([10, 30]), np.array([1, 21]), np.array([0, 0]),
                    ["rms_norm_kernel"], np.array([8.0, 8.0]), np.array([False, False]), np.array([True, True]))
    assert s.phase == [None, None] and s.entries[0]["inferred_tokens"] == 8


def test_gb10_vllm_capture_without_annotations_infers_what_the_annotations_said(fixtures_dir, tmp_path):
    """The project's vLLM v1 GB10 capture (CUDA graphs, batch 4) with its annotations taken out: the steps
    (Python frames) get their phase and tokens from their kernels, and those agree with the annotations
    the capture had (`execute_context_0(0)_generation_4(4)`, read here with plain json)."""
    import gzip
    import re

    vllm = ("Navi-AI-Lab__nvllm__benchmarks__nvllm__traces__cute_paged_attn__2026-04-13-nsys__"
            "rank0.1776116491109655086.pt.trace.json.gz")
    with gzip.open(fixtures_dir / "traces" / vllm, "rt") as fh:
        doc = json.load(fh)
    marks = [re.fullmatch(r"execute_context_(\d+)\((\d+)\)_generation_(\d+)\((\d+)\)", e["name"])
             for e in doc["traceEvents"] if e.get("cat") == "user_annotation"]
    marks = [tuple(int(x) for x in m.groups()) for m in marks if m]
    assert len(marks) == 10 and set(marks) == {(0, 0, 4, 4)}  # ten decode steps of 4 sequences
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") not in ("user_annotation", "gpu_user_annotation")]
    path = tmp_path / "no_annotations.json"
    path.write_text(json.dumps(doc))
    _, meta = read_kineto(path)
    ran = [s for s in meta["steps"] if s.get("window")]  # (the 11th frame ran no GPU work)
    assert len(ran) == 10
    assert {(s["phase"], s["phase_source"], s["inferred_tokens"], s["new_tokens"]) for s in ran} == {
        ("decode", "inferred", 4, 4)}
    assert all(s["graph_kernels"] > 0 for s in ran)


def test_steps_pattern_tokens_group_alone_is_new_tokens():
    rx = st.compile_user_pattern(r"fwd tok=(?P<tokens>\d+)")
    m = st.parse_marker("fwd tok=12", rx)
    assert (m.source, m.phase, m.workload) == ("user", None, {"new_tokens": 12})


def test_tui_step_view_shows_why_the_phase_was_inferred(tmp_path):
    import asyncio

    from rooftop.trace import write_trace
    from tui.app import RooftopApp
    from tui.screens.steps import StepScreen

    src = tmp_path / "v1.json"
    src.write_text(json.dumps(_v1_capture()))
    rows, meta = read_kineto(src)
    path = write_trace(tmp_path / "v1.parquet", rows, meta)

    async def main():
        app = RooftopApp([str(path)])
        async with app.run_test(size=(140, 40)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            await pilot.press("2")
            await app.workers.wait_for_complete()
            await pilot.pause()
            view = app.screen.query_one("#steps-table").view
            sources = set(view["phase_source"].astype(str))
            await pilot.press("enter")
            await app.workers.wait_for_complete()
            await pilot.pause()
            s = app.screen
            return sources, isinstance(s, StepScreen), s.query_one("#range-tree").root.label.plain
    sources, opened, label = asyncio.run(main())
    assert sources == {"inferred"} and opened
    assert "phase inferred: " in label and "per-token kernels' grid" in label


def test_nsys_export_phase_inferred_from_grid_and_graph_nodes(tmp_path):
    """The same rule on an Nsight Systems export: hand-written `iteration N` ranges (no phase), a first
    step whose per-token kernel runs with gridX = 900, then steps whose kernels ran in a CUDA graph
    (`graphNodeId` set) with gridX = 1."""
    import sqlite3

    from collectors.readers.nsys import read_nsys

    path = tmp_path / "loop.sqlite"
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT, streamId INT,
            correlationId INT, demangledName INT, gridX INT, gridY INT, gridZ INT, graphNodeId INT, graphId INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT, correlationId INT);
        CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, text TEXT, textId INT, globalTid INT);
    """)
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(1, "void vllm::rms_norm_kernel<c10::BFloat16>(...)"),
                                                            (2, "gemm")])
    runtime, kernels, nvtx = [], [], []
    for i in range(4):
        t0 = 1000 * (i + 1)
        nvtx.append((t0, t0 + 500, 59, f"iteration {i}", None, 5))
        runtime.append((t0 + 10, t0 + 20, 5, i + 1))
        grid, node = (900, None) if i == 0 else (1, 7)
        kernels += [(t0 + 100, t0 + 150, 0, 7, i + 1, 1, grid, 1, 1, node, None if node is None else 3),
                    (t0 + 160, t0 + 200, 0, 7, i + 1, 2, 132, 1, 1, node, None if node is None else 3)]
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?)", runtime)
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", kernels)
    con.executemany("INSERT INTO NVTX_EVENTS VALUES (?, ?, ?, ?, ?, ?)", nvtx)
    con.commit()
    con.close()
    rows, meta = read_nsys(path)
    assert meta["step_rule"].startswith("hand-written")
    assert [(s["index"], s["phase"], s["phase_source"], s["inferred_tokens"]) for s in meta["steps"]] == [
        (0, "prefill", "inferred", 900), (1, "decode", "inferred", 1), (2, "decode", "inferred", 1),
        (3, "decode", "inferred", 1)]
    assert [(s["graph_kernels"], s["eager_kernels"]) for s in meta["steps"]] == [(0, 2)] + [(2, 0)] * 3
    t = to_table(rows).to_pandas()
    k = t[t["kind"] == "kernel"]
    assert k["phase"].astype(str).tolist() == ["prefill"] * 2 + ["decode"] * 6
