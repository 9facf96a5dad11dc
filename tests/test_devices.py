"""The GPU spec table, device-name matching, and the peaks a trace is judged against."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooftop.devices import GPUSpec, Peaks, all_gpus, by_key, match, normalize_dtype, peaks

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
]

UNKNOWN = [
    "NVIDIA GeForce GTX 1060 with Max-Q Design", "Tesla T4", "CPU (x86_64)", "", "   ", None,
    "NVIDIA A10",          # not an A100, not an A10G
    "NVIDIA H100",         # SXM or PCIe? ambiguous: never guessed
    "NVIDIA L40",          # not an L40S, not an L4
    "NVIDIA GB200",        # not a B200
    "NVIDIA GeForce RTX 4090 D", "NVIDIA GeForce RTX 4090 Laptop GPU",
    "NVIDIA H100 80GB HBM3 MIG 1g.10gb",  # a slice: full-GPU peaks would be wrong
    "AMD Instinct MI300A", "Tesla V100-SXM2-16GB",
]


@pytest.mark.parametrize("name,key", KNOWN)
def test_match_real_device_names(name, key):
    spec = match(name)
    assert spec is not None and spec.key == key


@pytest.mark.parametrize("name", UNKNOWN)
def test_unknown_devices_are_none(name):
    assert match(name) is None


def test_whole_words_only():
    assert match("NVIDIA A10") is None
    assert match("NVIDIA GH200 480GB").key == "gh200"  # "H200" inside "GH200" is not an H200
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
    required = {"h100-sxm", "h100-pcie", "h100-nvl", "h200", "h200-nvl", "a100-40gb", "a100-80gb",
                "a100-80gb-pcie", "l40s", "l4", "a10g", "rtx-4090", "b200", "gh200", "mi300x"}
    assert required <= set(rows)
    for g in all_gpus():
        raw = rows[g.key]
        assert g.peak_bf16 == pytest.approx(raw["bf16"] * 1e12)
        assert g.peak_bw == pytest.approx(raw["bw_tbs"] * 1e12)
        assert g.l2_bytes == raw["l2_mib"] * 2**20
        assert g.source and g.sparse and isinstance(g.confirmed, bool)
        assert g.peak_fp32 < g.peak_bf16
        if g.peak_fp8 is not None:
            assert g.peak_fp8 == pytest.approx(2 * g.peak_bf16, rel=0.02)


def test_dense_datasheet_numbers():
    h100 = by_key("h100-sxm")
    assert h100.peak_bf16 == 989.4e12  # dense; the 1,979 headline is 2:4 sparse
    assert h100.peak_bw == 3.35e12 and h100.sms == 132 and h100.memory_bytes == 80e9
    assert h100.ridge() == pytest.approx(295.3, abs=0.1)
    assert by_key("h200").ridge("bf16") == pytest.approx(206.1, abs=0.1)
    assert h100.ridge("fp8") == pytest.approx(590.7, abs=0.1)
    assert h100.peak_flops("fp32") == 67e12  # fp32 runs on the non-tensor pipes
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
    assert p.flops == 1979e12 and p.bw == 2.9e12 and p.source == "measured" and p.dtype == "fp8"


def test_dtype_from_model_then_workload():
    assert peaks(_meta(dtype="torch.float32")).flops == 67e12
    assert peaks(_meta(wl_dtype="fp8")).flops == 1979e12
    assert peaks(_meta(dtype="fp16", wl_dtype="fp8")).flops == 989.4e12
    assert peaks(_meta(dtype="fp16"), dtype="fp32").flops == 67e12  # explicit argument wins


def test_cpu_run_has_no_peaks():
    for meta in (_meta(name="CPU (x86_64)"), _meta(name=None, workload={"device": "cpu"})):
        p = peaks(meta)
        assert p.flops is None and p.bw is None and p.source is None
        assert p.reason == "CPU run: no HBM/tensor peaks; MBU/MFU unknown"


def test_unknown_device():
    p = peaks(_meta(name="Tesla T4"))
    assert p.flops is None and p.bw is None and p.source is None
    assert p.reason == "unknown device 'Tesla T4': not in the spec table"
    assert "names no device" in peaks({}).reason


def test_unknown_device_uses_the_traces_own_datasheet():
    # e.g. an ncu report's peaks for a GPU the table lacks
    p = peaks(_meta(name="Tesla T4", datasheet={"flops": 65e12, "bw": 320e9}))
    assert (p.flops, p.bw, p.source, p.reason) == (65e12, 320e9, "datasheet", None)
    # ...but the spec table wins for a known one
    assert peaks(_meta(datasheet={"flops": 1.0, "bw": 1.0})).flops == 989.4e12


def test_missing_fp8_peak_says_why():
    p = peaks(_meta(name="NVIDIA A100-SXM4-80GB", dtype="fp8"))
    assert p.flops is None and p.bw == 2.039e12 and "fp8" in p.reason


def test_spec_is_frozen():
    with pytest.raises(Exception):
        by_key("h100-sxm").peak_bw = 1  # type: ignore[misc]
    assert isinstance(by_key("h100-sxm"), GPUSpec)
