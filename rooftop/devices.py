"""The GPU spec table (datasheet peaks) and matching a trace's device name to it.

Every number is dense (no 2:4 sparsity) at boost clock, from `data/gpus.json`, whose rows cite
their source and say whether the figures were confirmed (reference/roofline.md, section 2).
A name that matches no row, or more than one, is unknown: we never guess a GPU, because a wrong
peak silently skews every MBU/MFU on screen.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping

# Canonical compute dtypes and the spellings traces use for them (torch, numpy, ncu, us).
_DTYPE_ALIASES = {
    "bf16": "bf16", "bfloat16": "bf16",
    "fp16": "fp16", "float16": "fp16", "half": "fp16",
    "fp8": "fp8", "float8": "fp8", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "e4m3": "fp8",
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "tf32": "fp32",
}
DEFAULT_DTYPE = "bf16"

# A MIG slice has a fraction of the SMs and of the bandwidth: full-GPU peaks would be wrong.
_NEVER = re.compile(r"\bMIG\b")


def normalize_dtype(dtype: str | None) -> str | None:
    """'torch.bfloat16' -> 'bf16'; None for a dtype this table has no peak for (e.g. int8)."""
    if not dtype:
        return None
    return _DTYPE_ALIASES.get(str(dtype).strip().lower().replace("torch.", ""))


@dataclass(frozen=True)
class GPUSpec:
    """One row of the spec table. FLOP/s and bytes/s; None where the part has no such peak."""

    key: str
    name: str
    peak_bf16: float
    peak_fp16: float
    peak_fp8: float | None
    peak_fp32: float
    peak_bw: float
    memory_bytes: int
    sms: int
    l2_bytes: int
    notes: str
    source: str
    confirmed: bool = False
    sparse: str = ""
    accumulate: str | None = None
    cc: str | None = None

    def peak_flops(self, dtype: str | None = DEFAULT_DTYPE) -> float | None:
        """Dense peak for a compute dtype: tensor-core rate for bf16/fp16/fp8.

        fp32 (and tf32) use the fp32 non-tensor rate: plain fp32 models run on the FMA pipes
        unless TF32 is switched on, and the non-tensor peak is the honest ceiling for them.
        """
        d = normalize_dtype(dtype or DEFAULT_DTYPE)
        return {"bf16": self.peak_bf16, "fp16": self.peak_fp16, "fp8": self.peak_fp8,
                "fp32": self.peak_fp32}.get(d) if d else None

    def ridge(self, dtype: str | None = DEFAULT_DTYPE) -> float | None:
        """Ridge point in FLOP/byte: peak FLOP/s over peak bytes/s (H100 SXM bf16: 295)."""
        flops = self.peak_flops(dtype)
        return flops / self.peak_bw if flops and self.peak_bw else None


@dataclass(frozen=True)
class _Row:
    spec: GPUSpec
    match: tuple[re.Pattern, ...]
    exclude: tuple[re.Pattern, ...]


def _spec(doc: Mapping[str, Any]) -> GPUSpec:
    # Rounded to whole units so 2.039 TB/s is exactly 2.039e12 (not 2039000000000.0002).
    tf = lambda v: None if v is None else float(round(float(v) * 1e12))  # noqa: E731
    return GPUSpec(
        key=doc["key"], name=doc["name"], peak_bf16=tf(doc["bf16"]), peak_fp16=tf(doc["fp16"]),
        peak_fp8=tf(doc.get("fp8")), peak_fp32=tf(doc["fp32"]), peak_bw=tf(doc["bw_tbs"]),
        memory_bytes=int(round(float(doc["memory_gb"]) * 1e9)), sms=int(doc["sms"]),
        l2_bytes=int(round(float(doc["l2_mib"]) * 2**20)), notes=doc.get("notes") or "",
        source=doc["source"], confirmed=bool(doc.get("confirmed")), sparse=doc.get("sparse") or "",
        accumulate=doc.get("accumulate"), cc=doc.get("cc"),
    )


@lru_cache(maxsize=1)
def _rows() -> tuple[_Row, ...]:
    text = resources.files("rooftop").joinpath("data/gpus.json").read_text(encoding="utf-8")
    return tuple(
        _Row(_spec(g), tuple(re.compile(p) for p in g["match"]), tuple(re.compile(p) for p in g.get("exclude", ())))
        for g in json.loads(text)["gpus"]
    )


def all_gpus() -> list[GPUSpec]:
    return [r.spec for r in _rows()]


def by_key(key: str) -> GPUSpec | None:
    """The row with this short id (`h100-sxm`, `H200`, ...), case-insensitive; None if unknown."""
    want = (key or "").strip().lower()
    return next((r.spec for r in _rows() if r.spec.key == want), None)


def keys() -> list[str]:
    return [r.spec.key for r in _rows()]


def _normalize_name(name: str) -> str:
    return " ".join(re.sub(r"[-_/,()]", " ", name.upper()).split())


def match(device_name: str | None) -> GPUSpec | None:
    """The spec row for a device name as CUDA/NVML/ncu report it, or None when unknown.

    "NVIDIA H100 80GB HBM3" -> h100-sxm; "NVIDIA A100-SXM4-80GB" -> a100-80gb. Patterns are
    whole words ("A10" is not "A100", "H200" is not "GH200"). A name that fits no row, fits two
    (ambiguous, e.g. a bare "NVIDIA H100"), or names a MIG slice returns None.
    """
    if not isinstance(device_name, str) or not device_name.strip():
        return None
    text = _normalize_name(device_name)
    if _NEVER.search(text):
        return None
    hits = [r.spec for r in _rows()
            if all(p.search(text) for p in r.match) and not any(p.search(text) for p in r.exclude)]
    return hits[0] if len(hits) == 1 else None


# --- the peaks a trace is judged against -------------------------------------------------------

@dataclass(frozen=True)
class Peaks:
    """The ceilings used for MBU/MFU, and where they came from ("measured" | "datasheet" | None).

    `flops`/`bw` are the values in use; None with `reason` when unknown.
    """

    flops: float | None
    bw: float | None
    source: str | None
    reason: str | None = None
    datasheet_flops: float | None = None
    datasheet_bw: float | None = None
    measured_flops: float | None = None
    measured_bw: float | None = None
    gpu: GPUSpec | None = None
    dtype: str = DEFAULT_DTYPE

    @property
    def ridge(self) -> float | None:
        return self.flops / self.bw if self.flops and self.bw else None


def _positive(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if v > 0 and v == v and v != float("inf") else None


def trace_dtype(meta: Mapping[str, Any]) -> str:
    """The trace's compute dtype: model.dtype, else workload.dtype, else bf16."""
    for section in ("model", "workload"):
        d = normalize_dtype((meta.get(section) or {}).get("dtype"))
        if d:
            return d
    return DEFAULT_DTYPE


def _is_cpu(meta: Mapping[str, Any]) -> bool:
    device = meta.get("device") or {}
    wl_device = str((meta.get("workload") or {}).get("device") or "")
    name = str(device.get("name") or "")
    return (name.strip().lower().startswith("cpu") or str(device.get("type") or "").lower() == "cpu"
            or wl_device.strip().lower().startswith("cpu"))


def peaks(meta: Mapping[str, Any] | None, dtype: str | None = None) -> Peaks:
    """The peaks for a trace's metadata document.

    Measured (calibration, `device.peaks.measured`) wins per value when present; otherwise the
    datasheet of the matched spec row, or, for a device not in the table, the explicit datasheet
    values the trace carries (an ncu report's own peaks). `source` is "measured" when any value
    in use was measured. A measured FLOP/s recorded for another dtype is not used.
    """
    meta = meta or {}
    d = normalize_dtype(dtype) if dtype else trace_dtype(meta)
    d = d or DEFAULT_DTYPE
    if _is_cpu(meta):
        return Peaks(None, None, None, "CPU run: no HBM/tensor peaks; MBU/MFU unknown", dtype=d)
    device = meta.get("device") or {}
    name = device.get("name")
    gpu = match(name)
    given = (device.get("peaks") or {})
    sheet = given.get("datasheet") or {}
    measured = given.get("measured") or {}

    if gpu is not None:
        ds_flops, ds_bw = gpu.peak_flops(d), gpu.peak_bw
    else:
        ds_flops, ds_bw = _positive(sheet.get("flops")), _positive(sheet.get("bw"))
    m_flops, m_bw = _positive(measured.get("flops")), _positive(measured.get("bw"))
    m_dtype = normalize_dtype(measured.get("dtype")) if measured.get("dtype") else None
    if m_dtype and m_dtype != d:
        m_flops = None

    flops = m_flops if m_flops is not None else ds_flops
    bw = m_bw if m_bw is not None else ds_bw
    if m_flops is not None or m_bw is not None:
        source = "measured"
    elif flops is not None or bw is not None:
        source = "datasheet"
    else:
        source = None

    reason = None
    if flops is None or bw is None:
        if gpu is None and source is None:
            reason = (f"unknown device {name!r}: not in the spec table" if name
                      else "the trace names no device: peaks unknown")
        elif flops is None:
            reason = f"{gpu.name if gpu else repr(name)} has no {d} peak in the spec table"
        else:
            reason = "peak bandwidth unknown"
    return Peaks(flops, bw, source, reason, ds_flops, ds_bw, m_flops, m_bw, gpu, d)
