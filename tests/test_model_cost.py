"""Model-level accounting per step and phase, and the gap to ideal from model bytes: numbers by hand."""
import json
import math

import numpy as np
import pandas as pd
import pytest

from rooftop.analysis import analyze
from rooftop.analysis.step_cost import (Workload, attended_pairs, expected_experts, experts_touched, kv_read_bytes,
                                         kv_write_bytes, step_flops, weight_bytes)
from rooftop_cli import main
from rooftop.llm.config import load_spec
from rooftop.trace import load_trace, write_trace
from test_models import LLAMA3_8B, MIXTRAL, QWEN3_30B_A3B, write

H100_BW = 3.35e12
H100_FLOPS = 989.4e12

# Llama-3-8B by hand: 32 layers of 218,112,000 params, final norm 4096, LM head 128256·4096 (the
# embedding is a gather); bf16 -> 15,009,849,344 bytes. KV: 2·32 layers·8 heads·128·2 B = 131,072 B/token.
L8B_WEIGHTS = 2 * (32 * 218_112_000 + 4_096 + 128_256 * 4_096)
L8B_KV_TOKEN = 2 * 32 * 8 * 128 * 2


@pytest.fixture
def llama(tmp_path):
    return load_spec(write(tmp_path, LLAMA3_8B))


def test_llama3_8b_decode_step(llama):
    assert L8B_WEIGHTS == 15_009_849_344 and L8B_KV_TOKEN == 131_072
    total = weight_bytes(llama, 1) + kv_read_bytes(llama, 1, 2048) + kv_write_bytes(llama, 1)
    assert total == L8B_WEIGHTS + 2048 * L8B_KV_TOKEN + L8B_KV_TOKEN == 15_278_415_872
    assert total / 1e9 == pytest.approx(15.29, abs=0.015)     # 15.28 GB
    assert total / H100_BW * 1e3 == pytest.approx(4.56, abs=0.005)  # ms at 3.35 TB/s
    # FLOPs: 2 x 7,504,924,672 active params + attention 4·32 heads·128·2048 keys·32 layers
    flops = step_flops(llama, 1, [(1, 1, 2048)])
    assert flops == 2 * 7_504_924_672 + 4 * 32 * 128 * 2048 * 32


def test_llama3_8b_prefill_flops(llama):
    # 2048-token prefill: 2·N_layers·T + the LM head for the last token + causal attention
    # S(S+1)/2 pairs (reference: 2·S²·d·heads·layers ≈ 1.10 TFLOP)
    flops = step_flops(llama, 2048, [(1, 2048, 2048)])
    layers = 32 * 218_112_000 + 4_096
    pairs = 2048 * 2049 // 2
    assert flops == 2 * layers * 2048 + 2 * 128_256 * 4_096 + 4 * 32 * 128 * pairs * 32
    assert flops / 1e12 == pytest.approx(28.59 + 1.10, abs=0.01)


def test_expected_experts_touched():
    # Qwen3-30B-A3B: 128 experts, top-8. (15/16)^16 = 0.356074 by hand
    assert expected_experts(128, 8, 1) == pytest.approx(8)
    assert expected_experts(128, 8, 16) == pytest.approx(128 * (1 - 0.3560741), rel=1e-6)  # 82.42
    assert expected_experts(128, 8, 1000) == pytest.approx(128, abs=1e-9)
    # Mixtral: 8 experts, top-2; (3/4)^16 = 43046721 / 4294967296
    assert expected_experts(8, 2, [1, 16, 1000]) == pytest.approx([2, 8 * (1 - 43046721 / 4294967296), 8])


def test_moe_weight_bytes(tmp_path):
    spec = load_spec(write(tmp_path, MIXTRAL))
    attn = 4096 * 128 * 80 + 2 * 4096
    router = 4096 * 8
    expert = 3 * 4096 * 14336
    tail = 4096 + 32000 * 4096
    for t in (1, 16):
        touched = 8 * (1 - 0.75 ** t)
        assert weight_bytes(spec, t) == pytest.approx(2 * (32 * (attn + router + touched * expert) + tail))
    assert weight_bytes(spec, 1) == 2 * (32 * (attn + router + 2 * expert) + tail)


def test_tp_and_ep_shares(tmp_path, llama):
    tp2 = load_spec(write(tmp_path, LLAMA3_8B), tp=2)
    # attention, MLP and LM head split in two; norms on every rank
    per_rank = 2 * (32 * (41_943_040 / 2 + 176_160_768 / 2 + 8_192) + 4_096 + 128_256 * 4_096 / 2)
    assert weight_bytes(tp2, 1) == per_rank == 7_505_190_912
    assert kv_write_bytes(tp2, 1) == L8B_KV_TOKEN / 2
    # 16 ranks for 8 KV heads: each rank still holds one head
    tp16 = load_spec(write(tmp_path, LLAMA3_8B), tp=16)
    assert kv_write_bytes(tp16, 1) == L8B_KV_TOKEN / 8
    q3 = load_spec(write(tmp_path, QWEN3_30B_A3B, "q.json"), ep=4)
    # 32 experts per rank: 1 token touches 8 of 128, 2 of them here on average; 1000 tokens all 32
    assert experts_touched(q3, [1, 1000]) == pytest.approx([2, 32])
    expert = 2 * 3 * 2048 * 768  # whole experts on their rank (not split by TP)
    q1 = load_spec(write(tmp_path, QWEN3_30B_A3B, "q.json"))
    assert weight_bytes(q1, 1) - weight_bytes(q3, 1) == pytest.approx(48 * (8 - 2) * expert)


def test_sliding_window_pairs_and_kv():
    assert attended_pairs(1, 2048) == 2048
    assert attended_pairs(4, 4) == 10
    # window 3 over 5 tokens: keys 1, 2, 3, 3, 3
    assert attended_pairs(5, 5, window=3) == 12
    assert attended_pairs(1, 2048, window=128) == 128


def k(name, start, dur, path, **kw):
    return dict(kind="kernel", name=name, start_ns=start, dur_ns=dur, path=path, device=0, stream=7, **kw)


def graph_trace(tmp_path, steps, n_steps=3, name="g.parquet"):
    """Decode steps of 30 kernels of 200 us with 20 us gaps (6.58 ms span, 6.0 ms busy) and no
    per-kernel costs, as a CUDA-graph replay looks."""
    rows, t = [], 0
    for s in range(n_steps):
        for j in range(30):
            rows.append(k(f"k{j % 5}", t, 200_000, f"decode/step={s}"))
            t += 220_000
        t += 100_000
    meta = {"device": {"name": "NVIDIA H100 80GB HBM3"}, "steps": steps}
    return load_trace(write_trace(tmp_path / name, rows, meta))


def test_step_and_phase_model_mbu(tmp_path, llama):
    t = graph_trace(tmp_path, [{"phase": "decode", "index": i, "batch": 1, "new_tokens": 1} for i in range(3)])
    a = analyze(t, model=llama)
    st = a.steps
    # the context is not in the trace: a lower bound, the weights of one token and its KV write
    assert set(st["model_reason"]) == {"context unknown (the trace does not say; pass --context C)"}
    assert set(st["model_bound"]) == {">="} and st["model_bytes"].tolist() == [15_009_849_344 + L8B_KV_TOKEN] * 3
    assert st["model_kv_read_bytes"].isna().all() and a.phases.set_index("phase").loc["decode", "model_bound"] == ">="
    a = analyze(t, model=llama, workload=Workload(context=2048))
    st = a.steps
    total = 15_278_415_872
    assert st["model_bytes"].tolist() == [total] * 3
    assert st["model_mbu"].iloc[0] == pytest.approx(total / 6.58e-3 / H100_BW)       # over the span
    assert st["model_mbu_busy"].iloc[0] == pytest.approx(total / 6.0e-3 / H100_BW)   # over busy time
    flops = 2 * 7_504_924_672 + 4 * 32 * 128 * 2048 * 32
    assert st["model_mfu"].iloc[0] == pytest.approx(flops / 6.58e-3 / H100_FLOPS)
    assert st["workload_source"].iloc[0] == "trace+flags" and st["context"].iloc[0] == 2048
    ph = a.phases.set_index("phase").loc["decode"]
    assert ph["model_steps"] == 3 and ph["model_bytes"] == 3 * total
    assert ph["model_mbu"] == pytest.approx(3 * total / (3 * 6.58e-3) / H100_BW)
    assert ph["tokens_per_s"] == pytest.approx(3 / (3 * 6.58e-3))


def test_no_model_no_number(tmp_path):
    t = graph_trace(tmp_path, [{"phase": "decode", "index": i, "batch": 1, "new_tokens": 1, "context": 9}
                               for i in range(3)])
    a = analyze(t)
    assert a.steps["model_mbu"].isna().all() and a.steps["model_reason"].iloc[0].startswith("no model")
    assert math.isnan(a.phases["model_mbu"].iloc[0]) and a.model_summary is None


def test_vllm_style_steps_split_prefill_and_decode(tmp_path, llama):
    # execute_context_1(100)_generation_3(3): one 100-token prefill chunk and 3 decoding sequences
    steps = [{"phase": "prefill", "index": 0, "prefill_requests": 1, "prefill_tokens": 100, "decode_requests": 3,
              "decode_tokens": 3, "new_tokens": 103, "batch": 4}]
    rows = [k("g", 0, 1_000_000, "prefill/step=0")]
    t = load_trace(write_trace(tmp_path / "v.parquet", rows, {"device": {"name": "NVIDIA H100 80GB HBM3"},
                                                               "steps": steps}))
    a = analyze(t, model=llama, workload=Workload(context=500))
    s = a.steps.iloc[0]
    # KV read: 3 decoding sequences x 500 tokens + the prefill chunk's own 100; written: 103 tokens
    assert s["model_kv_read_bytes"] == (3 * 500 + 100) * L8B_KV_TOKEN
    assert s["model_kv_write_bytes"] == 103 * L8B_KV_TOKEN
    pairs = 3 * 500 + 100 * 101 // 2
    linear = 2 * (32 * 218_112_000 + 4_096) * 103 + 2 * 4 * 128_256 * 4_096  # LM head once per sequence
    assert s["model_flops"] == linear + 4 * 32 * 128 * 32 * pairs
    assert s["batch"] == 4 and s["new_tokens"] == 103


def test_gap_from_model_bytes(tmp_path, llama):
    t = graph_trace(tmp_path, [{"phase": "decode", "index": i, "batch": 1, "new_tokens": 1, "context": 2048}
                               for i in range(3)])
    a = analyze(t, model=llama)
    ideal = 15_278_415_872 / H100_BW * 1e9  # 4.56 ms: the whole step at the HBM roof
    gs = a.gap_steps
    assert list(gs["basis"]) == ["model"] * 3
    s = gs.iloc[0]
    assert s["measured_ns"] == 6_580_000 and s["launch_gaps_ns"] == 580_000
    assert s["ideal_ns"] == pytest.approx(ideal) and s["slow_kernels_ns"] == pytest.approx(6_000_000 - ideal)
    assert s["unmodeled_ns"] == 0 and s["extra_bytes_ns"] == 0
    g = a.gap.set_index("phase").loc["decode"]
    assert g["basis"] == "model" and g["ideal_ns"] == pytest.approx(3 * ideal)
    assert g["ideal_ns"] + g["slow_kernels_ns"] + g["launch_gaps_ns"] == pytest.approx(g["measured_ns"])
    # without a model nothing is costed: the parts are unknown (never 0) and the reason names --model
    g = analyze(t).gap.set_index("phase").loc["decode"]
    assert g["basis"] is None and pd.isna(g["ideal_ns"]) and pd.isna(g["slow_kernels_ns"])
    assert "no kernel has per-kernel costs" in g["basis_reason"] and "--model" in g["basis_reason"]


def test_gap_prefers_kernel_costs_where_they_cover_the_step(tmp_path, llama):
    rows = [k("gemv", 0, 10_000_000, "decode/step=0", model_bytes=15e9, model_flops=1e6),
            k("norm", 10_000_000, 1_000_000, "decode/step=0")]
    t = load_trace(write_trace(tmp_path / "c.parquet", rows, {
        "device": {"name": "NVIDIA H100 80GB HBM3"},
        "steps": [{"phase": "decode", "index": 0, "batch": 1, "new_tokens": 1, "context": 2048}]}))
    s = analyze(t, model=llama).gap_steps.iloc[0]
    assert s["basis"] == "kernels" and s["kernel_coverage"] == pytest.approx(10 / 11)
    assert s["ideal_ns"] == pytest.approx(15e9 / H100_BW * 1e9) and s["unmodeled_ns"] == 1_000_000


def test_cli_report_with_model(tmp_path, capsys):
    graph_trace(tmp_path, [{"phase": "decode", "index": i, "batch": 1, "new_tokens": 1} for i in range(3)])
    cfg = write(tmp_path, LLAMA3_8B, "llama.json")
    trace = str(tmp_path / "g.parquet")
    assert main(["report", trace, "--model", cfg, "--context", "2048", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["model"]["parameters"] == 8_030_261_248 and doc["model"]["bytes_per_param"] == 2.0
    assert doc["steps"][0]["model_bytes"] == 15_278_415_872
    assert doc["phases"][0]["model_mbu"] == pytest.approx(15_278_415_872 / 6.58e-3 / H100_BW)
    assert doc["gap"][0]["basis"] == "model" and len(doc["gap_steps"]) == 3
    assert main(["report", trace, "--model", cfg, "--context", "2048"]) == 0
    text = capsys.readouterr().out
    head = text.index("decode   model MBU 69.3%")  # the headline, before the phase table
    assert head < text.index("phase   steps") and "15.3 GB/step" in text and "ideal 4.56 ms" in text
    assert main(["report", trace, "--model", cfg]) == 0
    out = capsys.readouterr().out
    assert "decode   model MBU >= " in out and "a lower bound, weights and KV written only" in out
    assert "context unknown (the trace does not say; pass --context C)" in out


def test_cli_bad_model_is_one_line(tmp_path, capsys):
    graph_trace(tmp_path, [])
    trace = str(tmp_path / "g.parquet")
    bad = write(tmp_path, {**LLAMA3_8B, "q_lora_rank": 1536}, "mla.json")
    for cmd in (["report", trace], ["diff", trace, trace], ["open", trace]):
        assert main([*cmd, "--model", bad]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "mla.json" in err and "q_lora_rank" in err
    assert main(["report", trace, "--tp", "2"]) == 2
    assert "pass --model" in capsys.readouterr().err
    assert main(["report", trace, "--model", "llama3-8b", "--batch", "0"]) == 2


def test_diff_with_model(tmp_path, capsys):
    graph_trace(tmp_path, [{"phase": "decode", "index": i, "batch": 1, "new_tokens": 1} for i in range(3)])
    trace = str(tmp_path / "g.parquet")
    assert main(["diff", trace, trace, "--model", "llama3-8b", "--context", "2048", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    row = doc["phases"][0]
    assert row["model_mbu_a"] == pytest.approx(15_278_415_872 / 6.58e-3 / H100_BW)
    assert np.isclose(row["model_mbu_ratio"], 1.0)


def test_qwen3_moe_prefill_worked_example(tmp_path):
    """The README's second worked example: one 2,048-token prompt through Qwen3-30B-A3B in bf16."""
    spec = load_spec(write(tmp_path, QWEN3_30B_A3B))
    assert experts_touched(spec, [1, 16, 2048]) == pytest.approx([8, 82.4225, 128], abs=1e-4)
    layer = 2048 * 128 * 72 + 4_352 + 262_144 + 128 * 3 * 2048 * 768
    assert layer == 623_120_640
    weights = 2 * (48 * layer + 2_048 + 151_936 * 2_048)
    assert weight_bytes(spec, 2048) == pytest.approx(weights, rel=1e-12) and weights == 60_441_915_392
    kv = 2048 * 2 * 48 * 4 * 128 * 2
    total = weight_bytes(spec, 2048) + kv_read_bytes(spec, 1, 2048) + kv_write_bytes(spec, 2048)
    assert total == pytest.approx(weights + 2 * kv) and (weights + 2 * kv) / 1e9 == pytest.approx(60.84, abs=0.005)
    active = 48 * (2048 * 128 * 72 + 4_352 + 262_144 + 8 * 3 * 2048 * 768) + 2_048
    assert active == 2_730_702_848
    flops = 2 * 2048 * active + 2 * 151_936 * 2_048 + 4 * 32 * 128 * (2048 * 2049 // 2) * 48
    assert step_flops(spec, 2048, [(1, 2048, 2048)]) == flops
    assert flops / 1e12 == pytest.approx(12.84, abs=0.005) and flops / (weights + 2 * kv) == pytest.approx(211, abs=0.5)


def test_unknown_device_keeps_bytes_and_says_why_no_mbu(tmp_path, capsys):
    t = graph_trace(tmp_path, [{"phase": "decode", "index": i, "batch": 1, "new_tokens": 1, "context": 2048}
                               for i in range(3)])
    meta = dict(t.meta, device={"name": "Tesla P4"})
    path = write_trace(tmp_path / "t4.parquet", t.events, meta)
    a = analyze(load_trace(path), model=load_spec("llama3-8b"))
    assert a.steps["model_bytes"].tolist() == [15_278_415_872] * 3  # the bytes do not need a peak
    assert a.steps["model_mbu"].isna().all()
    assert main(["report", str(path), "--model", "llama3-8b"]) == 0
    assert "model MBU —: no peak bandwidth" in capsys.readouterr().out


VLLM_GB10 = ("traces/Navi-AI-Lab__nvllm__benchmarks__nvllm__traces__cute_paged_attn__2026-04-13-nsys__"
             "rank0.1776116491109655086.pt.trace.json.gz")
QWEN25_7B = {"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
             "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064, "tie_word_embeddings": False,
             "torch_dtype": "bfloat16"}


def test_vllm_capture_gets_model_bytes_per_decode_step(fixtures_dir, tmp_path):
    """The real vLLM capture (GB10, steps `execute_context_0(0)_generation_4(4)`): with a dense
    config and `--context 1024`, every decode step has its model bytes, by hand: Qwen2.5-7B weights
    2 x 7,070,619,136 + KV 57,344 B/token x (4 x 1024 read + 4 written)."""
    pytest.importorskip("rooftop.trace.steps", reason="vLLM step names are parsed by rooftop.trace.steps")
    from collectors.open import open_trace

    a = analyze(open_trace(str(fixtures_dir / VLLM_GB10)), model=load_spec(write(tmp_path, QWEN25_7B)),
                workload=Workload(context=1024))
    dec = a.steps[a.steps["phase"] == "decode"]
    assert len(dec) > 0 and (dec["batch"] == 4).all() and (dec["new_tokens"] == 4).all()
    assert dec["model_bytes"].tolist() == [2 * 7_070_619_136 + 57_344 * (4 * 1024 + 4)] * len(dec)
    if a.peaks.bw:  # GB10 in the spec table: a model MBU per decode step
        assert dec["model_mbu"].notna().all() and (dec["model_mbu"] < 1).all()
    else:
        assert dec["model_mbu"].isna().all()


def test_diff_text_shows_model_mbu(tmp_path, capsys):
    graph_trace(tmp_path, [{"phase": "decode", "index": i, "batch": 1, "new_tokens": 1} for i in range(3)])
    trace = str(tmp_path / "g.parquet")
    assert main(["diff", trace, trace, "--model", "llama3-8b", "--context", "2048"]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if "model_mbu" in l)
    assert line.split()[2:] == ["69.3%", "69.3%", "1.00x"]


def test_open_with_model_shows_the_model_headline(tmp_path):
    """`rooftop open TRACE --model ...`: the Overview carries the model-level lines the report prints."""
    pytest.importorskip("textual")
    import asyncio

    from tui.app import RooftopApp

    graph_trace(tmp_path, [{"phase": "decode", "index": i, "batch": 1, "new_tokens": 1} for i in range(3)])

    async def run():
        app = RooftopApp([str(tmp_path / "g.parquet")], model=load_spec("llama3-8b"), workload=Workload(context=2048))
        async with app.run_test(size=(140, 50)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            widget = app.screen.query_one("#model-level")
            content = widget.render()
            return getattr(content, "plain", None) or str(content)
    text = asyncio.run(run())
    assert "decode   model MBU 69.3%" in text and "15.3 GB/step" in text


def test_request_counts_without_prefill_tokens(tmp_path, llama):
    """TensorRT-LLM names count requests only: a prefill request's tokens are unknown unless the step's
    total says (`--new-tokens`), never taken as 0."""
    steps = [{"phase": "prefill", "index": 0, "prefill_requests": 2, "decode_requests": 0, "batch": 2}]
    rows = [k("g", 0, 1_000_000, "prefill/step=0")]
    t = load_trace(write_trace(tmp_path / "r.parquet", rows, {"device": {"name": "NVIDIA H100 80GB HBM3"},
                                                               "steps": steps}))
    s = analyze(t, model=llama).steps.iloc[0]
    # unknown tokens: the weights one token reads, a lower bound
    assert s["model_bytes"] == 15_009_849_344 and s["model_bound"] == ">="
    assert s["model_reason"] == "new tokens unknown (the trace does not say; pass --new-tokens T)"
    s = analyze(t, model=llama, workload=Workload(new_tokens=512)).steps.iloc[0]
    # two prompts of 256 tokens, each attending to its own tokens
    assert s["model_kv_read_bytes"] == 512 * L8B_KV_TOKEN and s["model_kv_write_bytes"] == 512 * L8B_KV_TOKEN
    assert s["model_flops"] == (2 * (32 * 218_112_000 + 4_096) * 512 + 2 * 2 * 128_256 * 4_096
                                + 4 * 32 * 128 * 32 * 2 * (256 * 257 // 2))


def test_model_above_the_roof_is_called_a_mismatch(tmp_path, capsys):
    graph_trace(tmp_path, [{"phase": "decode", "index": i, "batch": 1, "new_tokens": 1} for i in range(3)])
    # a 70B model cannot be read in 6.58 ms at 3.35 TB/s (141 GB would take 42 ms)
    assert main(["report", str(tmp_path / "g.parquet"), "--model", "llama3-70b", "--context", "2048"]) == 0
    assert "above the HBM roof" in capsys.readouterr().out


def test_missing_inputs_named_together_and_a_weights_only_lower_bound(tmp_path, llama):
    """A step whose metadata says nothing: every missing input in one message, and the weights a step of
    at least one token reads as a lower bound (labelled `>=`), never a silent null."""
    t = graph_trace(tmp_path, [{"phase": "decode", "index": i} for i in range(3)])
    st = analyze(t, model=llama).steps
    assert set(st["model_reason"]) == {"batch, new tokens, context unknown (the trace does not say; pass "
                                       "--batch B --new-tokens T --context C)"}
    assert st["model_bytes"].tolist() == [15_009_849_344] * 3 and set(st["model_bound"]) == {">="}
    st = analyze(t, model=llama, workload=Workload(batch=1, new_tokens=1, context=2048)).steps
    assert st["model_bound"].isna().all() and st["model_bytes"].tolist() == [15_278_415_872] * 3


def test_inferred_prefill_tokens_give_exact_bytes(tmp_path, llama):
    """A prefill step whose tokens came from its kernel grids (rooftop.trace.steps.infer_phases) and whose
    requests are unknown: a fresh prefill's KV read is its own tokens whatever the batch, so the bytes
    are exact; the attention FLOPs (which depend on the split into sequences) are not claimed."""
    steps = [{"phase": "prefill", "index": 0, "new_tokens": 1049, "phase_source": "inferred",
              "workload_inferred": True}]
    rows = [k("g", 0, 1_000_000, "prefill/step=0")]
    t = load_trace(write_trace(tmp_path / "r.parquet", rows, {"device": {"name": "NVIDIA H100 80GB HBM3"},
                                                               "steps": steps}))
    s = analyze(t, model=llama).steps.iloc[0]
    assert s["model_kv_read_bytes"] == 1049 * L8B_KV_TOKEN and s["model_kv_write_bytes"] == 1049 * L8B_KV_TOKEN
    assert pd.isna(s["model_bound"]) and math.isnan(s["model_flops"])
    assert "tokens from kernel grids" in s["workload_source"] and "fresh prefill" in s["workload_source"]
