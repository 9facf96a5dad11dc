"""The definitions of docs/definitions.md, checked on small traces whose numbers are worked out by hand."""
import math

import numpy as np
import pandas as pd
import pytest

from rooftop.analysis import analyze, compare
from rooftop.llm.shapes import preset
from rooftop.trace import load_trace, write_trace

H100_FLOPS = 989.4e12
H100_BW = 3.35e12


def k(name, start, dur, path, **kw):
    return dict(kind="kernel", name=name, start_ns=start, dur_ns=dur, path=path, device=0, stream=kw.pop("stream", 7), **kw)


def build(tmp_path, rows, name="t.parquet", **meta):
    base = {"device": {"name": "NVIDIA H100 80GB HBM3"}, "workload": {"batch": 1, "dtype": "bf16"}}
    base.update(meta)
    return load_trace(write_trace(tmp_path / name, rows, base))


@pytest.fixture
def trace(tmp_path):
    rows = [
        k("prefill_gemm", 0, 1000, "prefill/step=0/layer=0/mlp", model_flops=4e12 * 1e-6, model_bytes=1e6),
        # decode step 0: two kernels overlap on another stream -> busy 250 of span 300
        k("gemv_a", 10_000, 100, "decode/step=0/layer=0/mlp", model_flops=1e4, model_bytes=1000),
        k("gemv_b", 10_150, 100, "decode/step=0/layer=0/mlp", model_flops=1e4, model_bytes=2000),
        k("gemv_b", 10_200, 100, "decode/step=0/layer=1/mlp", model_flops=1e4, model_bytes=3000, stream=8),
        # decode step 1: measured counters on both kernels
        k("gemv_a", 20_000, 100, "decode/step=1/layer=0/mlp", model_flops=1e4, model_bytes=1000,
          counters=True, dram_read=500.0, dram_write=500.0, flops=100.0),
        k("gemv_b", 20_100, 100, "decode/step=1/layer=0/mlp", model_flops=1e4, model_bytes=1000,
          counters=True, dram_read=400.0, dram_write=600.0, flops=100.0),
    ]
    steps = [{"phase": "prefill", "index": 0, "batch": 1, "new_tokens": 16, "context": 16},
             {"phase": "decode", "index": 0, "batch": 1, "new_tokens": 1, "context": 16},
             {"phase": "decode", "index": 1, "batch": 1, "new_tokens": 1, "context": 17}]
    return build(tmp_path, rows, steps=steps)


def test_step_span_busy_idle(trace):
    st = analyze(trace).steps.set_index(["phase", "step"])
    s0 = st.loc[("decode", 0)]
    assert s0["span_ns"] == 300          # 10_300 - 10_000
    assert s0["busy_ns"] == 250          # [0,100) U [150,300)
    assert s0["idle_ns"] == 50
    assert s0["idle_frac"] == pytest.approx(50 / 300)
    assert s0["kernels"] == 3


def test_bytes_source_and_rates(trace):
    st = analyze(trace).steps.set_index(["phase", "step"])
    s0, s1 = st.loc[("decode", 0)], st.loc[("decode", 1)]
    assert s0["bytes"] == 6000 and s0["bytes_source"] == "model"
    assert s1["bytes"] == 2000 and s1["bytes_source"] == "measured"   # 500+500 + 400+600
    assert s1["flops"] == 200                                         # measured FLOPs win over model
    # achieved bandwidth = bytes / span; MBU = that / peak
    assert s0["tbps"] == pytest.approx(6000 / 300e-9 / 1e12)
    assert s0["mbu"] == pytest.approx(6000 / 300e-9 / H100_BW)
    assert s0["mfu"] == pytest.approx(3e4 / 300e-9 / H100_FLOPS)
    assert s0["tokens_per_s"] == pytest.approx(1 / 300e-9)


def test_phase_table_sums_steps(trace):
    ph = analyze(trace).phases.set_index("phase")
    d = ph.loc["decode"]
    assert d["steps"] == 2
    assert d["span_ns"] == 500 and d["busy_ns"] == 450
    assert d["bytes"] == 8000 and d["bytes_source"] == "mixed"
    assert d["mbu"] == pytest.approx(8000 / 500e-9 / H100_BW)
    assert d["tokens"] == 2
    # AI = 30200 / 8000 << 295, but each 100 ns kernel moves its bytes at < 1% of the bandwidth:
    # short and far under both roofs, every kernel is latency-bound, and so is the phase (the
    # time-weighted mix of its kernels' own verdicts)
    assert d["bound"] == "latency" and d["bound_mix"]["latency"]["time_share"] == 1.0
    assert list(ph.index) == ["prefill", "decode"]  # in time order


def test_model_mbu_databricks(tmp_path):
    cfg = preset("tiny")
    rows = [k("gemv", 0, 1000, "decode/step=0/layer=0/mlp", model_bytes=1.0)]
    t = build(tmp_path, rows, model=cfg.to_meta("bf16"),
              steps=[{"phase": "decode", "index": 0, "batch": 2, "new_tokens": 2, "context": 100}])
    st = analyze(t).steps.iloc[0]
    # (parameter bytes read + KV bytes read for the context + KV written for the 2 new tokens) / span / peak
    h, layers, kvh, d = 256, 2, 2, 32
    layer_params = h * d * (2 * 8 + 2 * kvh) + 3 * h * 688 + 2 * h
    weights = 2 * (layers * layer_params + h + 1000 * h)
    kv = 2 * 100 * (2 * layers * kvh * d * 2) + 2 * (2 * layers * kvh * d * 2)
    assert st["model_mbu"] == pytest.approx((weights + kv) / 1e-6 / H100_BW)


def test_unknown_device_leaves_mbu_null(tmp_path):
    rows = [k("gemv", 0, 1000, "decode/step=0", model_bytes=1e6, model_flops=1e6)]
    t = build(tmp_path, rows, device={"name": "Tesla P4"})
    a = analyze(t)
    assert a.peaks.bw is None and "P4" in a.peaks.reason
    assert math.isnan(a.phases.iloc[0]["mbu"])
    assert a.phases.iloc[0]["tbps"] == pytest.approx(1e6 / 1e-6 / 1e12)  # achieved is still known
    assert any(f.id == "no-peaks" for f in a.findings)


def test_groups_and_roofline(trace):
    a = analyze(trace)
    g = a.groups("short_name").set_index("key")
    assert g.loc["gemv_b", "count"] == 3
    assert g.loc["gemv_b", "time_ns"] == 300
    total = 1000 + 5 * 100
    assert g.loc["gemv_b", "time_share"] == pytest.approx(300 / total)
    # gemv_b bytes: model 2000 + 3000, measured 1000 -> 6000, mixed
    assert g.loc["gemv_b", "bytes"] == 6000 and g.loc["gemv_b", "bytes_source"] == "mixed"
    assert g.loc["gemv_b", "ai"] == pytest.approx((2e4 + 100) / 6000)
    # short (100 ns) and far under the roof -> latency-bound
    assert g.loc["gemv_b", "bound"] == "latency"
    pts = a.roofline()
    assert set(pts["key"]) == {"prefill_gemm", "gemv_a", "gemv_b"}
    cat = a.groups("category").set_index("key")
    assert list(cat.index) == ["gemm"] and cat.loc["gemm", "count"] == 6   # gemv and gemm are both GEMM-like


def test_compute_bound_prefill_pct_of_roof(tmp_path):
    # 1 ms kernel with AI = 1000 (compute side): attainable = peak; achieved = 4e11 FLOP / 1 ms
    rows = [k("big_gemm", 0, 1_000_000, "prefill/step=0", model_flops=4e11, model_bytes=4e8)]
    a = analyze(build(tmp_path, rows))
    g = a.groups().iloc[0]
    assert g["ai"] == pytest.approx(1000)
    assert g["bound"] == "compute"
    assert g["pct_of_roof"] == pytest.approx(4e14 / H100_FLOPS)
    ids = {f.id for f in a.findings}
    assert "prefill-mfu" in ids


def test_launch_gap_findings(tmp_path):
    # 2 kernels of 1 us with 3 us between them: 60% of the step is gaps -> launch-bound
    rows = [k("gemv", 0, 1000, "decode/step=0", model_bytes=1e6, model_flops=1e6),
            k("gemv", 4000, 1000, "decode/step=0", model_bytes=1e6, model_flops=1e6)]
    a = analyze(build(tmp_path, rows))
    f = {x.id: x for x in a.findings}
    assert "decode-launch-bound" in f
    assert "60%" in f["decode-launch-bound"].title and "CUDA graphs" in f["decode-launch-bound"].title


def test_mbu_findings_healthy_and_wrong_gauge(tmp_path):
    # 2.5e9 bytes in 1 ms = 2.5 TB/s = 74.6% of 3.35 TB/s
    rows = [k("gemv", 0, 1_000_000, "decode/step=0", model_bytes=2.5e9, model_flops=5e9)]
    a = analyze(build(tmp_path, rows))
    f = {x.id: x for x in a.findings}
    assert f["decode-mbu"].title == "decode is memory-bound and running at 74.6% MBU (healthy)"
    assert "wrong gauge" in f["decode-mfu-gauge"].title


def test_stall_shares_duration_weighted(tmp_path):
    # kernel A (300 ns): long_scoreboard 3, selected 1 -> 0.75 / 0.25
    # kernel B (100 ns): math_pipe_throttle 1, selected 1 -> 0.5 / 0.5
    rows = [k("A", 0, 300, "decode/step=0", counters=True, stall_long_scoreboard=3.0, stall_selected=1.0),
            k("B", 300, 100, "decode/step=0", counters=True, stall_math_pipe_throttle=1.0, stall_selected=1.0)]
    a = analyze(build(tmp_path, rows))
    sh = a.stalls("phase").loc["decode"]
    assert sh["long_scoreboard"] == pytest.approx(0.75 * 300 / 400)
    assert sh["selected"] == pytest.approx((0.25 * 300 + 0.5 * 100) / 400)
    assert sh["math_pipe_throttle"] == pytest.approx(0.5 * 100 / 400)
    assert sh.sum() == pytest.approx(1.0)
    top = a.stall_top_kernels("long_scoreboard")
    assert top.iloc[0]["short_name"] == "A"
    assert any(f.id == "decode-stall" and "long_scoreboard" in f.title for f in a.findings)


def test_no_counters_no_stalls(trace):
    a = analyze(trace)
    assert a.stalls("phase") is None or a.stalls("phase").shape[0] >= 0
    # only step 1 has counters but no stall columns -> None
    assert a.stalls("phase") is None


def test_attention_verdicts(tmp_path):
    fused = [k("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64>>(Flash_fwd_params)", 0, 100,
               "prefill/step=0/layer=0/attn")]
    mat = [k("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_tn", 0, 100, "prefill/step=0/layer=0/attn", op="aten::bmm"),
           k("void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, float, 11>(...)", 100, 100,
             "prefill/step=0/layer=0/attn"),
           k("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_nn", 200, 100, "prefill/step=0/layer=0/attn", op="aten::bmm")]
    va = analyze(build(tmp_path, fused, "f.parquet")).attention
    vb = analyze(build(tmp_path, mat, "m.parquet")).attention
    assert [v.verdict for v in va] == ["fused"]
    assert [v.verdict for v in vb] == ["materialized"]
    assert vb[0].softmax_kernels == 1


def test_attention_byte_ratio_with_counters(tmp_path):
    cfg = preset("tiny")
    # minimum: b * B * (2*S*nh*d + 2*S*nkv*d) * layers with S=128, bf16
    mn = 2 * 1 * (2 * 128 * 8 * 32 + 2 * 128 * 2 * 32) * 2
    rows = [k("flash_fwd_kernel", 0, 100, "prefill/step=0/layer=0/attn", counters=True,
              dram_read=float(mn * 10), dram_write=0.0)]
    t = build(tmp_path, rows, model=cfg.to_meta("bf16"),
              steps=[{"phase": "prefill", "index": 0, "batch": 1, "new_tokens": 128, "context": 128}])
    v = analyze(t).attention[0]
    assert v.min_bytes == mn
    assert v.ratio == pytest.approx(10)
    assert v.verdict == "mixed"   # fused kernel name, but 10x the minimum bytes


def test_gap_to_ideal_adds_up(tmp_path):
    # one kernel at 10 us whose roofline time is 3.35e7 B / 3.35e12 = 10 us... make it 2x slower
    rows = [k("gemv", 0, 20_000, "decode/step=0", model_bytes=3.35e7, model_flops=0.0),
            k("norm", 25_000, 5_000, "decode/step=0")]
    a = analyze(build(tmp_path, rows))
    g = a.gap.set_index("phase").loc["decode"]
    assert g["measured_ns"] == 30_000
    assert g["ideal_ns"] == pytest.approx(10_000)
    assert g["slow_kernels_ns"] == pytest.approx(10_000)
    assert g["launch_gaps_ns"] == 5_000
    assert g["unmodeled_ns"] == 5_000
    assert g["ideal_ns"] + g["slow_kernels_ns"] + g["extra_bytes_ns"] + g["launch_gaps_ns"] + g["unmodeled_ns"] == \
        pytest.approx(g["measured_ns"])


def test_range_tree(trace):
    tree = analyze(trace).range_tree("decode", 0)
    assert list(tree["path"]) == ["decode", "decode/step=0", "decode/step=0/layer=0", "decode/step=0/layer=0/mlp",
                                  "decode/step=0/layer=1", "decode/step=0/layer=1/mlp"]
    node = tree.set_index("path").loc["decode/step=0/layer=0/mlp"]
    assert node["kernels"] == 2 and node["kernel_ns"] == 200 and node["dur_ns"] == 250


def test_range_tree_counts_copies_apart(tmp_path):
    rows = [k("gemv", 0, 100, "decode/step=0/layer=0"),
            dict(kind="memcpy", name="Memcpy HtoD", start_ns=150, dur_ns=20, path="decode/step=0/layer=0", device=0,
                 stream=7)]
    node = analyze(build(tmp_path, rows)).range_tree("decode", 0).set_index("path").loc["decode/step=0/layer=0"]
    assert (node["kernels"], node["copies"], node["kernel_ns"]) == (1, 1, 120)


def test_range_tree_deep_nesting_is_linear(tmp_path):
    # 3,000 nested ranges: the depth-first walk must neither recurse (Python's limit is 1,000) nor copy
    path = "decode/step=0/" + "/".join(f"r{i}" for i in range(3000))
    tree = analyze(build(tmp_path, [k("gemv", 0, 100, path)])).range_tree("decode", 0)
    assert len(tree) == 3002 and list(tree["depth"]) == list(range(3002))


def test_compare(tmp_path, trace):
    rows = [k("gemv_a", 0, 50, "decode/step=0"), k("new_kernel", 50, 50, "decode/step=0")]
    b = analyze(build(tmp_path, rows, "b.parquet"))
    d = compare(analyze(trace), b)
    g = d.groups.set_index("key")
    assert g.loc["gemv_a", "time_ns_a"] == 200 and g.loc["gemv_a", "time_ns_b"] == 50
    assert g.loc["gemv_a", "time_delta"] == -150
    assert g.loc["new_kernel", "status"] == "only in B"
    p = d.phases.set_index("phase")
    assert p.loc["decode", "span_ns_a"] == 500 and p.loc["decode", "span_ns_b"] == 100


def test_kv_append_named_flash_is_not_attention(tmp_path):
    rows = [k("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16>(...)", 0, 100, "decode/step=0/layer=0/attn"),
            k("void (anonymous namespace)::softmax_warp_forward<float>(...)", 100, 100, "decode/step=0/layer=0/attn")]
    v = analyze(build(tmp_path, rows)).attention
    assert [x.verdict for x in v] == ["materialized"] and v[0].fused_kernels == 0
    # the KV write is KV-cache work, not a call; the lone softmax is a call by name only
    assert v[0].kv_cache_kernels == 1 and v[0].calls == 1 and not v[0].confirmed


def test_percent_of_datasheet_and_of_measured(tmp_path):
    # 1.675e9 B in 1 ms = 1.675 TB/s: 50% of the 3.35 TB/s datasheet, 62.5% of a measured 2.68 TB/s
    rows = [k("gemv", 0, 1_000_000, "decode/step=0", model_bytes=1.675e9, model_flops=1e9)]
    dev = {"name": "NVIDIA H100 80GB HBM3", "peaks": {"measured": {"bw": 2.68e12, "flops": 800e12, "dtype": "bf16"}}}
    a = analyze(build(tmp_path, rows, device=dev))
    d = a.phases.set_index("phase").loc["decode"]
    assert a.peaks.source == "measured"
    assert d["mbu"] == pytest.approx(0.625)
    assert d["mbu_datasheet"] == pytest.approx(0.5) and d["mbu_measured"] == pytest.approx(0.625)
    assert d["mfu_datasheet"] == pytest.approx(1e12 / H100_FLOPS) and d["mfu_measured"] == pytest.approx(1e12 / 800e12)
    ds = a.with_peaks("datasheet")
    assert ds.phases.set_index("phase").loc["decode", "mbu"] == pytest.approx(0.5)


def test_classifier_softmax_is_not_attention(tmp_path):
    # a CNN's loss softmax and a sampler's softmax over the vocabulary are not attention
    rows = [k("void cunn_SoftMaxForward<4, float>(...)", 0, 100, "ProfilerStep#3", op="aten::_softmax"),
            k("void (anonymous namespace)::softmax_warp_forward<float>(...)", 100, 100, "decode/step=0/sample",
              op="aten::_softmax"),
            k("void at::native::log_softmax_forward<float>(...)", 200, 100, "ProfilerStep#3", op="aten::_log_softmax")]
    assert analyze(build(tmp_path, rows)).attention == []


def test_multi_rank_gap_and_straggler(tmp_path):
    from rooftop.trace import load_trace, write_trace
    for r, dur in ((0, 1000), (1, 3000)):
        rows = [k("gemv", 0, dur, "decode/step=0", model_bytes=3.35e6, model_flops=0.0),
                k("gemv", 5000, dur, "decode/step=1", model_bytes=3.35e6, model_flops=0.0)]
        write_trace(tmp_path / "run" / f"rank={r}" / "trace.parquet", rows, {"device": {"name": "NVIDIA H100 80GB HBM3"}})
    a = analyze(load_trace(tmp_path / "run"))
    rs = a.rank_steps.set_index(["phase", "step"]).loc[("decode", 0)]
    assert rs["straggler"] == 1 and rs["min_ns"] == 1000 and rs["max_ns"] == 3000
    assert rs["spread"] == pytest.approx((3000 - 1000) / 2000)
    g = a.gap.set_index("phase").loc["decode"]          # rank 0 only, like the phase table
    assert g["measured_ns"] == 2000 and g["ideal_ns"] == pytest.approx(2000)   # 3.35e6 B at 3.35 TB/s = 1 us each
    assert len(a.kernels(rank=1)) == 2 and a.kernels(rank=1)["dur_ns"].sum() == 6000
    assert list(a.range_tree("decode", 1, rank=1)["path"]) == ["decode", "decode/step=1"]


def test_unconfirmed_materialized_attention_is_hedged(tmp_path):
    rows = [k("ampere_sgemm_128x64_nn", 0, 100, "ProfilerStep#1/forward", op="aten::bmm"),
            k("void (anonymous namespace)::softmax_warp_forward<float>(...)", 100, 100, "ProfilerStep#1/forward",
              op="aten::_softmax"),
            k("ampere_sgemm_128x64_nn", 200, 100, "ProfilerStep#1/forward", op="aten::bmm")]
    a = analyze(build(tmp_path, rows))
    assert [(v.verdict, v.confirmed) for v in a.attention] == [("materialized", False)]
    f = [x for x in a.findings if x.id.endswith("-attention")][0]
    # no attention range, no op shapes, no bytes: the structure is found, the verdict says "by name"
    assert f.severity == "warn" and "looks materialized" in f.title and "by name" in f.title
    assert "by name" in f.detail and a.attention[0].evidence_kind == "structure"


def test_kernel_detail_says_unknown_never_nan(tmp_path):
    # a kernel without costs (a CUDA-graph replay): every number "—", every source "unknown"
    a = analyze(build(tmp_path, [k("graph_replayed", 0, 1000, "decode/step=0")]))
    detail = {label: (value, source) for label, value, source in a.kernel_detail("graph_replayed")}
    assert not any("nan" in f"{v} {s}".lower() for v, s in detail.values())
    for label in ("FLOPs", "bytes", "arithmetic intensity", "achieved", "achieved bandwidth", "% of roof"):
        assert detail[label] == ("—", "unknown"), label
    costed = analyze(build(tmp_path, [k("gemv", 0, 1000, "decode/step=0", model_bytes=1e6, model_flops=1e6)], "c.parquet"))
    detail = {label: (value, source) for label, value, source in costed.kernel_detail("gemv")}
    assert detail["bytes"][1] == "model" and detail["% of roof"][1] == "model vs datasheet peaks"


def test_top_by_weight_picks_the_heaviest_value_and_breaks_ties_by_first_row():
    from rooftop.analysis.groups import top_by_weight

    gid = np.array([0, 0, 0, 1, 1, 1, 2, 2])
    vals = pd.Series(["decode", "prefill", "prefill", "b", "a", None, None, None])
    w = np.array([5, 3, 3, 2, 2, 9, 1, 1])
    top, distinct = top_by_weight(gid, vals, w, 3)
    # group 0: prefill 6 > decode 5; group 1: the missing value weighs most and counts; group 2: only missing
    assert top[0] == "prefill" and pd.isna(top[1]) and pd.isna(top[2])
    assert distinct.tolist() == [2, 3, 1]
    top, distinct = top_by_weight(gid, vals, w, 3, dropna=True)
    # without the missing values: b and a tie at 2, b comes first in the rows
    assert top[:2].tolist() == ["prefill", "b"] and pd.isna(top[2]) and distinct.tolist() == [2, 2, 0]
