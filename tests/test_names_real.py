"""Names, categories and counts on a real capture: vLLM v1 on a GB10 (NVFP4 CUTLASS GEMMs whose
names CUPTI left mangled, FP4 quantize kernels, FlashInfer attention), checked against the file
read with plain json."""
from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest

from collectors.open import open_trace
from rooftop.analysis import analyze
from rooftop.present.report import report_dict

VLLM_GB10 = ("traces/Navi-AI-Lab__nvllm__benchmarks__nvllm__traces__cute_paged_attn__2026-04-13-nsys__"
             "rank0.1776116491109655086.pt.trace.json.gz")
GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}


def _expected_category(name: str) -> str | None:
    """An independent reading of this capture's kernel names, by what each kernel is known to do
    (None: a category this check does not cover)."""
    low = name.lower()
    if low.startswith("_zn7cutlass13device_kernelins_4gemm") or "gemm" in low:
        return "gemm"  # the mangled CUTLASS GemmUniversal (block-scaled NVFP4) and a cutlass Kernel2 wmma GEMM
    if "flashinfer::batchprefillwithpagedkvcache" in low or "flashinfer::batchdecodewithpagedkvcache" in low:
        return "attention"
    if "cvt_fp16_to_fp4" in low or "fp4_quant" in low:
        return "quantize"  # vLLM's FP4 quantize kernels and Inductor kernels that end in an FP4 quantize
    if "moe" in low or "expert" in low or "routing" in low:
        return "routing"
    return None


@pytest.fixture(scope="module")
def capture(fixtures_dir):
    path = fixtures_dir / VLLM_GB10
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    gpu = [e for e in events if e.get("cat") in GPU_CATS and e.get("ph") == "X"]
    return path, gpu, open_trace(path)


def test_no_mangled_name_is_left(capture):
    _, gpu, trace = capture
    mangled = sum(e["name"].startswith("_Z") for e in gpu)
    assert mangled > 0  # the capture does hold mangled names: the check below means something
    names = trace.events["name"].astype(object).dropna()
    assert not names.str.startswith("_Z").any()
    gemm = trace.events[trace.events["name"].astype(object).str.startswith("void cutlass::device_kernel<cutlass::gemm")]
    assert len(gemm) == mangled
    assert gemm["name"].astype(object).str.contains("BlockScaled").all()


def test_kernel_counts_exclude_copies(capture):
    _, gpu, trace = capture
    want = Counter(GPU_CATS[e["cat"]] for e in gpu)
    doc = report_dict(analyze(trace))
    tot = doc["totals"]
    assert (tot["kernels"], tot["memcpy"], tot["memset"]) == (want["kernel"], want["memcpy"], want["memset"])
    assert want["memcpy"] > 0 and want["memset"] > 0
    for kind, key in (("kernel", "kernel_time_ns"), ("memcpy", "memcpy_time_ns"), ("memset", "memset_time_ns")):
        us = sum(float(e["dur"]) for e in gpu if GPU_CATS[e["cat"]] == kind)
        assert tot[key] == pytest.approx(us * 1e3, rel=1e-6, abs=len(gpu))


def test_categories_match_an_independent_reading(capture):
    _, gpu, trace = capture
    want = Counter(_expected_category(e["name"]) for e in gpu if e["cat"] == "kernel")
    kernels = trace.events[trace.events["kind"] == "kernel"]
    got = Counter(kernels["category"].astype(object))
    for cat in ("attention", "gemm", "quantize", "routing"):
        assert got[cat] == want[cat], cat
    assert want["gemm"] > 0 and want["attention"] > 0 and want["quantize"] > 0


def test_display_names_are_unique_and_json_keys_whole(capture):
    _, _, trace = capture
    ev = trace.events
    pairs = ev[["name", "short_name"]].astype(object).drop_duplicates()
    assert pairs["name"].is_unique and pairs["short_name"].is_unique
    doc = report_dict(analyze(trace), top=50)
    names = set(ev["name"].astype(object))
    for k in doc["top_kernels"]:
        assert k["key"] in names and "…" not in k["key"]


@pytest.mark.parametrize("fixture", ["traces/NVIDIA__Fuser__report1.sqlite", "traces/NVIDIA__Fuser__report1.h100-8fa9ec29.sqlite"])
def test_nsys_gemm_kernels_are_gemm(fixtures_dir, fixture):
    import sqlite3
    path = fixtures_dir / fixture
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    names = [n for (n,) in con.execute("SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                        "JOIN StringIds s ON s.id = k.demangledName")]
    con.close()
    want = sum(n.startswith("nvjet") or "gemm" in n.lower() for n in names)
    assert want > 0
    trace = open_trace(path)
    kernels = trace.events[trace.events["kind"] == "kernel"]
    assert len(kernels) == len(names)
    assert int((kernels["category"] == "gemm").sum()) == want
    pairs = kernels[["name", "short_name"]].astype(object).drop_duplicates()
    assert pairs["short_name"].is_unique
