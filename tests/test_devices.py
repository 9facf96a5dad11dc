"""The GPU spec table, device-name matching, and the peaks a trace is judged against."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooftop.hardware.gpus import (DTYPES, GPUSpec, Override, Peaks, all_gpus, by_key, identify, match, normalize_dtype,
                             peaks)

TABLE = Path(__file__).resolve().parents[1] / "rooftop" / "data" / "gpus.json"

# Device names as torch.cuda.get_device_name / nvidia-smi / ncu print them.
KNOWN = [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA H100 NVL", "h100-nvl"),
    ("NVIDIA H200", "h200"),
    ("NVIDIA H200 NVL", "h200-nvl"),
    ("NVIDIA GH200 480GB", "gh200"),
    ("NVIDIA GH200 144G HBM3e", "gh200-hbm3e"),
    ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
    ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
    ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"),
    ("NVIDIA A100-PCIE-40GB", "a100-40gb-pcie"),
    # Meta's internal A100 SXM4 board: PCI device 20B0, the A100-SXM4-40GB id.
    ("A100-PG509-200", "a100-40gb"),
    ("NVIDIA A100-PG509-200", "a100-40gb"),
    ("NVIDIA A10G", "a10g"),
    ("NVIDIA L4", "l4"),
    ("NVIDIA L40S", "l40s"),
    ("NVIDIA GeForce RTX 4090", "rtx-4090"),
    ("NVIDIA B200", "b200"),
    ("AMD Instinct MI300X", "mi300x"),
    ("nvidia h100 80gb hbm3", "h100-sxm"),
    ("  NVIDIA H100 SXM5 80GB ", "h100-sxm"),
    ("NVIDIA H800", "h800"),
    ("NVIDIA H800 PCIe", "h800-pcie"),
    ("NVIDIA H20", "h20"),
    ("NVIDIA GB200", "gb200"),
    ("NVIDIA B100", "b100"),
    ("NVIDIA A800-SXM4-80GB", "a800-80gb"),
    ("NVIDIA A800 80GB PCIe", "a800-80gb-pcie"),
    ("NVIDIA A10", "a10"),
    ("NVIDIA L20", "l20"),
    ("NVIDIA L40", "l40"),
    ("NVIDIA GeForce RTX 5090", "rtx-5090"),
    ("NVIDIA GB10", "gb10"),
    ("GeForce GTX 1060 with Max-Q Design", "gtx-1060-maxq"),
]

UNKNOWN = [
    "NVIDIA GeForce GTX 1060 6GB", "Tesla P4", "CPU (x86_64)", "", "   ", None,
    "NVIDIA H100",         # SXM, PCIe or NVL? ambiguous without the file's figures: never guessed
    "NVIDIA A100",         # 40 or 80 GB, SXM or PCIe
    "NVIDIA GeForce RTX 5090 D", "NVIDIA GeForce RTX 5080 Laptop GPU",
    "NVIDIA GeForce RTX 4090 D", "NVIDIA GeForce RTX 4090 Laptop GPU",
    "NVIDIA H100 80GB HBM3 MIG 1g.10gb",  # a slice: full-GPU peaks would be wrong
    "AMD Instinct MI300A", "Tesla V100S-PCIE-32GB",  # V100S: faster clocks and HBM, not a V100 row
    "NVIDIA GeForce RTX 4060 Ti",  # 8 or 16 GB: same name, told apart only by the file's memory size
]


@pytest.mark.parametrize("name,key", KNOWN)
def test_match_real_device_names(name, key):
    spec = match(name)
    assert spec is not None and spec.key == key


@pytest.mark.parametrize("name", UNKNOWN)
def test_unknown_devices_are_none(name):
    assert match(name) is None


def test_whole_words_only():
    assert match("NVIDIA A10").key == "a10"  # not an A100, not an A10G
    assert match("NVIDIA L40").key == "l40" and match("NVIDIA L4").key == "l4"
    assert match("NVIDIA GH200 480GB").key == "gh200"  # "H200" inside "GH200" is not an H200
    assert match("NVIDIA GB200").key == "gb200"  # "B200" inside "GB200" is not a B200
    assert match("NVIDIA H20").key == "h20" and match("NVIDIA H200").key == "h200"
    assert match("NVIDIA A100-SXM4-80GB").key != "a10g"


def test_every_row_matches_its_own_name():
    # predict writes gpu.name into the trace; loading it must find the same row again.
    for g in all_gpus():
        assert match(g.name) == g, g.key


def test_by_key_case_insensitive():
    assert by_key("H100-SXM") == by_key("h100-sxm") == match("NVIDIA H100 80GB HBM3")
    assert by_key(" h200 ").key == "h200"
    assert by_key("h100") is None and by_key("") is None


def test_table_against_an_independent_read_of_the_json():
    doc = json.loads(TABLE.read_text())
    rows = {g["key"]: g for g in doc["gpus"]}
    assert len(rows) == len(doc["gpus"]) == len(all_gpus())  # unique keys
    required = {"h100-sxm", "h100-pcie", "h100-nvl", "h800", "h20", "h200", "h200-nvl", "gh200", "gb200", "b200",
                "b100", "a100-40gb", "a100-80gb", "a100-40gb-pcie", "a100-80gb-pcie", "a800-80gb", "a10", "a10g",
                "l4", "l20", "l40", "l40s", "rtx-4090", "rtx-5090", "gb10", "mi300x"}
    assert required <= set(rows)
    for g in all_gpus():
        raw = rows[g.key]
        for d in DTYPES:
            v = raw["tflops"].get(d)
            assert g.tflops[d] == (None if v is None else pytest.approx(v * 1e12)), (g.key, d)
        assert g.peak_bw == pytest.approx(raw["bw_tbs"] * 1e12)
        assert g.l2_bytes == raw["l2_mib"] * 2**20
        assert g.source and g.sparse and isinstance(g.confirmed, bool)
        # unconfirmed rows say so, in the notes or source
        said = (g.notes + g.source + (g.accumulate or "")).lower()
        assert g.confirmed or any(w in said for w in ("unconfirmed", "recalled", "derived", "uncertain")), g.key
        if g.peak_bf16 is None:
            continue
        assert g.peak_fp32 < g.peak_bf16
        # dense tensor rates step by 2x: tf32 = bf16 / 2, fp8 = 2 bf16 (Ada/Hopper/Blackwell), fp4 >= 2 fp8
        assert g.tflops["tf32"] == pytest.approx(g.peak_bf16 / 2, rel=0.02), g.key
        if g.peak_fp8 is not None:
            assert g.peak_fp8 == pytest.approx(2 * g.peak_bf16, rel=0.02), g.key
        if g.tflops["fp4"] is not None:
            assert g.tflops["fp4"] >= 2 * g.peak_fp8 * 0.99, g.key
        if g.tflops["int8"] is not None:
            assert g.tflops["int8"] == pytest.approx(2 * g.peak_bf16, rel=0.02) or \
                g.tflops["int8"] == pytest.approx(4 * g.peak_bf16, rel=0.02), g.key  # GeForce: int32-acc full rate


def test_dense_datasheet_numbers():
    h100 = by_key("h100-sxm")
    assert h100.peak_bf16 == 989.4e12  # dense; the 1,979 headline is 2:4 sparse
    assert h100.peak_bw == 3.35e12 and h100.sms == 132 and h100.memory_bytes == 80e9
    assert h100.ridge() == pytest.approx(295.3, abs=0.1)
    assert by_key("h200").ridge("bf16") == pytest.approx(206.1, abs=0.1)
    assert h100.ridge("fp8") == pytest.approx(590.7, abs=0.1)
    assert h100.peak_flops("fp32") == 67e12  # fp32 runs on the non-tensor pipes
    assert h100.peak_flops("tf32") == 494.7e12  # tf32 is judged against the tf32 tensor peak
    assert h100.peak_flops("int8") is None  # integer ops are not FLOPs
    assert by_key("b200").peak_flops("fp4") == 9000e12 and by_key("b200").peak_flops("nvfp4") == 9000e12
    assert h100.peak_flops("fp4") is None  # Hopper has no FP4 rate
    assert h100.peak_flops("torch.bfloat16") == 989.4e12
    assert by_key("a100-80gb").peak_flops("fp8") is None and by_key("a100-80gb").ridge("fp8") is None
    assert by_key("a100-80gb").peak_bw == 2.039e12 and by_key("a100-80gb-pcie").peak_bw == 1.935e12
    assert by_key("h100-nvl").confirmed is False and by_key("h200").confirmed is True


def test_geforce_half_rate_accumulate():
    rtx = by_key("rtx-4090")
    assert rtx.peak_bf16 == 165.2e12  # fp32 accumulate: half the 330.3 fp16-accumulate rate
    assert "half rate" in rtx.accumulate and "330.3" in rtx.accumulate


def test_normalize_dtype():
    assert normalize_dtype("torch.bfloat16") == "bf16"
    assert normalize_dtype("float8_e4m3fn") == "fp8"
    assert normalize_dtype("int4") is None and normalize_dtype(None) is None
    assert normalize_dtype("tf32") == "tf32" and normalize_dtype("float32") == "fp32"
    assert normalize_dtype("float4_e2m1fn_x2") == "fp4" and normalize_dtype("torch.int8") == "int8"
    assert normalize_dtype("e5m2") == "fp8"


# --- peaks ------------------------------------------------------------------------------------

def _meta(name="NVIDIA H100 80GB HBM3", measured=None, datasheet=None, dtype=None, wl_dtype=None, **extra):
    meta = {"device": {"name": name, "peaks": {}}, "model": {}, "workload": {}}
    if measured is not None:
        meta["device"]["peaks"]["measured"] = measured
    if datasheet is not None:
        meta["device"]["peaks"]["datasheet"] = datasheet
    if dtype:
        meta["model"]["dtype"] = dtype
    if wl_dtype:
        meta["workload"]["dtype"] = wl_dtype
    meta.update(extra)
    return meta


def test_peaks_datasheet():
    p = peaks(_meta())
    assert isinstance(p, Peaks)
    assert (p.flops, p.bw, p.source, p.reason) == (989.4e12, 3.35e12, "datasheet", None)
    assert p.gpu.key == "h100-sxm" and p.dtype == "bf16" and p.measured_bw is None
    assert p.ridge == pytest.approx(295.3, abs=0.1)


def test_measured_wins():
    p = peaks(_meta(measured={"flops": 794.5e12, "bw": 2.9e12}))
    assert (p.flops, p.bw, p.source) == (794.5e12, 2.9e12, "measured")
    assert (p.datasheet_flops, p.datasheet_bw) == (989.4e12, 3.35e12)


def test_measured_flops_of_another_dtype_not_used():
    p = peaks(_meta(measured={"flops": 794.5e12, "bw": 2.9e12, "dtype": "bf16"}, dtype="fp8"))
    assert p.flops == 1978.9e12 and p.bw == 2.9e12 and p.source == "measured" and p.dtype == "fp8"


def test_dtype_from_model_then_workload():
    assert peaks(_meta(dtype="torch.float32")).flops == 67e12
    assert peaks(_meta(wl_dtype="fp8")).flops == 1978.9e12
    assert peaks(_meta(dtype="fp16", wl_dtype="fp8")).flops == 989.4e12
    assert peaks(_meta(dtype="fp16"), dtype="fp32").flops == 67e12  # explicit argument wins


def test_cpu_run_has_no_peaks():
    for meta in (_meta(name="CPU (x86_64)"), _meta(name=None, workload={"device": "cpu"})):
        p = peaks(meta)
        assert p.flops is None and p.bw is None and p.source is None
        assert p.reason == "CPU run: no HBM/tensor peaks; MBU/MFU unknown"


def test_unknown_device():
    p = peaks(_meta(name="Tesla P4"))
    assert p.flops is None and p.bw is None and p.source is None
    assert p.reason.startswith("unknown device 'Tesla P4': not in the spec table; pass --gpu KEY")
    assert "--peaks BW_TBps,TFLOPs" in p.reason
    assert "names no device" in peaks({}).reason and "--gpu" in peaks({}).reason


def test_unknown_device_uses_the_traces_own_datasheet():
    # e.g. an ncu report's peaks for a GPU the table lacks
    p = peaks(_meta(name="Tesla P4", datasheet={"flops": 65e12, "bw": 320e9}))
    assert (p.flops, p.bw, p.source, p.reason) == (65e12, 320e9, "datasheet", None)
    # ...but the spec table wins for a known one
    assert peaks(_meta(datasheet={"flops": 1.0, "bw": 1.0})).flops == 989.4e12


def test_missing_fp8_peak_says_why():
    p = peaks(_meta(name="NVIDIA A100-SXM4-80GB", dtype="fp8"))
    assert p.flops is None and p.bw == 2.039e12 and "fp8" in p.reason
    p = peaks(_meta(name="NVIDIA A100-SXM4-80GB", dtype="int8"))
    assert p.flops is None and "integer" in p.reason


def test_spec_is_frozen():
    with pytest.raises(Exception):
        by_key("h100-sxm").peak_bw = 1  # type: ignore[misc]
    assert isinstance(by_key("h100-sxm"), GPUSpec)


# --- identifying from everything the file says ---------------------------------------------------

def dev(name=None, cc=None, sms=None, memory=None, bw=None, ncu=None):
    d = {"name": name, "cc": cc, "sms": sms, "memory_bytes": memory, "memory_bandwidth": bw}
    if ncu:
        d["peaks"] = {"ncu": ncu}
    return d


def test_family_resolved_by_figures():
    # a bare name: SMs and memory tell the variant (85.0e9 B is what an 80 GB H100 reports)
    got = identify(dev("NVIDIA H100", "9.0", 132, 84_942_979_072))
    assert got.spec.key == "h100-sxm" and got.by == ("name", "cc", "sms", "memory") and not got.inferred
    assert identify(dev("NVIDIA H100", "9.0", 114, 85e9)).spec.key == "h100-pcie"
    assert identify(dev("NVIDIA H100", "9.0", 132, 100.5e9)).spec.key == "h100-nvl"
    # the H20's HBM3e refresh reports the same name; 150 GB of memory says which
    assert identify(dev("NVIDIA H20", "9.0", 78, 150.1e9)).spec.key == "h20-141gb"
    assert identify(dev("NVIDIA H20", "9.0", 78, 102e9)).spec.key == "h20"
    # A100 40GB SXM or PCIe: the same SMs, memory and bandwidth: stays ambiguous
    amb = identify(dev("NVIDIA A100", "8.0", 108, 42.3e9))
    assert amb.spec is None and set(amb.candidates) == {"a100-40gb", "a100-40gb-pcie"} and "--gpu" in amb.reason


def test_figures_that_contradict_the_name():
    got = identify(dev("NVIDIA GeForce RTX 5090", "12.0", 84, 17e9))
    assert got.spec is None and "fit no spec row" in got.reason
    assert identify(dev("NVIDIA H200", "9.0", 132, 150.1e9, 4.9167e12)).spec.key == "h200"


def test_nameless_files_need_cc_and_a_figure():
    # the RTX 5090 details CSVs: CC 12.0 and the bandwidth their counters imply
    got = identify(dev(cc="12.0", ncu={"bw_from_throughput": 1.763e12}))
    assert got.spec.key == "rtx-5090" and got.inferred and got.by == ("cc", "bw")
    # CC alone: never a match, even when one row has it
    assert identify(dev(cc="12.0")).spec is None
    # CC 8.6 fits the A10 and the A10G
    amb = identify(dev(cc="8.6"))
    assert amb.spec is None and set(amb.candidates) == {"a10", "a10g", "rtx-3090"} and "--gpu" in amb.reason
    # a bandwidth that fits no row of that CC
    assert identify(dev(cc="12.0", ncu={"bw_from_throughput": 0.50e12})).spec is None
    # a name that is not in the table is never matched by its CC
    assert identify(dev("NVIDIA GeForce RTX 5070", "12.0", 48)).spec is None


def test_flops_for_each_dtype():
    p = peaks(_meta())
    assert p.flops_for("bf16") == p.flops == 989.4e12
    assert p.flops_for("fp8") == 1978.9e12 and p.flops_for("tf32") == 494.7e12 and p.flops_for("fp32") == 67e12
    assert p.flops_for("int8") is None and p.flops_for("fp4") is None
    m = peaks(_meta(measured={"flops": 794.5e12, "bw": 2.9e12, "dtype": "bf16"}))
    assert m.flops_for("bf16") == 794.5e12 and m.flops_for("fp8") == 1978.9e12


def test_no_dtype_said_on_a_gpu_without_bf16_uses_fp32():
    p = peaks(_meta(name="GeForce GTX 1060 with Max-Q Design"))
    assert p.dtype == "fp32" and p.flops == 3.8e12 and p.bw == 0.192e12


def test_override_gpu_and_peaks():
    p = peaks(_meta(name=None), override=Override(gpu="h200"))
    assert p.gpu.key == "h200" and p.bw == 4.8e12 and p.override == "gpu" and p.matched_by == ("--gpu",)
    p = peaks(_meta(name="Tesla P4"), override=Override(bw=0.32e12, flops=65e12))
    assert (p.bw, p.flops, p.source, p.override, p.reason) == (0.32e12, 65e12, "user", "peaks", None)
    with pytest.raises(ValueError, match="no such GPU"):
        peaks(_meta(), override=Override(gpu="h900"))
    assert Override.parse_peaks("3.35,989") == (3.35e12, 989e12)
    with pytest.raises(ValueError, match="BW_TBps,TFLOPs"):
        Override.parse_peaks("fast")


def test_ncu_peaks_where_the_table_has_no_row_and_differences():
    ncu = {"bw": 0.3e12, "fp32_flops": 8e12, "tensor_fp16_dst_fp16_flops": 130e12,
           "tensor_fp16_dst_fp32_flops": 65e12, "tensor_bf16_dst_fp32_flops": 65e12}
    meta = _meta(name="Tesla P4")
    meta["device"]["peaks"]["ncu"] = ncu
    p = peaks(meta)
    assert (p.source, p.bw, p.flops) == ("ncu", 0.3e12, 65e12)
    assert p.flops_for("fp16") == 65e12  # the fp32-accumulate rate wins (what inference kernels run)
    assert p.flops_for("fp32") == 8e12 and p.differences == []
    # a known GPU: the datasheet is used, and where ncu differs by more than 10% both are shown
    meta = _meta(name="NVIDIA A100 80GB PCIe")
    meta["device"]["peaks"]["ncu"] = {"bw": 1.929e12, "fp32_flops": 14.36e12}
    p = peaks(meta)
    assert p.source == "datasheet" and p.bw == 1.935e12 and p.ncu_bw == 1.929e12
    diffs = p.differences
    assert [d["what"] for d in diffs] == ["fp32 flops"]
    assert diffs[0]["ratio"] == pytest.approx(14.36 / 19.5)


# --- every real capture: the device the file names, read independently --------------------------

def _kineto_device(path):
    import gzip
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    props = doc.get("deviceProperties") or []
    return props[0]["name"] if props else None


def _sqlite_device(path):
    import sqlite3
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        return con.execute("SELECT name FROM TARGET_INFO_GPU LIMIT 1").fetchone()[0]
    finally:
        con.close()


def _ncu_rep_device(path):
    ncu_report = pytest.importorskip("ncu_report")
    action = ncu_report.load_report(str(path)).range_by_idx(0).action_by_idx(0)
    return action.metric_by_name("device__attribute_display_name").value()


def _csv_cc(path):
    import csv
    with open(path, newline="") as fh:
        return next(csv.DictReader(fh))["CC"]


FIXTURES = [
    # (file, independent reader, device name it must say, spec key, how it is matched)
    ("traces/NVIDIA__Fuser__report1.h100-8fa9ec29.sqlite", _sqlite_device, "NVIDIA H100 80GB HBM3", "h100-sxm", "name"),
    ("traces/NVIDIA__Fuser__report1.sqlite", _sqlite_device, "NVIDIA H200", "h200", "name"),
    ("traces/extra-p__extrap__tests__data__nsight__concurrent_example__concurrent.s1__profile1.sqlite",
     _sqlite_device, "GeForce GTX 1060 with Max-Q Design", "gtx-1060-maxq", "name"),
    ("traces/Navi-AI-Lab__nvllm__benchmarks__nvllm__traces__cute_paged_attn__2026-04-13-nsys__rank0.1776116491109655086.pt.trace.json.gz",
     _kineto_device, "NVIDIA GB10", "gb10", "name"),
    ("traces/facebookresearch__HolisticTraceAnalysis__tests__data__nccl_parser_config__nccl_data.json.gz",
     _kineto_device, "NVIDIA A100-PG509-200", "a100-40gb", "name"),
    ("traces/facebookresearch__HolisticTraceAnalysis__tests__data__triton_example__triton_example.json.gz",
     _kineto_device, "NVIDIA A100-PG509-200", "a100-40gb", "name"),
    ("ncu/panjd123__cutlass__report.ncu-rep", _ncu_rep_device, "NVIDIA A100 80GB PCIe", "a100-80gb-pcie", "name"),
    ("ncu/AveryClapp__ESMM-Research__profile.ncu-rep", _ncu_rep_device, "NVIDIA A10G", "a10g", "name"),
    ("ncu/Navi-AI-Lab__nvllm__benchmarks__nvllm__traces__cute_paged_attn__2026-05-03-w-o-k-parallel-harness__ncu__wo_split_8__kernel.ncu-rep",
     _ncu_rep_device, "NVIDIA GB10", "gb10", "name"),
    ("ncu/CodeGandee__llm-perf-opt__reports__20251107-dsocr__ncu-v2__kernel_0001_67bdb7e29d1bb4e0ca0aec954ef18af3__ncu.details.csv",
     _csv_cc, "12.0", "rtx-5090", "inferred"),
    ("ncu/CodeGandee__llm-perf-opt__reports__20251107-dsocr__ncu-v2__kernel_0013_178ff748c21ea29399b8568af3cd1f02__ncu.details.csv",
     _csv_cc, "12.0", "rtx-5090", "inferred"),
]


@pytest.mark.parametrize("rel,reader,said,key,how", FIXTURES, ids=[f[3] + ":" + f[0][:40] for f in FIXTURES])
def test_fixture_devices(fixtures_dir, rel, reader, said, key, how):
    from collectors.open import open_trace
    path = fixtures_dir / rel
    assert reader(path) == said
    trace = open_trace(path)
    if how == "name":
        assert trace.meta["device"]["name"] == said
    else:
        assert trace.meta["device"]["cc"] == said and not trace.meta["device"].get("name")
    p = peaks(trace.meta)
    spec = by_key(key)
    assert p.gpu == spec and p.inferred == (how == "inferred")
    assert p.bw == spec.peak_bw and p.source == "datasheet"
    assert p.flops == spec.peak_flops(p.dtype) and p.flops is not None


@pytest.mark.parametrize("rel", [
    "traces/facebookresearch__HolisticTraceAnalysis__tests__data__trace_filter__sampled_rank-0.json.gz",
    "traces/facebookresearch__HolisticTraceAnalysis__tests__data__trace_filter__sampled_rank-1.json.gz",
    "ncu/AveryClapp__ESMM-Research__metrics.csv",   # CC 8.6 only: A10 or A10G
])
def test_fixtures_that_do_not_say_stay_unknown(fixtures_dir, rel):
    from collectors.open import open_trace
    path = fixtures_dir / rel
    if rel.endswith(".json.gz"):
        assert _kineto_device(path) is None  # no deviceProperties at all
    p = peaks(open_trace(path).meta)
    assert p.gpu is None and p.flops is None and p.bw is None
    assert "--gpu KEY" in p.reason and "--peaks BW_TBps,TFLOPs" in p.reason


def test_report_json_device_keys_and_override(fixtures_dir, capsys):
    from rooftop_cli import main
    path = fixtures_dir / "traces/facebookresearch__HolisticTraceAnalysis__tests__data__trace_filter__sampled_rank-0.json.gz"
    assert main(["report", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["device"]["peak_bw"] is None and "--gpu" in doc["device"]["peaks_reason"]
    assert main(["report", str(path), "--json", "--gpu", "a100-40gb"]) == 0
    doc = json.loads(capsys.readouterr().out)["device"]
    assert (doc["key"], doc["peak_bw"], doc["override"], doc["peaks_source"]) == ("a100-40gb", 1.555e12, "gpu", "datasheet")
    assert doc["peak_flops_by_dtype"]["tf32"] == 156e12
    assert main(["report", str(path), "--peaks", "2,300"]) == 0
    out = capsys.readouterr().out
    assert "peaks    user" in out and "2 TB/s" in out and "(from --peaks)" in out
    assert main(["report", str(path), "--gpu", "h900"]) == 2
    assert "no such GPU" in capsys.readouterr().err
    assert main(["report", str(path), "--peaks", "fast"]) == 2


def test_report_shows_ncu_and_datasheet_where_they_differ(fixtures_dir, capsys):
    pytest.importorskip("ncu_report")
    from rooftop_cli import main
    assert main(["report", str(fixtures_dir / "ncu/panjd123__cutlass__report.ncu-rep"), "--json"]) == 0
    dev_ = json.loads(capsys.readouterr().out)["device"]
    assert dev_["key"] == "a100-80gb-pcie" and dev_["ncu"]["bw"] == pytest.approx(1.929e12, rel=0.01)
    # ncu measures fp32 at its locked ~1.03 GHz: 6,912 FMA/cycle x 2 x 1.03 GHz = 14.2 TFLOP/s
    assert [d["what"] for d in dev_["peaks_differ"]] == ["fp32 flops"]
    assert dev_["ncu"]["flops_by_dtype"]["fp32"] == pytest.approx(6912 * 2 * 1.03e9, rel=0.02)


def test_open_takes_the_same_override(tmp_path, capsys):
    from rooftop_cli import main
    from rooftop.trace import load_trace, write_trace
    from tui.loader import analyze_warm
    rows = [dict(kind="kernel", name="k", start_ns=0, dur_ns=10, device=0, stream=7)]
    path = write_trace(tmp_path / "t.parquet", rows, {"device": {"name": "Tesla P4"}})
    a = analyze_warm(load_trace(path), Override(gpu="h200"))
    assert a.peaks.gpu.key == "h200" and a.peaks.override == "gpu"
    assert analyze_warm(load_trace(path)).peaks.gpu is None
    # an unknown --gpu is refused before the terminal switches to the app
    assert main(["open", str(path), "--gpu", "h900"]) == 2
    assert "no such GPU" in capsys.readouterr().err
    assert main(["open", str(path), "--peaks", "datasheet"]) == 2


def test_diff_takes_the_override(fixtures_dir, capsys):
    from rooftop_cli import commands as cli
    a = fixtures_dir / "traces/facebookresearch__HolisticTraceAnalysis__tests__data__trace_filter__sampled_rank-0.json.gz"
    b = fixtures_dir / "traces/facebookresearch__HolisticTraceAnalysis__tests__data__trace_filter__sampled_rank-1.json.gz"
    over = Override(gpu="a100-80gb")
    from collectors.open import open_analysis
    assert open_analysis(str(a), override=over).peaks.bw == 2.039e12
    assert cli.main(["diff", str(a), str(b), "--gpu", "a100-80gb", "--json"]) == 0
    json.loads(capsys.readouterr().out)
    assert cli.main(["diff", str(a), str(b), "--gpu", "nope"]) == 2
    assert "no such GPU" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["report", "diff", "open"])
def test_a_bad_gpu_key_is_refused_before_any_trace_is_read(tmp_path, capsys, monkeypatch, command):
    """Flags are validated before loading (issue 40): the --gpu error comes first, and no trace is
    opened; a trace that does not even exist is not what the user is told about."""
    import collectors.open
    from rooftop_cli import commands as cli
    opened = []
    monkeypatch.setattr(collectors.open, "open_trace", lambda *a, **k: opened.append(a) or (_ for _ in ()).throw(AssertionError))
    missing = str(tmp_path / "absent.json")
    paths = [missing, missing] if command == "diff" else [missing]
    assert cli.main([command, *paths, "--gpu", "h900"]) == 2
    err = capsys.readouterr().err
    assert "--gpu 'h900': no such GPU" in err and "absent.json" not in err and not opened


# issue 33 item 7: the GPUs users bring, as CUDA/NVML spell them (nvidia-smi --query-gpu=name)
@pytest.mark.parametrize("name,memory,key", [
    ("NVIDIA B300 SXM6 AC", None, "b300"), ("NVIDIA GB300", None, "gb300"), ("NVIDIA B100", None, "b100"),
    ("NVIDIA GB200", None, "gb200"),
    ("Tesla V100-SXM2-16GB", None, "v100-sxm2-16gb"), ("Tesla V100-SXM2-32GB", None, "v100-sxm2-32gb"),
    ("Tesla V100-PCIE-16GB", None, "v100-pcie-16gb"), ("Tesla V100-PCIE-32GB", None, "v100-pcie-32gb"),
    ("Tesla T4", None, "t4"), ("NVIDIA L4", None, "l4"), ("NVIDIA L40S", None, "l40s"), ("NVIDIA A10G", None, "a10g"),
    ("NVIDIA GeForce RTX 3090", None, "rtx-3090"),
    ("NVIDIA GeForce RTX 4060 Ti", 8.59e9, "rtx-4060ti-8gb"), ("NVIDIA GeForce RTX 4060 Ti", 17.17e9, "rtx-4060ti-16gb"),
    ("NVIDIA GeForce RTX 4070", None, "rtx-4070"), ("NVIDIA GeForce RTX 4070 SUPER", None, "rtx-4070-super"),
    ("NVIDIA GeForce RTX 4070 Ti", None, "rtx-4070ti"), ("NVIDIA GeForce RTX 4070 Ti SUPER", None, "rtx-4070ti-super"),
    ("NVIDIA GeForce RTX 4080", None, "rtx-4080"), ("NVIDIA GeForce RTX 4080 SUPER", None, "rtx-4080-super"),
    ("NVIDIA GeForce RTX 4090", None, "rtx-4090"), ("NVIDIA GeForce RTX 5080", None, "rtx-5080"),
    ("NVIDIA GeForce RTX 5090", None, "rtx-5090"),
])
def test_every_gpu_a_user_brings(name, memory, key):
    got = identify({"name": name, "memory_bytes": memory})
    assert got.spec is not None and got.spec.key == key, got.reason


def test_pre_ampere_rows_have_no_bf16_and_dense_rates():
    v100, t4 = by_key("v100-sxm2-32gb"), by_key("t4")
    assert v100.peak_bf16 is None and v100.tflops["tf32"] is None and v100.peak_fp16 == 125e12
    assert t4.tflops["int8"] == 2 * t4.peak_fp16 and t4.peak_bw == 0.32e12
    assert by_key("b300").cc == "10.3" and by_key("b300").tflops["fp4"] > by_key("b200").tflops["fp4"]
