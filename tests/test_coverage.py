"""Coverage: every bytes/FLOPs-derived number says what share of kernel time it rests on, and rates
are over the kernels that have the quantity. Small traces with hand-computed numbers, then the real
captures (an independent plain-`json` analysis of the same GEMM kernels)."""
from __future__ import annotations

import gzip
import json
import math
from collections import defaultdict
from pathlib import Path

import pytest

from collectors.readers.kineto import read_kineto
from rooftop.analysis import analyze
from rooftop.present.report import report_dict, report_text
from rooftop.trace import load_trace, write_trace

H100_FLOPS = 989.4e12
H100_BW = 3.35e12


def k(name, start, dur, path, kind="kernel", **kw):
    return dict(kind=kind, name=name, start_ns=start, dur_ns=dur, path=path, device=0, stream=7, **kw)


def build(tmp_path, rows, name="t.parquet", **meta):
    base = {"device": {"name": "NVIDIA H100 80GB HBM3"}, "workload": {"batch": 1, "dtype": "bf16"}}
    base.update(meta)
    return load_trace(write_trace(tmp_path / name, rows, base))


# --- group rates over the launches that have the quantity ---------------------------------------

def test_group_rates_divide_by_the_time_of_the_costed_launches_only(tmp_path):
    # 4 launches of one GEMM, 1 us each; FLOPs and bytes known for 3 of them (the 4th was
    # replayed from a CUDA graph: no launching op). 3 x 2e9 FLOPs in 3 us = 2000 TFLOP/s... too
    # fast for an H100, so use 3 x 2e8 FLOPs: 6e8 / 3e-6 s = 200 TFLOP/s (not 150: / 4 us).
    rows = [k("gemm", i * 2000, 1000, "prefill/step=0", model_flops=2e8, model_bytes=1e6) for i in range(3)]
    rows.append(k("gemm", 6000, 1000, "prefill/step=0"))
    g = analyze(build(tmp_path, rows)).groups().set_index("key").loc["gemm"]
    assert g["flops_coverage"] == pytest.approx(0.75) and g["bytes_coverage"] == pytest.approx(0.75)
    assert g["tflops"] == pytest.approx(6e8 / 3e-6 / 1e12)        # 200, not 150
    assert g["tbps"] == pytest.approx(3e6 / 3e-6 / 1e12)          # 1 TB/s
    assert g["ai"] == pytest.approx(200)
    # % of roof at AI 200 (left of the 295 ridge): attainable = 200 x 3.35e12 FLOP/s
    assert g["pct_of_roof"] == pytest.approx(2e14 / (200 * H100_BW))
    assert g["bound"] == "memory"                                  # AI known for 75% >= 50%


def test_ai_only_over_launches_with_both_quantities(tmp_path):
    # launch A: FLOPs and bytes; launch B: FLOPs only (bytes unknown). AI = A's FLOPs / A's bytes,
    # not (A + B FLOPs) / A's bytes.
    rows = [k("gemm", 0, 1000, "decode/step=0", model_flops=1e6, model_bytes=1e4),
            k("gemm", 2000, 3000, "decode/step=0", model_flops=9e6)]
    g = analyze(build(tmp_path, rows)).groups().set_index("key").loc["gemm"]
    assert g["ai"] == pytest.approx(100)
    assert g["ai_coverage"] == pytest.approx(0.25) and g["flops_coverage"] == 1.0
    assert g["tflops"] == pytest.approx(1e7 / 4e-6 / 1e12)
    assert g["tbps"] == pytest.approx(1e4 / 1e-6 / 1e12)
    assert g["bound"] is None                       # the AI covers 25% of the time: no verdict


# --- phase/step coverage: verdict, lower bound, unknown -----------------------------------------

def _decode(tmp_path, known_ns, unknown_ns, nbytes, name="t.parquet"):
    rows = [k("gemv", 0, known_ns, "decode/step=0", model_bytes=nbytes, model_flops=nbytes),
            k("graph_kernel", known_ns, unknown_ns, "decode/step=0")]
    return analyze(build(tmp_path, rows, name=name))


def test_thin_coverage_is_a_lower_bound_never_far_from_the_roof(tmp_path):
    # bytes for 140 ns of 1000 ns (14%): 3.35e5 bytes / 1 us = 0.335 TB/s = 10% of peak, a lower bound
    a = _decode(tmp_path, 140, 860, 3.35e5)
    ph = a.phases.set_index("phase").loc["decode"]
    assert ph["bytes_coverage"] == pytest.approx(0.14)
    assert ph["mbu"] == pytest.approx(0.10) and ph["mbu_status"] == "lower bound"
    assert ph["bound"] is None
    st = a.steps.iloc[0]
    assert st["bytes_coverage"] == pytest.approx(0.14) and st["mbu_status"] == "lower bound"
    f = {x.id: x for x in a.findings}["decode-mbu"]
    assert f.title == "decode: >= 10.0% MBU (bytes known for 14% of kernel time)"
    assert f.severity == "info" and f.coverage == pytest.approx(0.14) and f.evidence
    assert not any("far from the roof" in x.title or "healthy" in x.title for x in a.findings)
    text = report_text(a)
    assert ">= 10.0% MBU (bytes known for 14% of kernel time)" in text
    assert ">=10.0%" in text                                   # the table cell too


def test_half_coverage_is_a_verdict(tmp_path):
    # bytes for 600 of 1000 ns: 3.35e5 B / 1 us = 10% MBU, a verdict: far from the roof
    a = _decode(tmp_path, 600, 400, 3.35e5)
    ph = a.phases.set_index("phase").loc["decode"]
    assert ph["mbu_status"] == "verdict" and ph["bound"] == "memory"
    f = {x.id: x for x in a.findings}["decode-mbu"]
    assert "far from the roof" in f.title and f.severity == "bad"
    assert "bytes known for 60% of kernel time" in f.detail
    assert f.coverage == pytest.approx(0.6)


def test_a_sliver_of_coverage_gives_no_number(tmp_path):
    # bytes for 10 ns of 10 us (0.1%): no MBU at all (it would read "MBU 0.001%")
    a = _decode(tmp_path, 10, 9990, 1e3)
    ph = a.phases.set_index("phase").loc["decode"]
    assert math.isnan(ph["mbu"]) and math.isnan(ph["tbps"]) and ph["mbu_status"] == "unknown"
    assert ph["bytes"] == 1e3                                   # what is known is still reported
    assert ph["bytes_coverage"] == pytest.approx(0.001)
    assert math.isnan(ph["mbu_datasheet"])
    f = {x.id: x for x in a.findings}["decode-mbu"]
    assert f.title == "decode: MBU unknown (bytes known for 0.1% of kernel time)"
    d = report_dict(a)
    assert d["phases"][0]["mbu"] is None and d["phases"][0]["mbu_status"] == "unknown"
    assert d["phases"][0]["bytes_coverage"] == pytest.approx(0.001)


def test_phase_step_count_excludes_rows_outside_any_step(tmp_path):
    rows = [k("a", 0, 100, "decode/step=0"), k("a", 1000, 100, "decode/step=1"),
            k("a", 5000, 100, "decode")]   # in the decode phase, in no step
    ph = analyze(build(tmp_path, rows)).phases.set_index("phase").loc["decode"]
    assert ph["steps"] == 2 and ph["kernels"] == 3


# --- costs go to the kernels that do the work ---------------------------------------------------

def test_memsets_and_copies_never_carry_flops(tmp_path):
    # an old file where a reader split a GEMM op's FLOPs onto its memset: the analysis still gives
    # the memset 0 FLOPs (it does none), keeps its bytes, and puts no memset on the roofline
    rows = [k("gemm", 0, 1000, "prefill/step=0", model_flops=1e9, model_bytes=1e6),
            k("Memset (Device)", 1000, 100, "prefill/step=0", kind="memset", model_flops=1e8, model_bytes=4096)]
    a = analyze(build(tmp_path, rows))
    g = a.groups().set_index("key")
    ms = g.loc[[x for x in g.index if x.lower().startswith("memset")][0]]
    assert ms["flops"] == 0                                      # known: a memset does no FLOPs
    assert math.isnan(ms["tflops"]) and math.isnan(ms["ai"])     # no FLOP rate, no roofline point
    assert math.isnan(ms["flops_coverage"]) and ms["bytes_coverage"] == 1.0
    assert ms["tbps"] == pytest.approx(4096 / 100e-9 / 1e12)
    assert ms["pct_of_roof"] == pytest.approx(4096 / 100e-9 / H100_BW)
    assert ms["bound"] in ("memory", "latency")
    pts = a.roofline()
    assert not any(str(x).lower().startswith("memset") for x in pts["key"])



def test_uncounted_kernels_beside_a_copy_have_unknown_flops_not_the_copys_zero(tmp_path):
    # the copy's 0 FLOPs is known, the kernel's FLOPs are not: the phase's FLOPs are unknown (null),
    # while a phase where one kernel's FLOPs are known keeps their sum (with its coverage)
    rows = [k("custom_kernel", 0, 1000, "decode/step=0", model_bytes=1e6),
            k("Memset (Device)", 1000, 100, "decode/step=0", kind="memset", model_bytes=4096),
            k("gemm", 2000, 1000, "prefill/step=0", model_flops=1e9, model_bytes=1e6),
            k("custom_kernel", 3000, 1000, "prefill/step=0", model_bytes=1e6),
            k("Memset (Device)", 4000, 100, "prefill/step=0", kind="memset", model_bytes=4096)]
    a = analyze(build(tmp_path, rows))
    ph = a.phases.set_index("phase")
    assert math.isnan(ph.loc["decode", "flops"]) and ph.loc["decode", "flops_coverage"] == 0
    assert ph.loc["prefill", "flops"] == 1e9 and ph.loc["prefill", "flops_coverage"] == pytest.approx(0.5)
    g = a.groups().set_index("key")
    assert g.loc[[x for x in g.index if x.lower().startswith("memset")][0], "flops"] == 0

def test_host_copies_are_not_judged_against_hbm(tmp_path):
    rows = [k("Memcpy HtoD (Pinned -> Device)", 0, 10_000, "decode/step=0", kind="memcpy", model_bytes=2.5e8)]
    a = analyze(build(tmp_path, rows))
    g = a.groups().iloc[0]
    # its bytes cross PCIe, not HBM: no HBM rate and no HBM verdict (issue 33) ...
    assert math.isnan(g["tbps"]) and math.isnan(g["pct_of_roof"]) and g["bound"] is None
    # ... its rate is judged against its link instead
    c = a.copies.set_index("direction").loc["HtoD"]
    assert c["rate"] == pytest.approx(2.5e8 / 1e-5) and c["link_frac"] == pytest.approx(2.5e13 / c["link_bw"])


def test_copies_neither_cover_nor_dilute_the_compute_kernels(tmp_path):
    # 700 ns of host-to-device copy (bytes known, PCIe) and 300 ns of a GEMM with no cost: the
    # copy's known bytes and zero FLOPs say nothing about the GEMM, so no MBU/MFU verdict and no bound
    rows = [k("Memcpy HtoD (Pinned -> Device)", 0, 700, "run/step=0", kind="memcpy", model_bytes=1e5),
            k("nvjet_gemm", 700, 300, "run/step=0")]
    ph = analyze(build(tmp_path, rows)).phases.iloc[0]
    assert ph["bytes_coverage"] == 0 and ph["flops_coverage"] == 0
    assert ph["mbu_status"] == ph["mfu_status"] == "unknown" and math.isnan(ph["mbu"]) and math.isnan(ph["mfu"])
    assert ph["bound"] is None
    # a zero-fill memset (device side: HBM bytes) beside a costed GEMM: FLOPs cover all the compute
    # time; bytes cover both
    rows = [k("Memset (Device)", 0, 500, "decode/step=0", kind="memset", model_bytes=1e5),
            k("gemv", 500, 500, "decode/step=0", model_flops=1e6, model_bytes=1e6)]
    ph = analyze(build(tmp_path, rows, name="m.parquet")).phases.iloc[0]
    assert ph["flops_coverage"] == 1.0 and ph["bytes_coverage"] == 1.0 and ph["ai_coverage"] == 1.0
    assert ph["ai"] == pytest.approx(1.0)                         # the GEMV's own 1e6 / 1e6
    assert ph["mbu"] == pytest.approx(1.1e6 / 1e-6 / H100_BW)


def test_integer_gemm_has_unknown_flops_not_zero(tmp_path):
    # an int8 GEMM with counters: FP FLOP counters read 0 for integer tensor-core work
    rows = [k("sm80_xmma_gemm_s8s8_s32_tn", 0, 1000, "decode/step=0", counters=True, flops=0.0,
              dram_read=1e6, dram_write=1e5),
            k("cutlass_int8_kernel", 1000, 1000, "decode/step=0", op="aten::_int_mm", model_bytes=2e6)]
    a = analyze(build(tmp_path, rows))
    g = a.groups().set_index("key")
    for key in g.index:
        assert math.isnan(g.loc[key, "flops"]) and math.isnan(g.loc[key, "ai"]) and math.isnan(g.loc[key, "tflops"])
    ph = a.phases.iloc[0]
    assert math.isnan(ph["mfu"]) and ph["mfu_status"] == "unknown" and ph["flops_coverage"] == 0
    assert ph["bytes"] == pytest.approx(1.1e6 + 2e6)


def _kineto_doc():
    """One aten::mm that issued a memset (zero-fill) and two GEMM kernels, and a DtoD copy."""
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 1000.0, "dur": 100.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1002.0, "dur": 20.0,
         "args": {"External id": 7, "Input Dims": [[128, 256], [256, 512]], "Input type": ["c10::BFloat16"] * 2}},
    ]
    for i, corr in enumerate((11, 12, 13)):
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                   "ts": 1003.0 + 3 * i, "dur": 2.0, "args": {"correlation": corr, "External id": 7}})
    ev += [
        {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 2000.0, "dur": 2.0,
         "args": {"device": 0, "stream": 7, "correlation": 11, "bytes": 65536}},
        {"ph": "X", "cat": "kernel", "name": "gemm_main", "pid": 0, "tid": 7, "ts": 2003.0, "dur": 3.0,
         "args": {"device": 0, "stream": 7, "correlation": 12}},
        {"ph": "X", "cat": "kernel", "name": "splitk_reduce", "pid": 0, "tid": 7, "ts": 2007.0, "dur": 1.0,
         "args": {"device": 0, "stream": 7, "correlation": 13}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, "tid": 7, "ts": 2010.0,
         "dur": 1.0, "args": {"device": 0, "stream": 7, "correlation": 99, "bytes": 4096}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7, "ts": 2012.0,
         "dur": 1.0, "args": {"device": 0, "stream": 7, "correlation": 98, "bytes": 4096}},
    ]
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], "traceEvents": ev}


def test_kineto_op_cost_goes_to_compute_kernels_only(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps(_kineto_doc()))
    rows, _ = read_kineto(p)
    by = rows.set_index("name")
    flops, nbytes = 2 * 128 * 256 * 512, (128 * 256 + 256 * 512 + 128 * 512) * 2
    # the memset ran for 2 us of the op's 6 us of GPU time, but it gets none of the GEMM's cost
    assert by.loc["Memset (Device)", "model_bytes"] == 65536
    assert math.isnan(by.loc["Memset (Device)", "model_flops"])
    assert by.loc["gemm_main", "model_flops"] == pytest.approx(flops * 3 / 4)
    assert by.loc["splitk_reduce", "model_flops"] == pytest.approx(flops / 4)
    assert by.loc["gemm_main", "model_bytes"] + by.loc["splitk_reduce", "model_bytes"] == pytest.approx(nbytes)
    assert by.loc["Memcpy DtoD (Device -> Device)", "model_bytes"] == 2 * 4096   # read N + write N
    assert by.loc["Memcpy HtoD (Pinned -> Device)", "model_bytes"] == 4096       # this GPU's side, once


# --- findings: evidence and coverage; a modeled trace states its ideal --------------------------

def test_every_finding_on_a_measured_trace_names_its_evidence(tmp_path):
    rows = [k("gemv", 0, 1000, "decode/step=0", model_bytes=1e6, model_flops=1e6),
            k("gemv", 4000, 1000, "decode/step=0", model_bytes=1e6, model_flops=1e6)]
    a = analyze(build(tmp_path, rows))
    assert a.findings
    for f in a.findings:
        assert f.evidence, f.id
        assert f.coverage is None or 0 <= f.coverage <= 1
    gaps = {f.id: f for f in a.findings}["decode-launch-bound"]
    assert gaps.coverage == 1.0 and "1 step" in gaps.evidence
    d = report_dict(a)
    assert {"evidence", "coverage"} <= set(d["findings"][0])


def test_modeled_trace_states_its_ideal_and_never_says_improve(tmp_path):
    # a modeled decode: a 1 ms memory-bound GEMV at the roof and a norm on the 2 us launch floor
    bw = H100_BW
    rows = [k("gemv", 0, 1_000_000, "decode/step=0", model_bytes=bw * 1e-3, model_flops=2 * bw * 1e-3 / 2),
            k("rms_norm", 1_000_000, 2000, "decode/step=0", model_bytes=1e4, model_flops=1e4)]
    a = analyze(build(tmp_path, rows, modeled=True))
    f = {x.id: x for x in a.findings}
    mbu = (bw * 1e-3 + 1e4) / 1.002e-3 / bw
    assert f["decode-mbu"].title == f"decode ideal: {100 * mbu:.1f}% MBU (memory-bound at the roofline)"
    assert "1 of 2 kernels sit on the 2 µs launch floor" in f["decode-mbu"].detail
    assert "rms_norm" in f["decode-mbu"].detail
    words = " ".join(x.title + " " + x.detail for x in a.findings).lower()
    for bad in ("improve", "healthy", "far from the roof"):
        assert bad not in words
    assert all(x.severity == "info" for x in a.findings)


@pytest.mark.parametrize("name", ["llama3-8b_h100-sxm_b1_fused", "llama3-8b_h200_b64_materialized"])
def test_modeled_samples_never_say_improve(name):
    path = Path(__file__).resolve().parent.parent / "sample_traces" / f"{name}.modeled.parquet"
    a = analyze(load_trace(path))
    words = " ".join(x.title + " " + x.detail for x in a.findings).lower()
    assert "improve" not in words and "far from the roof" not in words
    assert any("launch floor" in x.detail for x in a.findings if x.id == "decode-mbu")


# --- the real captures --------------------------------------------------------------------------

PREFIX = "facebookresearch__HolisticTraceAnalysis__tests__data__"


def _independent_gemm_rates(path: Path) -> dict[str, tuple[float, float]]:
    """Per kernel name: (FLOPs, ns of the launches with FLOPs), from the JSON alone. Each kernel's
    launching op: the cpu_op with its `External id`, else (this older format links nothing) the
    innermost cpu_op around its runtime call on the calling thread; mm/addmm/bmm at 2*M*N*K (per
    batch), the op's FLOPs split across its kernels by duration."""
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    cpu = [e for e in events if e.get("cat") == "cpu_op"]
    by_ext = {e["args"]["External id"]: i for i, e in enumerate(cpu) if "External id" in (e.get("args") or {})}
    runtime = {e["args"]["correlation"]: e for e in events
               if e.get("cat") == "cuda_runtime" and "correlation" in (e.get("args") or {})}
    by_op = defaultdict(list)
    for e in events:
        if e.get("cat") != "kernel":
            continue
        op = by_ext.get(e["args"].get("External id"))
        call = runtime.get(e["args"].get("correlation"))
        if op is None and call is not None:
            around = [i for i, o in enumerate(cpu)
                      if o["tid"] == call["tid"] and o["ts"] <= call["ts"] < o["ts"] + o["dur"]]
            op = max(around, key=lambda i: (cpu[i]["ts"], -cpu[i]["dur"])) if around else None
        if op is not None:
            by_op[op].append(e)

    def op_flops(op):
        dims = op["args"].get("Input Dims")
        name = op["name"]
        if not dims:
            return None
        if name == "aten::mm":
            (m, kk), (_, n) = dims[0], dims[1]
            return 2 * m * n * kk
        if name == "aten::addmm":
            (m, kk), (_, n) = dims[1], dims[2]
            return 2 * m * n * kk
        if name == "aten::bmm":
            (b, m, kk), (_, _, n) = dims[0], dims[1]
            return 2 * b * m * n * kk
        return None

    out = defaultdict(lambda: [0.0, 0.0])
    for i, ks in by_op.items():
        total = op_flops(cpu[i])
        if total is None:
            continue
        durs = sum(e["dur"] for e in ks)
        for e in ks:
            out[e["name"]][0] += total * e["dur"] / durs
            out[e["name"]][1] += e["dur"] * 1e3
    return {n: (f, t) for n, (f, t) in out.items()}


def test_gemm_group_rates_match_an_independent_analysis(fixtures_dir):
    path = fixtures_dir / "traces" / (PREFIX + "trace_filter__sampled_rank-0.json.gz")
    ref = _independent_gemm_rates(path)
    a = analyze(read_trace(path))
    g = a.groups("name").set_index("key")
    checked = 0
    for name, (flops, ns) in ref.items():
        if "gemm" not in name.lower() or name not in g.index:
            continue
        assert g.loc[name, "tflops"] == pytest.approx(flops / (ns / 1e9) / 1e12, rel=0.05), name
        checked += 1
    assert checked >= 10
    # the GEMM category (rooftop's names) from the same independent per-kernel numbers: FLOPs over
    # the time of the launches that have them, never over the category's whole time
    names = set(a.kernels(key="gemm", by="category")["name"].dropna().unique())
    f = sum(v[0] for n, v in ref.items() if n in names)
    t = sum(v[1] for n, v in ref.items() if n in names)
    cat = a.groups("category").set_index("key").loc["gemm"]
    assert cat["tflops"] == pytest.approx(f / (t / 1e9) / 1e12, rel=0.05)
    assert cat["flops_coverage"] == pytest.approx(t / cat["time_ns"], rel=0.05)
    # (with embedding kernels no longer called gemm by name, the category is FLOP-complete here)


def read_trace(path):
    from collectors.open import open_trace
    return open_trace(path)


@pytest.mark.parametrize("name", [
    PREFIX + "nccl_parser_config__nccl_data.json.gz",
    PREFIX + "trace_filter__sampled_rank-0.json.gz",
    PREFIX + "trace_filter__sampled_rank-1.json.gz",
    "Navi-AI-Lab__nvllm__benchmarks__nvllm__traces__cute_paged_attn__2026-04-13-nsys__rank0.1776116491109655086.pt.trace.json.gz",
    "NVIDIA__Fuser__report1.sqlite",
    "GindaChen__nsys-ai__tests__fixtures__h100_2gpu_1s.sqlite",
    "extra-p__extrap__tests__data__nsight__concurrent_example__concurrent.s1__profile1.sqlite",
])
def test_real_captures_make_no_claim_on_thin_coverage(fixtures_dir, name):
    a = analyze(read_trace(fixtures_dir / "traces" / name))
    d = report_dict(a)
    for ph in d["phases"]:
        if ph["bytes_coverage"] is None or ph["bytes_coverage"] < 0.5:
            assert ph["bound"] is None and ph["mbu_status"] != "verdict"
        if ph["bytes_coverage"] is None or ph["bytes_coverage"] < 0.05:
            assert ph["mbu"] is None and ph["tbps"] is None        # no "MBU 3.9e-05%"
        assert ph["steps"] >= 0
    for f in d["findings"]:
        assert "far from the roof" not in f["title"] or (f["coverage"] or 0) >= 0.5
        assert f["evidence"], f["id"]
    for grp in d["categories"] + d["top_kernels"]:
        if grp["key"] in ("memory",) or str(grp["key"]).lower().startswith(("memset", "memcpy")):
            assert not grp["flops"]                                 # 0 or unknown, never a GEMM's
    rows = a.timed
    copies = rows[rows["kind"].isin(["memcpy", "memset"])]
    assert (copies["work_flops"].fillna(0) == 0).all()


def test_trace_without_shapes_has_unknown_gemm_rates(fixtures_dir):
    # HTA's nccl_data trace was recorded without shapes: no GEMM op can be costed, so every GEMM
    # group's FLOPs and rates are unknown (null), never 0, and its coverage says so
    path = fixtures_dir / "traces" / (PREFIX + "nccl_parser_config__nccl_data.json.gz")
    with gzip.open(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    assert not any("Input Dims" in (e.get("args") or {}) for e in events)
    a = analyze(read_trace(path))
    g = a.groups("short_name")
    gemm = g[g["category"] == "gemm"]
    assert len(gemm) >= 5
    assert gemm["flops"].isna().all() and gemm["tflops"].isna().all() and (gemm["flops_coverage"] == 0).all()
    # its device-to-device copies: 2N HBM bytes each, from the bytes CUPTI recorded
    copies = [e for e in events if e.get("cat") == "gpu_memcpy"]
    rows = a.timed[a.timed["kind"] == "memcpy"]
    assert rows["model_bytes"].sum() == 2 * sum(e["args"]["bytes"] for e in copies)


def test_unknown_mbu_of_work_outside_steps_is_not_a_finding():
    # vLLM captures leave a sliver of work between steps; "between steps: MBU unknown" beside the
    # decode finding is noise. The decode phase keeps its finding.
    from types import SimpleNamespace

    import pandas as pd

    from rooftop.analysis.findings import phase_findings
    from rooftop.trace.steps import BETWEEN_STEPS

    row = dict(mbu=float("nan"), mfu=float("nan"), idle_frac=0.01, bound=None, bytes_coverage=0.001,
               flops_coverage=0.0, bytes_source="model", kernels=10, bytes=1e3, span_ns=10_000, flops=None,
               flops_source=None, mbu_status="unknown")
    phases = pd.DataFrame([dict(row, phase="decode"), dict(row, phase=BETWEEN_STEPS)])
    peaks = SimpleNamespace(flops=H100_FLOPS, bw=H100_BW, source="datasheet", reason=None)
    ids = [f.id for f in phase_findings(phases, peaks, {}, [], None, modeled=False)]
    assert "decode-mbu" in ids and f"{BETWEEN_STEPS}-mbu" not in ids


def test_a_group_faster_than_the_roof_is_called_out(tmp_path):
    # 3.35e7 B in 1 us = 33.5 TB/s, 10x an H100's 3.35 TB/s: the bytes cannot be HBM traffic
    rows = [k("fast_copy", 0, 1000, "decode/step=0", model_bytes=3.35e7),
            k("gemv", 2000, 1000, "decode/step=0", model_bytes=1e6)]
    a = analyze(build(tmp_path, rows))
    f = {x.id: x for x in a.findings}["above-roof"]
    assert f.severity == "warn" and f.title.startswith("1 kernel group ran above the roof")
    assert "fast_copy at 1000% of the datasheet roof" in f.detail
    assert f.coverage == pytest.approx(0.5)                      # its share of the kernel time
    ok = analyze(build(tmp_path, [rows[1]], name="ok.parquet"))
    assert "above-roof" not in {x.id for x in ok.findings}
