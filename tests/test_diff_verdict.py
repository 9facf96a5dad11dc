"""`rooftop diff`'s verdict, causes, matching and gate on A/B pairs whose answer is known.

- a trace against itself: "no change", exit 0 under any gate;
- a copy with one kernel family slowed 30% (later kernels on the device shifted by the added time,
  as a slower kernel delays what follows on its stream): that family is the first cause, the gate at
  10% fails when the step time grows more than 10%;
- two fixed-length windows of the same work where B's holds fewer repetitions: compared per
  repetition (slower), never by the smaller total (faster);
- a V100 and an A100 Kineto trace of the same `aten::mm`: `volta_sgemm_*` matched to `cutlass_80_*`
  through the launching op, the device difference said at the top;
- the real fixture pairs (HTA sampled rank 0 / rank 1, the two NVIDIA Fuser nsys exports) in both
  orders: the sign flips with the order, the gate's status agrees with the verdict.
"""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rooftop.analysis import verdict
from rooftop.analysis.matching import families, match_keys
from collectors.open import open_analysis
from rooftop_cli import main
from rooftop.trace import load_trace, write_trace

sys.path.insert(0, str(Path(__file__).parent))
from tui_helpers import small_trace  # noqa: E402

HTA = "facebookresearch__HolisticTraceAnalysis__tests__data__trace_filter__sampled_rank-{}.json.gz"
FUSER = ("NVIDIA__Fuser__report1.sqlite", "NVIDIA__Fuser__report1.h100-8fa9ec29.sqlite")


def slowed_copy(trace, family: str, factor: float, out: Path) -> Path:
    """`trace` with every kernel of `family` (short name) `factor` times longer; each GPU row after one
    on the same device starts later by the time added before it (the device runs its work in order)."""
    ev = trace.events.copy()
    gpu = ev["kind"].astype(str).isin(["kernel", "memcpy", "memset"]).to_numpy()
    hit = gpu & (ev["short_name"].astype(object) == family).to_numpy()
    assert hit.any(), family
    extra = np.where(hit, np.round(ev["dur_ns"].to_numpy(float) * (factor - 1)), 0.0)
    dev = ev["device"].fillna(-1).to_numpy() if "device" in ev.columns else np.zeros(len(ev))
    order = np.lexsort((ev["start_ns"].to_numpy(), dev))
    shift = np.zeros(len(ev))
    for d in np.unique(dev[gpu]):  # a handful of devices; within one, a cumulative sum
        idx = order[(dev[order] == d) & gpu[order]]
        shift[idx] = np.cumsum(extra[idx]) - extra[idx]
    ev["start_ns"] = (ev["start_ns"].to_numpy(float) + shift).astype("int64")
    ev["dur_ns"] = (ev["dur_ns"].to_numpy(float) + extra).astype("int64")
    meta = {k: v for k, v in trace.meta.items() if k != "format"}
    return write_trace(out, ev.drop(columns=[c for c in ("rank",) if c in ev.columns]), meta)


def _gate(a, b, pct=10.0, metric="auto"):
    return verdict.gate(verdict.verdicts(a, b), pct, metric)


# --- a trace against itself ------------------------------------------------------------------------

def test_a_trace_against_itself_is_no_change(tmp_path, capsys):
    p = small_trace(tmp_path, counters=True)
    a = open_analysis(str(p))
    v = verdict.verdicts(a, a)
    assert v["overall"]["direction"] == "no change" and v["hardware"] == []
    assert all(ph["direction"] == "no change" for ph in v["phases"])
    assert main(["diff", str(p), str(p), "--fail-above", "0"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("verdict: overall: no change")
    assert "gate: pass" in out


# --- one family slowed 30% -------------------------------------------------------------------------

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"


def test_one_family_slowed_is_named_first_and_fails_the_gate(tmp_path, capsys):
    p = small_trace(tmp_path, counters=True)
    a = open_analysis(str(p))
    gemm = a.timed[a.timed["name"].astype(str) == GEMM]["short_name"].iloc[0]
    slow = slowed_copy(a.trace, gemm, 1.3, tmp_path / "slow.parquet")
    b = open_analysis(str(slow))
    v = verdict.verdicts(a, b)
    dec = {p["phase"]: p for p in v["phases"]}["decode"]
    # By hand: decode step i holds 6 GEMMs of 10+i, 20 and 15 µs (x2 layers): 90 + 2i µs of GEMM in a
    # span of 113 + 2i µs. 30% more GEMM time adds 27 + 0.6i µs, mean 27.9 µs on a mean span of 116 µs.
    assert dec["a_ns"] == pytest.approx(116_000) and dec["b_ns"] == pytest.approx(116_000 + 27_900, abs=5)
    assert dec["direction"] == "slower" and dec["within_noise"] is False
    first = dec["causes"][0]
    assert first["key"] == gemm and first["how"] == "name"
    assert first["delta_ns"] == pytest.approx(27_900, abs=5)
    assert first["mean_ns_b"] == pytest.approx(1.3 * first["mean_ns_a"], rel=1e-3)
    assert main(["diff", str(p), str(slow), "--fail-above", "10"]) == 1
    out = capsys.readouterr().out
    assert "gate: FAIL: decode step time: B 24.1% slower" in out
    assert "decode: B 24.1% slower per step" in out
    # The other order: B faster, the gate passes.
    assert main(["diff", str(slow), str(p), "--fail-above", "10"]) == 0
    assert "faster" in capsys.readouterr().out
    # Above the threshold: passes with the reason.
    assert main(["diff", str(p), str(slow), "--fail-above", "30"]) == 0
    assert "limit 30%" in capsys.readouterr().out


def test_gate_metric_and_formats(tmp_path, capsys):
    p = small_trace(tmp_path, counters=True)
    a = open_analysis(str(p))
    gemm = a.timed[a.timed["name"].astype(str) == GEMM]["short_name"].iloc[0]
    slow = slowed_copy(a.trace, gemm, 1.3, tmp_path / "slow.parquet")
    assert main(["diff", str(p), str(slow), "--fail-above", "10", "--format", "json"]) == 1
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert {"phases", "groups", "findings_added", "verdict", "gate"} <= set(doc)  # old keys kept
    assert doc["gate"]["status"] == 1 and doc["gate"]["reason"].startswith("gate: FAIL")
    assert captured.err.strip().startswith("gate: FAIL")
    dec = [x for x in doc["verdict"]["phases"] if x["phase"] == "decode"][0]
    assert {"measure", "a_ns", "b_ns", "change", "noise", "within_noise", "causes", "families", "line"} <= set(dec)
    assert dec["causes"][0]["key"] == gemm
    # --json keeps working, same document.
    assert main(["diff", "--json", str(p), str(slow)]) == 0
    assert "verdict" in json.loads(capsys.readouterr().out)
    assert main(["diff", str(p), str(slow), "--format", "markdown", "--fail-above", "10"]) == 1
    md = capsys.readouterr().out
    assert md.startswith("### rooftop diff:") and "**Verdict:**" in md and "| Δ per unit |" in md
    # The step measure: all phases with steps at A's step counts (prefill's GEMMs are slowed too).
    v = verdict.verdicts(a, open_analysis(str(slow)))
    m, words = verdict.gate_measure(v, "step")
    assert m["phase"] == "overall" and words == "time of all steps at A's step counts"
    by = {x["phase"]: x for x in v["phases"]}
    assert m["b_ns"] == pytest.approx(by["prefill"]["b_ns"] + 4 * by["decode"]["b_ns"])


# --- windows that hold different amounts of the same work ------------------------------------------

def _window(path: Path, flash_calls: int, nccl_calls: int, nccl_ns: int, jitter: int) -> Path:
    """A 300 ms capture window with no steps: `flash_calls` x 4 ms of flash_fwd, then NCCL calls,
    spread evenly over the window (the rest is idle)."""
    rng = np.random.default_rng(flash_calls)
    rows, t = [], 0
    gap = (300_000_000 - flash_calls * 4_000_000 - nccl_calls * nccl_ns) // (flash_calls + nccl_calls)
    for i in range(flash_calls):
        d = 4_000_000 + int(rng.integers(-jitter, jitter + 1))
        rows.append(dict(kind="kernel", name="flash_fwd_kernel", start_ns=t, dur_ns=d, device=0, stream=7))
        t += d + gap
    for i in range(nccl_calls):
        rows.append(dict(kind="kernel", name="ncclKernel_SendRecv_RING_SIMPLE", start_ns=t, dur_ns=nccl_ns,
                         device=0, stream=9))
        t += nccl_ns + gap
    return write_trace(path, rows, {"device": {"name": "NVIDIA H100 80GB HBM3"}})


def test_fixed_windows_are_compared_per_repetition_not_by_totals(tmp_path, capsys):
    # A: 68 flash calls and 10 SendRecv of 1 ms; B: 60 flash calls (same 4 ms each) and 9 SendRecv of
    # 1.41 ms, in a window of the same length. B holds 60/68 = 0.882 of A's work (time-weighted
    # median of the count ratios: flash carries 272 of A's 282 ms), so per repetition B takes
    # span_B / 0.882: 13.3% slower, though its kernel total is smaller.
    a = open_analysis(str(_window(tmp_path / "a.parquet", 68, 10, 1_000_000, 20_000)))
    b = open_analysis(str(_window(tmp_path / "b.parquet", 60, 9, 1_410_000, 20_000)))
    assert b.timed["dur_ns"].sum() < a.timed["dur_ns"].sum()
    v = verdict.verdicts(a, b)
    run = v["phases"][0]
    assert run["basis"] == "work" and run["work_ratio"] == pytest.approx(60 / 68)
    span_a, span_b = float(a.phases["span_ns"].iloc[0]), float(b.phases["span_ns"].iloc[0])
    assert run["change"] == pytest.approx(span_b / (60 / 68) / span_a - 1)
    assert run["direction"] == "slower" and run["change"] > 0.1
    # per call of matched kernels: flash unchanged, NCCL 41% longer: Σ c_A·mean_B / Σ c_A·mean_A - 1
    flash_a = a.timed[a.timed["name"] == "flash_fwd_kernel"]["dur_ns"].mean()
    flash_b = b.timed[b.timed["name"] == "flash_fwd_kernel"]["dur_ns"].mean()
    want = (68 * flash_b + 10 * 1.41e6) / (68 * flash_a + 10 * 1e6) - 1
    assert run["per_call_change"] == pytest.approx(want)
    nccl = [c for c in run["causes"] if c["key"].startswith("ncclKernel")][0]
    assert nccl["mean_ns_b"] == pytest.approx(1.41e6) and nccl["calls_b"] == pytest.approx(9 / (60 / 68))
    assert main(["diff", str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet"), "--fail-above", "10"]) == 1
    out = capsys.readouterr().out
    assert "B's window holds 0.88x A's work, normalized" in out and "faster" not in out.splitlines()[0]


# --- matching across GPUs ---------------------------------------------------------------------------

def _kineto(path: Path, gpu: str, cc: tuple[int, int], sms: int, gemm: str, gemm_us: float) -> Path:
    """A Kineto trace of three training steps: per step an `aten::mm` (one GEMM kernel) and an
    `aten::relu` (an elementwise kernel whose name does not change with the GPU)."""
    ev, corr, t = [], 1, 1000.0
    for step in range(3):
        start = t
        for op, kname, dur in (("aten::mm", gemm, gemm_us), ("aten::relu", "vectorized_elementwise_kernel", 5.0)):
            ev.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": t, "dur": 4.0,
                       "args": {"External id": corr}})
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": t + 1, "dur": 2.0, "args": {"correlation": corr, "External id": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": kname, "pid": 0, "tid": 7, "ts": t + 10, "dur": dur,
                       "args": {"device": 0, "stream": 7, "correlation": corr, "grid": [80, 1, 1],
                                "block": [128, 1, 1]}})
            corr += 1
            t += 10 + dur + 2
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1,
                   "ts": start, "dur": t - start})
        t += 5
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": gpu, "computeMajor": cc[0],
                                                      "computeMinor": cc[1], "numSms": sms}], "traceEvents": ev}
    path.write_text(json.dumps(doc))
    return path


def test_cross_gpu_gemms_match_through_their_op(tmp_path, capsys):
    v100 = _kineto(tmp_path / "v100.json", "Tesla V100-SXM2-16GB", (7, 0), 80, "volta_sgemm_128x64_nn", 40.0)
    a100 = _kineto(tmp_path / "a100.json", "NVIDIA A100-SXM4-40GB", (8, 0), 108,
                   "cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4", 20.0)
    a, b = open_analysis(str(v100)), open_analysis(str(a100))
    ka, kb = match_keys(a.timed, b.timed)
    assert set(ka["how"]) == {"name", "op+path"} and set(kb["how"]) == {"name", "op+path"}
    fam = families(a.timed, b.timed)
    mm = fam[fam["how"] == "op+path"].iloc[0]
    assert mm["key"].startswith("op aten::mm [gemm]") and mm["status"] == "both"
    assert mm["name_a"].startswith("volta_sgemm") and mm["name_b"].startswith("cutlass_80")
    assert (fam["status"] == "both").all()  # nothing "only in B"
    v = verdict.verdicts(a, b)
    whats = {h["what"] for h in v["hardware"]}
    assert {"device", "compute capability", "SMs"} <= whats
    assert main(["diff", str(v100), str(a100)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("DIFFERENT HARDWARE")
    assert "matched by the launching op" in out and "unmatched" not in out
    first = [line for line in out.splitlines() if line.lstrip().startswith("-")][1]  # first cause row
    assert "aten::mm" in first and "faster" in out


def test_ops_lowered_differently_match_by_their_place_in_the_model():
    """TraceLens's case (docs/TraceDiff.md): `aten::convolution` lowers to `aten::cudnn_convolution`
    on CUDA and `aten::miopen_convolution` on ROCm; under the same range (step numbers elided) and of
    the same category they are the same work. A kernel under another range stays unmatched."""
    a = pd.DataFrame({"short_name": ["cudnn_conv_k", "gemm_x"], "op": ["aten::cudnn_convolution", "aten::mm"],
                      "category": ["gemm", "gemm"], "path": ["ProfilerStep#3/backbone/conv1", "ProfilerStep#3/head"],
                      "dur_ns": [100, 50], "kind": ["kernel", "kernel"]})
    b = pd.DataFrame({"short_name": ["igemm_conv_k", "gemm_y"], "op": ["aten::miopen_convolution", "aten::mm"],
                      "category": ["gemm", "gemm"], "path": ["ProfilerStep#9/backbone/conv1", "ProfilerStep#9/other"],
                      "dur_ns": [90, 40], "kind": ["kernel", "kernel"]})
    fam = families(a, b).set_index("key")
    conv = fam.loc["at ProfilerStep##/backbone/conv# [gemm]"]
    assert conv["how"] == "path" and conv["name_a"] == "cudnn_conv_k" and conv["name_b"] == "igemm_conv_k"
    # aten::mm under different ranges: matched by op alone (level 3) before the path level is tried
    mm = fam.loc["op aten::mm [gemm]"]
    assert mm["how"] == "op" and mm["time_ns_a"] == 50 and mm["time_ns_b"] == 40


def test_unmatched_work_is_listed_as_such(tmp_path):
    a = pd.DataFrame({"short_name": ["k1", "k2"], "op": [None, "aten::add"], "category": ["gemm", "elementwise"],
                      "path": [None, None], "dur_ns": [10, 20], "kind": ["kernel", "kernel"]})
    b = pd.DataFrame({"short_name": ["k1", "k3"], "op": [None, "aten::mul"], "category": ["gemm", "elementwise"],
                      "path": [None, None], "dur_ns": [12, 25], "kind": ["kernel", "kernel"]})
    fam = families(a, b).set_index("key")
    assert fam.loc["k1", "status"] == "both" and fam.loc["k1", "how"] == "name"
    assert fam.loc["k2", "status"] == "only in A" and fam.loc["k3", "status"] == "only in B"
    assert fam.loc["k2", "how"] == "unmatched"


# --- real fixture pairs, both orders ----------------------------------------------------------------

def test_hta_ranks_both_orders(fixtures_dir, tmp_path):
    r0, r1 = (str(fixtures_dir / "traces" / HTA.format(i)) for i in (0, 1))
    a, b = open_analysis(r0), open_analysis(r1)
    ab, ba = verdict.verdicts(a, b), verdict.verdicts(b, a)
    x, y = ab["phases"][0], ba["phases"][0]
    assert x["basis"] == y["basis"] == "step"  # ProfilerStep#551, #552 on both ranks
    assert x["a_ns"] == pytest.approx(y["b_ns"]) and x["b_ns"] == pytest.approx(y["a_ns"])
    assert {x["direction"], y["direction"]} == {"slower", "faster"}
    assert x["within_noise"] == y["within_noise"]
    # slower one way only; neither fails a gate within its noise
    for v in (ab, ba):
        status, reason = verdict.gate(v, 0.1)
        m, _ = verdict.gate_measure(v)
        assert status == (1 if m["change"] > 0.001 and not m["within_noise"] else 0), reason


def test_hta_rank0_with_a_slowed_family_names_it_first(fixtures_dir, tmp_path):
    r0 = str(fixtures_dir / "traces" / HTA.format(0))
    a = open_analysis(r0)
    fam = "split_embedding_codegen_forward_unweighted_kernel<>"
    slow = open_analysis(str(slowed_copy(a.trace, fam, 1.3, tmp_path / "slow.parquet")))
    v = verdict.verdicts(a, slow)
    run = v["phases"][0]
    assert run["causes"][0]["key"] == fam and run["direction"] == "slower"
    per_step = a.timed[a.timed["short_name"].astype(object) == fam]["dur_ns"].sum() / 2
    assert run["causes"][0]["delta_ns"] == pytest.approx(0.3 * per_step, rel=1e-3)
    back = verdict.verdicts(slow, a)["phases"][0]
    assert back["direction"] == "faster" and back["causes"][0]["key"] == fam


def test_fuser_exports_both_orders_say_different_work(fixtures_dir, capsys):
    h200, h100 = (str(fixtures_dir / "traces" / f) for f in FUSER)
    for x, y in ((h200, h100), (h100, h200)):
        a, b = open_analysis(x), open_analysis(y)
        v = verdict.verdicts(a, b)
        assert {h["what"] for h in v["hardware"]} >= {"device", "peak TB/s"}
        assert v["overall"]["change"] is None  # an nvFuser cross-entropy run vs a matmul test
        assert "different work" in v["phases"][0]["noise_basis"]
        assert main(["diff", x, y, "--fail-above", "10"]) == 0
        out = capsys.readouterr().out
        assert out.splitlines()[0].startswith("DIFFERENT HARDWARE") and "gate: no verdict" in out


# --- directories of ranks ---------------------------------------------------------------------------

def test_rank_directories_compare_rank_by_rank_and_name_the_straggler(tmp_path, capsys):
    from tui_helpers import multi_rank_run

    # Rank N's decode step s spans 113 + 2·s·slow[N] µs (tui_helpers). A: both ranks at slow 1;
    # B: rank 1 at slow 3, so rank 1's mean decode step goes 116 -> 122 µs and it is the slowest
    # rank of steps 1-3 of B (step 0 ties; the first rank wins a tie).
    a_dir, b_dir = multi_rank_run(tmp_path, (1.0, 1.0), "a"), multi_rank_run(tmp_path, (1.0, 3.0), "b")
    a, b = open_analysis(str(a_dir)), open_analysis(str(b_dir))
    v = verdict.verdicts(a, b)
    ranks = pd.DataFrame(v["ranks"]).set_index(["phase", "rank"])
    assert ranks.loc[("decode", 1), "a_ns"] == pytest.approx(116_000)
    assert ranks.loc[("decode", 1), "b_ns"] == pytest.approx(122_000)
    assert ranks.loc[("decode", 0), "change"] == pytest.approx(0)
    assert ranks.loc[("decode", 1), "straggler_b"] == 3
    drivers = {d["phase"]: d for d in v["drivers"]}
    assert set(drivers) == {"decode"}  # prefill did not change: nothing drives it
    assert drivers["decode"]["rank"] == 1 and drivers["decode"]["side"] == "B"
    dec = {p["phase"]: p for p in v["phases"]}["decode"]
    assert dec["b_ns"] == pytest.approx(122_000)  # the run's step time: the slowest rank's
    assert main(["diff", str(a_dir), str(b_dir)]) == 0
    out = capsys.readouterr().out
    assert "rank 1 drives decode: the slowest rank in 3 of 4 steps of B" in out
    # The other order: B faster; the rank that made A slow is named, from A's steps.
    back = {d["phase"]: d for d in verdict.verdicts(b, a)["drivers"]}["decode"]
    assert back["rank"] == 1 and back["side"] == "A" and back["change"] < 0


def test_family_statistics_equal_the_rows_own():
    """Count, time, per-call mean and variance of a family spread over several (path, op) combos equal
    those computed directly on its rows (the per-combo sums are only a shortcut)."""
    rng = np.random.default_rng(3)
    n = 500
    rows = pd.DataFrame({"short_name": rng.choice(["gemm", "flash", "silu"], n),
                         "op": rng.choice(["aten::mm", "aten::addmm", None], n),
                         "category": "gemm", "path": [f"decode/step={i % 7}/layer={i % 3}/x{i % 2}" for i in range(n)],
                         "dur_ns": rng.integers(1_000_000_000, 1_000_050_000, n), "kind": "kernel"})
    fam = families(rows, rows).set_index("key")
    want = rows.groupby("short_name")["dur_ns"].agg(["size", "sum", "mean", "var"])
    for name, w in want.iterrows():
        f = fam.loc[name]
        assert f["count_a"] == w["size"] and f["time_ns_a"] == w["sum"] and f["how"] == "name"
        assert f["mean_ns_a"] == pytest.approx(w["mean"], rel=1e-12)
        assert f["var_ns2_a"] == pytest.approx(w["var"], rel=1e-9)  # 1e9 ns durations: no cancellation


def test_names_from_traces_are_printed_as_text(tmp_path, capsys):
    """A kernel name with a terminal escape, a bell and markup, slowed in B so it is the first cause:
    every format shows it escaped (rooftop.present.text.printable), never as a control sequence."""
    weird = "evil\x1b[31mred\x07[bold]k[/bold]|x"
    rows = [dict(kind="kernel", name=weird if i % 2 else "plain", start_ns=i * 10_000, dur_ns=5_000,
                 path=f"decode/step={i // 2}", device=0, stream=7) for i in range(8)]
    meta = {"device": {"name": "NVIDIA H100 80GB HBM3"},
            "steps": [{"phase": "decode", "index": i, "batch": 1, "new_tokens": 1, "context": 8} for i in range(4)]}
    a = write_trace(tmp_path / "a.parquet", rows, meta)
    b_rows = [dict(r, dur_ns=8_000) if r["name"] == weird else r for r in rows]
    b = write_trace(tmp_path / "b.parquet", b_rows, meta)
    for fmt in ("text", "markdown"):
        main(["diff", str(a), str(b), "--format", fmt])
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\x07" not in out
        assert "evil" in out
    main(["diff", str(a), str(b), "--format", "markdown"])
    md = capsys.readouterr().out
    cause_row = [line for line in md.splitlines() if "evil" in line and line.startswith("|")][0]
    assert "\\|x" in cause_row and "`evil" in cause_row  # a pipe does not split the table; names are code


def test_modeled_traces_are_badged_in_every_format(tmp_path, capsys):
    a = small_trace(tmp_path, counters=True)
    b = small_trace(tmp_path, counters=True, modeled=True, name="modeled.parquet")
    main(["diff", str(a), str(b)])
    assert capsys.readouterr().out.splitlines()[0] == "MODELED: B is the analytic model's trace, not a measurement"
    main(["diff", str(b), str(b), "--format", "markdown"])
    assert "MODELED: A and B are the analytic model's traces" in capsys.readouterr().out
    main(["diff", str(a), str(b), "--format", "json"])
    assert json.loads(capsys.readouterr().out)["verdict"]["modeled"] == {"a": False, "b": True}
