"""The analytic model: roofline times (rooftop.analysis.ideal_time) and the predicted trace (collectors.predict).

Expected numbers are worked out by hand from the shapes (docs/definitions.md).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from collectors import predict as P
from rooftop.hardware.gpus import by_key, peaks
from rooftop.analysis.ideal_time import (LAUNCH_FLOOR_NS, attention_materialized_bytes, attention_min_bytes, kernel_bound,
                           kernel_ideal_ns)
from rooftop.llm.shapes import preset
from rooftop.trace import load_trace, write_trace

L8B = preset("llama3-8b")  # h 4096, 32 layers, 32 heads, 8 kv heads, d 128, ffn 14336, vocab 128256
H100 = by_key("h100-sxm")


# --- rooftop.analysis.ideal_time ------------------------------------------------------------------------------

def test_ideal_is_the_larger_roof():
    # 3.35 GB at 3.35 TB/s = 1 ms; 1 TFLOP at 989.4 TF/s = 1.0107 ms
    assert kernel_ideal_ns(0, 3.35e9, 989.4e12, 3.35e12) == pytest.approx(1e6)
    assert kernel_ideal_ns(1e12, 3.35e9, 989.4e12, 3.35e12) == pytest.approx(1e12 / 989.4e12 * 1e9)
    assert kernel_ideal_ns(1e12, 3.35e9, 989.4e12, 3.35e12, launch_floor_ns=0) == pytest.approx(1010713.6, rel=1e-6)


def test_launch_floor():
    assert LAUNCH_FLOOR_NS == 2000
    assert kernel_ideal_ns(10, 8192, 989.4e12, 3.35e12) == 2000.0  # 2.4 ns of bytes, floored
    assert kernel_ideal_ns(10, 8192, 989.4e12, 3.35e12, launch_floor_ns=0) == pytest.approx(8192 / 3.35e3)
    assert kernel_ideal_ns(0, 0, 1e15, 1e12, 500) == 500.0


def test_ideal_unknown_is_nan():
    assert np.isnan(kernel_ideal_ns(np.nan, 1e9, 1e15, 1e12))
    assert np.isnan(kernel_ideal_ns(1e9, 1e9, None, 1e12))
    assert np.isnan(kernel_ideal_ns(1e9, 1e9, 1e15, 0))
    assert np.isnan(kernel_ideal_ns(pd.NA, 1e9, 1e15, 1e12))
    nullable = kernel_ideal_ns(pd.Series([1e9, None], dtype="Int64"), pd.Series([1e9, 1e9]), 1e15, 1e12)
    assert nullable.iloc[0] == pytest.approx(1e6) and np.isnan(nullable.iloc[1])


def test_ideal_vectorised_keeps_index():
    flops = pd.Series([0.0, 2e12, np.nan], index=[10, 11, 12])
    nbytes = pd.Series([3.35e9, 1e6, 1e6], index=[10, 11, 12])
    out = kernel_ideal_ns(flops, nbytes, 1e15, 3.35e12)
    assert list(out.index) == [10, 11, 12]
    assert out.iloc[0] == pytest.approx(1e6) and out.iloc[1] == pytest.approx(2e6) and np.isnan(out.iloc[2])
    arr = kernel_ideal_ns(np.array([0.0, 2e12]), np.array([3.35e9, 0.0]), 1e15, 3.35e12)
    assert isinstance(arr, np.ndarray) and arr == pytest.approx([1e6, 2e6])


def test_kernel_bound():
    assert kernel_bound(1e9, 1e9, 989.4e12, 3.35e12) == "memory"
    assert kernel_bound(1e15, 1e9, 989.4e12, 3.35e12) == "compute"
    assert kernel_bound(10, 8192, 989.4e12, 3.35e12) == "launch"
    assert kernel_bound(np.nan, 8192, 989.4e12, 3.35e12) is None
    assert list(kernel_bound(pd.Series([1e9, 1e15]), pd.Series([1e9, 1e9]), 989.4e12, 3.35e12)) == ["memory", "compute"]


def test_attention_bytes_reference_numbers():
    # Llama-3-8B, S=2048, one sequence and layer: Q+O 2*2048*32*128*2, K+V 2*2048*8*128*2 = 41.9 MB
    mn = attention_min_bytes(1, 32, 2048, 2048, 128, kv_heads=8)
    assert mn == 2 * 2048 * 32 * 128 * 2 + 2 * 2048 * 8 * 128 * 2 == 41_943_040
    # bf16 scores: +4*S^2*H*2 = 1.07 GB, about 27x (docs/definitions.md)
    bf16 = attention_materialized_bytes(1, 32, 2048, 2048, 128, kv_heads=8, score_bytes=2)
    assert bf16 - mn == 4 * 2048**2 * 32 * 2 == 1_073_741_824
    assert bf16 / mn == pytest.approx(26.6, abs=0.1)
    # fp32 scores (the default) double the extra
    assert attention_materialized_bytes(1, 32, 2048, 2048, 128, kv_heads=8) - mn == 2 * 1_073_741_824
    assert attention_min_bytes(2, 32, 1, 100, 128, kv_heads=8, kv_bytes=1) == 2 * (2 * 32 * 128 * 2 + 2 * 100 * 8 * 128)


# --- collectors.predict -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def b1():
    """Llama-3-8B on H100 SXM, batch 1, prompt 2048, 2 decode steps (contexts 2048, 2049)."""
    return P.predict(L8B, H100, 1, 2048, 2)


def _step(rows, phase, step):
    return rows[(rows["phase"] == phase) & (rows["step"] == step)]


def test_worked_check_decode_bytes_and_floor(b1):
    rows, _ = b1
    dec = _step(rows, "decode", 0)
    nbytes = dec["model_bytes"].sum()
    # weights 15.01 GB + KV 2048 tokens * 128 KiB = 0.27 GB -> 15.28 GB; floor 15.28 / 3.35 = 4.56 ms
    assert nbytes == pytest.approx(15.3e9, rel=0.02)
    assert nbytes == pytest.approx(L8B.decode_weight_bytes() + 2048 * L8B.kv_bytes_per_token(), rel=0.005)
    assert nbytes / H100.peak_bw * 1e3 == pytest.approx(4.56, rel=0.02)
    # every kernel at its pure roofline: the step is the bandwidth floor
    pure, _ = P.predict(L8B, H100, 1, 2048, 1, launch_floor_ns=0)
    assert _step(pure, "decode", 0)["dur_ns"].sum() / 1e6 == pytest.approx(4.56, rel=0.02)
    # the launch floor adds only for kernels shorter than 2 us (norms, adds, rope, attention)
    assert 4.6 < dec["dur_ns"].sum() / 1e6 < 4.56 + 32 * 10 * 2e-3


def test_kernel_list_per_layer(b1):
    rows, _ = b1
    layer = _step(rows, "decode", 1)
    layer = layer[layer["layer"] == 3]
    assert list(layer["path"].str.rsplit("/", n=1).str[-1]) == ["attn"] * 7 + ["mlp"] * 5
    assert list(layer["category"]) == ["norm", "gemm", "elementwise", "memory", "attention", "gemm", "elementwise",
                                       "norm", "gemm", "elementwise", "gemm", "elementwise"]
    assert set(layer["path"].str.rsplit("/", n=1).str[0]) == {"decode/step=1/layer=3"}
    assert layer["name"].iloc[4].startswith("void pytorch_flash::flash_fwd_splitkv_kernel<")
    assert layer["name"].iloc[1].startswith("sm90_xmma_gemm_bf16bf16")
    pre = _step(rows, "prefill", 0)
    assert (pre["name"].str.contains("flash_fwd_kernel<")).sum() == 32
    # per step: embed + 32 layers x 12 + final norm, lm_head, sample
    assert len(pre) == len(_step(rows, "decode", 0)) == 1 + 32 * 12 + 3
    assert list(pre["path"].iloc[[0, -3, -1]]) == ["prefill/step=0/embed", "prefill/step=0/lm_head",
                                                   "prefill/step=0/sample"]


def _kernel(rows, phase, step, op, nth=0, layer=0):
    sel = _step(rows, phase, step)
    sel = sel[(sel["op"] == op) & ((sel["layer"] == layer) if layer is not None else sel["layer"].isna())]
    return sel.iloc[nth]


def test_gemm_costs_by_hand(b1):
    rows, _ = b1
    h, f, v, qkv = 4096, 14336, 128256, (32 + 2 * 8) * 128
    for phase, t in (("decode", 1), ("prefill", 2048)):
        step = 0
        for nth, (n, k) in enumerate([(qkv, h), (h, h), (2 * f, h), (h, f)]):
            k_ = _kernel(rows, phase, step, "aten::mm", nth)
            assert k_["model_flops"] == 2 * t * n * k
            assert k_["model_bytes"] == 2 * (t * k + k * n + t * n)
    # LM head: last token only, in prefill too
    for phase in ("prefill", "decode"):
        lm = _kernel(rows, phase, 0, "aten::mm", layer=None)
        assert lm["model_flops"] == 2 * 1 * v * h and lm["model_bytes"] == 2 * (h + h * v + v)


def test_attention_costs_by_hand(b1):
    rows, _ = b1
    op = P._SDPA_FLASH_OP
    pre = _kernel(rows, "prefill", 0, op)
    assert pre["model_flops"] == 4 * 2048 * 2048 * 128 * 32 / 2  # causal halves the square
    assert pre["model_bytes"] == attention_min_bytes(1, 32, 2048, 2048, 128, kv_heads=8) == 41_943_040
    dec = _kernel(rows, "decode", 1, op)  # context 2049
    assert dec["model_flops"] == 4 * 32 * 2049 * 128
    assert dec["model_bytes"] == 2 * (2 * 32 * 128 + 2 * 2049 * 8 * 128)


def test_materialized_attention_moves_the_scores():
    rows, _ = P.predict(L8B, H100, 1, 2048, 1, attn="materialized")
    pre = _step(rows, "prefill", 0)
    att = pre[(pre["layer"] == 0) & pre["op"].isin(["aten::bmm", "aten::_softmax"])]
    assert list(att["op"]) == ["aten::bmm", "aten::_softmax", "aten::bmm"]
    assert "softmax_warp_forward" in att["name"].iloc[1]
    mn = attention_min_bytes(1, 32, 2048, 2048, 128, kv_heads=8)
    total = att["model_bytes"].sum()
    # K and V expanded to all 32 heads by the math path, plus 4 passes over the fp32 S x S scores
    assert total == attention_materialized_bytes(1, 32, 2048, 2048, 128, kv_heads=32)
    assert total / mn > 40
    assert att["model_flops"].iloc[[0, 2]].sum() == 4 * 2048 * 2048 * 128 * 32  # full square, no causal skip
    assert len(pre) == 1 + 32 * 14 + 3
    fused, _ = P.predict(L8B, H100, 1, 2048, 1)
    assert _step(rows, "prefill", 0)["dur_ns"].sum() > 1.4 * _step(fused, "prefill", 0)["dur_ns"].sum()


def test_decode_memory_bound_prefill_compute_bound(b1):
    rows, _ = b1
    ridge = H100.ridge()
    dec, pre = _step(rows, "decode", 0), _step(rows, "prefill", 0)
    ai_dec = dec["model_flops"].sum() / dec["model_bytes"].sum()
    ai_pre = pre["model_flops"].sum() / pre["model_bytes"].sum()
    assert ai_dec == pytest.approx(1.05, abs=0.1) and ai_dec < ridge / 100
    assert ai_pre > 2 * ridge
    g = dec[dec["category"] == "gemm"]
    assert set(kernel_bound(g["model_flops"], g["model_bytes"], H100.peak_bf16, H100.peak_bw, 0)) == {"memory"}
    g = pre[(pre["category"] == "gemm") & pre["layer"].notna()]
    assert set(kernel_bound(g["model_flops"], g["model_bytes"], H100.peak_bf16, H100.peak_bw, 0)) == {"compute"}


def test_timeline_and_null_measurements(b1):
    rows, meta = b1
    start, dur = rows["start_ns"].to_numpy(), rows["dur_ns"].to_numpy()
    assert start[0] == 0 and (start[1:] == start[:-1] + dur[:-1]).all()  # back to back, no gaps
    assert (dur >= LAUNCH_FLOOR_NS).all()
    expect = np.ceil(kernel_ideal_ns(rows["model_flops"], rows["model_bytes"], H100.peak_bf16, H100.peak_bw))
    assert (dur == expect.to_numpy()).all()
    assert rows[["flops", "dram_read", "dram_write"]].isna().all().all()
    assert not rows["counters"].any() and (rows["kind"] == "kernel").all()


def test_meta(b1):
    _, meta = b1
    assert meta["modeled"] is True
    assert meta["source"]["tool"] == "rooftop predict" and meta["source"]["model"] == "roofline"
    assert meta["source"]["command"].startswith("rooftop predict --preset llama3-8b --gpu h100-sxm --batch 1")
    assert meta["device"]["peaks"]["datasheet"] == {"flops": 989.4e12, "bw": 3.35e12, "dtype": "bf16"}
    assert meta["model"]["layers"] == 32 and meta["model"]["dtype"] == "bf16"
    assert meta["workload"] == {"batch": 1, "prompt_len": 2048, "gen_len": 2, "attn": "fused",
                                "cuda_graphs": None, "dtype": "bf16", "device": H100.name}
    assert meta["steps"] == [
        {"phase": "prefill", "index": 0, "batch": 1, "new_tokens": 2048, "context": 2048},
        {"phase": "decode", "index": 0, "batch": 1, "new_tokens": 1, "context": 2048},
        {"phase": "decode", "index": 1, "batch": 1, "new_tokens": 1, "context": 2049},
    ]


def test_round_trip_through_the_file(b1, tmp_path):
    rows, meta = b1
    path = write_trace(tmp_path / "ideal.parquet", rows, meta)
    t = load_trace(path)
    assert t.modeled and len(t.events) == len(rows)
    assert t.events["short_name"].iloc[0] == "indexSelectLargeIndex<>"
    p = peaks(t.meta)  # the device name written finds the same spec row again
    assert p.gpu == H100 and p.source == "datasheet"


def test_batch_64_kv_bytes():
    rows, _ = P.predict(L8B, by_key("h200"), 64, 2048, 1)
    dec = _step(rows, "decode", 0)
    # weights 15.01 GB + 64 sequences x 2048 tokens x 128 KiB = 17.18 GB -> 32.2 GB (reference 5.2),
    # plus the activations of 64 tokens through every layer (~20 MB a layer, which 5.2 leaves out)
    weights_kv = L8B.decode_weight_bytes() + 64 * 2048 * L8B.kv_bytes_per_token()
    assert weights_kv == pytest.approx(32.19e9, rel=0.001)
    assert weights_kv < dec["model_bytes"].sum() < 1.03 * weights_kv
    assert dec["model_bytes"].sum() / 4.8e12 * 1e3 == pytest.approx(6.71, rel=0.03)


def test_bad_inputs():
    with pytest.raises(ValueError, match="attention"):
        P.predict(L8B, H100, 1, 16, 1, attn="paged")
    with pytest.raises(ValueError, match="fp8"):
        P.predict(L8B, by_key("a100-80gb"), 1, 16, 1, dtype="fp8")
    with pytest.raises(ValueError):
        P.predict(L8B, H100, 0, 16, 1)


def test_fast_enough():
    t0 = time.perf_counter()
    rows, _ = P.predict(L8B, H100, 1, 2048, 32)
    assert len(rows) == 33 * (1 + 32 * 12 + 3)
    assert time.perf_counter() - t0 < 3.0


def _args(tmp_path, **kw):
    parser = argparse.ArgumentParser()
    P.add_arguments(parser)
    argv = ["--preset", kw.pop("preset", "tiny"), "--gpu", kw.pop("gpu", "H200"), "-o", str(tmp_path / "out.parquet")]
    for k, v in kw.items():
        argv += [f"--{k.replace('_', '-')}", str(v)]
    return parser.parse_args(argv)


def test_cli_run(tmp_path, capsys):
    assert P.run(_args(tmp_path, batch=2, prompt_len=8, gen_len=3, attn="materialized")) == 0
    t = load_trace(tmp_path / "out.parquet")
    assert t.meta["workload"]["attn"] == "materialized" and t.meta["device"]["key"] == "h200"
    assert sorted(t.events["step"].unique().tolist()) == [0, 1, 2]
    assert "wrote" in capsys.readouterr().out


def test_cli_unknown_gpu(tmp_path, capsys):
    assert P.run(_args(tmp_path, gpu="h999")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'h999'" in err and "h100-sxm" in err and "mi300x" in err
    assert not (tmp_path / "out.parquet").exists()


def test_no_torch_import():
    code = ("import sys, collectors.predict, rooftop.hardware.gpus, rooftop.analysis.ideal_time; "
            "assert 'torch' not in sys.modules and 'textual' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
