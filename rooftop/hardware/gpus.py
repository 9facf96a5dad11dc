"""The GPU spec table (datasheet peaks per dtype), identifying a trace's device, and its peaks.

Every number is dense (no 2:4 sparsity) at boost clock, from `data/gpus.json`, whose rows cite
their source and say whether the figures were confirmed. A device is identified from everything
the file says about it: the name first, then compute capability, SM count, memory size and
bandwidth to confirm it or to tell variants apart (`identify`). Where that leaves no row, or
several, the device is unknown: we never guess a GPU, because a wrong peak silently skews every
MBU/MFU on screen. The user can always say (`--gpu`, `--peaks`).
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping

import numpy as np

# Compute dtypes with a peak of their own. fp32 is the non-tensor (FMA pipe) rate; tf32, bf16,
# fp16, fp8 and fp4 are tensor-core rates; int8 is tensor TOPS (integer ops, not FLOPs).
DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8")
FLOAT_DTYPES = DTYPES[:-1]
DEFAULT_DTYPE = "bf16"

# The spellings traces use for them (torch, numpy, ncu, ml_dtypes, quantisation libraries).
_DTYPE_ALIASES = {
    "bf16": "bf16", "bfloat16": "bf16",
    "fp16": "fp16", "float16": "fp16", "half": "fp16", "f16": "fp16",
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "f32": "fp32", "single": "fp32",
    "tf32": "tf32", "tensorfloat32": "tf32",
    "fp8": "fp8", "float8": "fp8", "e4m3": "fp8", "e5m2": "fp8", "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8", "float8_e4m3fnuz": "fp8", "float8_e5m2fnuz": "fp8", "float8_e8m0fnu": "fp8",
    "fp4": "fp4", "float4": "fp4", "e2m1": "fp4", "nvfp4": "fp4", "mxfp4": "fp4", "float4_e2m1fn_x2": "fp4",
    "int8": "int8", "i8": "int8", "s8": "int8", "qint8": "int8", "uint8": "int8", "u8": "int8",
}

# A MIG slice has a fraction of the SMs and of the bandwidth: full-GPU peaks would be wrong.
_NEVER = re.compile(r"\bMIG\b")

# How close a file's figures must be to a row's to count as agreeing. Drivers report total memory
# in bytes, a little above the marketing GB (80 GB -> 85.0e9, 141 GB -> 150.1e9, 24 GB -> 23.6e9);
# bandwidth from nsys, or ncu at its locked clocks, is within a few % of the datasheet.
MEMORY_RATIO = (0.95, 1.10)
BW_RATIO = (0.90, 1.10)
# ncu's own peaks and the datasheet's are both shown when they differ by more than this.
DIFFER = 0.10

HOW_TO_SAY = "pass --gpu KEY (see `rooftop gpus`) or --peaks BW_TBps,TFLOPs"


def ridge_point(flops: Any, bw: Any) -> Any:
    """The ridge point in FLOP/byte: peak FLOP/s over peak bytes/s (H100 SXM bf16: 295). Left of it
    a kernel is memory-bound, right of it compute-bound. The one definition every ridge in rooftop
    comes from. Scalars: None unless both peaks are known and positive. Arrays (a peak per kernel
    group): element-wise, NaN where a peak is unknown (int8 has no FLOP/s peak)."""
    if np.ndim(flops) or np.ndim(bw):
        f, b = np.asarray(flops, dtype="float64"), np.asarray(bw, dtype="float64")
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where((f > 0) & (b > 0), f / np.where(b > 0, b, np.nan), np.nan)
    try:
        f, b = float(flops), float(bw)
    except (TypeError, ValueError):
        return None
    return f / b if f > 0 and b > 0 and math.isfinite(f) and math.isfinite(b) else None


def normalize_dtype(dtype: str | None) -> str | None:
    """'torch.bfloat16' -> 'bf16', 'float8_e4m3fn' -> 'fp8', 'tf32' -> 'tf32'; None if unknown."""
    if not dtype:
        return None
    return _DTYPE_ALIASES.get(str(dtype).strip().lower().replace("torch.", ""))


@dataclass(frozen=True)
class GPUSpec:
    """One row of the spec table. Per-dtype peaks in FLOP/s (int8: op/s); None where the chip
    has no such rate."""

    key: str
    name: str
    tflops: Mapping[str, float | None]
    peak_bw: float
    memory_bytes: int
    sms: int | None
    l2_bytes: int
    notes: str
    source: str
    confirmed: bool = False
    sparse: str = ""
    accumulate: str | None = None
    cc: str | None = None

    @property
    def peak_bf16(self) -> float | None:
        return self.tflops.get("bf16")

    @property
    def peak_fp16(self) -> float | None:
        return self.tflops.get("fp16")

    @property
    def peak_fp8(self) -> float | None:
        return self.tflops.get("fp8")

    @property
    def peak_fp32(self) -> float | None:
        return self.tflops.get("fp32")

    def peak_flops(self, dtype: str | None = DEFAULT_DTYPE) -> float | None:
        """Dense peak FLOP/s for a compute dtype: the tensor-core rate for tf32/bf16/fp16/fp8/fp4,
        the non-tensor rate for fp32 (plain fp32 runs on the FMA pipes unless TF32 is on). None
        for int8 (integer ops are not FLOPs) and for a rate the chip does not have."""
        d = normalize_dtype(dtype or DEFAULT_DTYPE)
        return self.tflops.get(d) if d in FLOAT_DTYPES else None

    def ridge(self, dtype: str | None = DEFAULT_DTYPE) -> float | None:
        """Ridge point in FLOP/byte: peak FLOP/s over peak bytes/s (H100 SXM bf16: 295)."""
        return ridge_point(self.peak_flops(dtype), self.peak_bw)


@dataclass(frozen=True)
class _Row:
    spec: GPUSpec
    match: tuple[re.Pattern, ...]
    exclude: tuple[re.Pattern, ...]
    family: tuple[re.Pattern, ...]


def _spec(doc: Mapping[str, Any]) -> GPUSpec:
    # Rounded to whole units so 2.039 TB/s is exactly 2.039e12 (not 2039000000000.0002).
    tf = lambda v: None if v is None else float(round(float(v) * 1e12))  # noqa: E731
    table = doc["tflops"]
    return GPUSpec(
        key=doc["key"], name=doc["name"], tflops={d: tf(table.get(d)) for d in DTYPES},
        peak_bw=tf(doc["bw_tbs"]), memory_bytes=int(round(float(doc["memory_gb"]) * 1e9)),
        sms=int(doc["sms"]) if doc.get("sms") is not None else None,
        l2_bytes=int(round(float(doc["l2_mib"]) * 2**20)), notes=doc.get("notes") or "",
        source=doc["source"], confirmed=bool(doc.get("confirmed")), sparse=doc.get("sparse") or "",
        accumulate=doc.get("accumulate"), cc=doc.get("cc"),
    )


@lru_cache(maxsize=1)
def _rows() -> tuple[_Row, ...]:
    text = resources.files("rooftop").joinpath("data/gpus.json").read_text(encoding="utf-8")
    compile_all = lambda pats: tuple(re.compile(p) for p in pats)  # noqa: E731
    return tuple(_Row(_spec(g), compile_all(g["match"]), compile_all(g.get("exclude", ())),
                      compile_all(g.get("family", ()))) for g in json.loads(text)["gpus"])


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


# --- identifying a device ----------------------------------------------------------------------

@dataclass(frozen=True)
class Identified:
    """What `identify` concluded: the row (or None), the evidence it rests on, and why not."""

    spec: GPUSpec | None
    by: tuple[str, ...] = ()       # evidence used: "name", "cc", "sms", "memory", "bw"
    inferred: bool = False         # True when the file names no device (matched on figures alone)
    reason: str | None = None      # why unknown
    candidates: tuple[str, ...] = ()


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f > 0 and f == f and f != float("inf") else None


def evidence(device: Mapping[str, Any]) -> dict[str, Any]:
    """What a trace's `device` metadata says about the hardware, from any importer.

    bw: nsys's `memoryBandwidth`, else ncu's peak DRAM rate (`peaks.ncu.bw`), else the rate an ncu
    CSV implies (achieved bytes/s over the DRAM throughput percentage).
    """
    ncu = ((device.get("peaks") or {}).get("ncu")) or {}
    cc = device.get("cc")
    return {
        "name": device.get("name") if isinstance(device.get("name"), str) and device.get("name").strip() else None,
        "cc": str(cc).strip() if cc not in (None, "") else None,
        "sms": _num(device.get("sms")),
        "memory": _num(device.get("memory_bytes")),
        "bw": _num(device.get("memory_bandwidth")) or _num(ncu.get("bw")) or _num(ncu.get("bw_from_throughput")),
    }


def _agrees(spec: GPUSpec, ev: Mapping[str, Any]) -> tuple[bool, list[str]]:
    """Whether the file's figures fit this row, and which of them were checked."""
    used = []
    if ev.get("cc") and spec.cc:
        if _cc(ev["cc"]) != _cc(spec.cc):
            return False, used
        used.append("cc")
    if ev.get("sms") and spec.sms:
        if int(ev["sms"]) != spec.sms:
            return False, used
        used.append("sms")
    if ev.get("memory"):
        r = ev["memory"] / spec.memory_bytes
        if not MEMORY_RATIO[0] <= r <= MEMORY_RATIO[1]:
            return False, used
        used.append("memory")
    if ev.get("bw") and spec.peak_bw:
        r = ev["bw"] / spec.peak_bw
        if not BW_RATIO[0] <= r <= BW_RATIO[1]:
            return False, used
        used.append("bw")
    return True, used


def _cc(text: str) -> str:
    major, _, minor = str(text).partition(".")
    return f"{major.strip()}.{(minor or '0').strip()}"


def _pick(rows: list[_Row], ev: Mapping[str, Any]) -> tuple[list[_Row], dict[str, list[str]]]:
    fits, used = [], {}
    for r in rows:
        ok, u = _agrees(r.spec, ev)
        if ok:
            fits.append(r)
            used[r.spec.key] = u
    return fits, used


def identify(device: Mapping[str, Any] | str | None) -> Identified:
    """The spec row for a trace's device metadata (or a bare name), or None with the reason.

    1. A name that fits exactly one row (all its `match` patterns, none of its `exclude`) is that
       row, unless the file's own figures contradict it.
    2. A name that fits several rows, or a chip family but no variant ("NVIDIA H100", "NVIDIA
       H20" with 141 GB), is resolved by the figures when exactly one row fits them.
    3. A file that names no device (an ncu CSV) is matched on its compute capability and at least
       one measured figure (SMs, memory, bandwidth) when exactly one row fits: `inferred`.
    A name that fits no row stays unknown even when a row shares its compute capability.
    """
    dev = {"name": device} if isinstance(device, str) or device is None else device
    ev = evidence(dev)
    name = ev["name"]
    figures = [k for k in ("sms", "memory", "bw") if ev.get(k)]
    if name is not None:
        text = _normalize_name(name)
        if _NEVER.search(text):
            return Identified(None, reason=f"{name!r} is a MIG slice: full-GPU peaks do not apply; {HOW_TO_SAY}")
        allowed = [r for r in _rows() if not any(p.search(text) for p in r.exclude)]
        exact = [r for r in allowed if all(p.search(text) for p in r.match)]
        family = [r for r in allowed if r.family and all(p.search(text) for p in r.family)]
        fits, used = _pick(exact, ev)
        if len(fits) != 1 and figures:
            more, used2 = _pick(family or exact, ev)
            fits, used = (more, used2) if len(more) == 1 or not fits else (fits, used)
        if len(fits) == 1:
            spec = fits[0].spec
            return Identified(spec, ("name", *used[spec.key]))
        pool = exact or family
        if not pool:
            return Identified(None, reason=f"unknown device {name!r}: not in the spec table; {HOW_TO_SAY}")
        keys_ = tuple(r.spec.key for r in (fits or pool))
        if not fits:
            return Identified(None, reason=f"{name!r}: the file's figures ({_describe(ev)}) fit no spec row "
                                           f"for it ({', '.join(r.spec.key for r in pool)}); {HOW_TO_SAY}",
                              candidates=tuple(r.spec.key for r in pool))
        return Identified(None, reason=f"{name!r} is ambiguous ({', '.join(keys_)}); {HOW_TO_SAY}",
                          candidates=keys_)
    if not ev.get("cc"):
        return Identified(None, reason=f"the trace names no device: peaks unknown; {HOW_TO_SAY}")
    same_cc = [r for r in _rows() if r.spec.cc and _cc(r.spec.cc) == _cc(ev["cc"])]
    fits, used = _pick(same_cc, ev)
    if len(fits) == 1 and figures:
        spec = fits[0].spec
        return Identified(spec, tuple(used[spec.key]), inferred=True)
    what = f"the file names no device, only {_describe(ev)}"
    if not same_cc or not fits:
        return Identified(None, reason=f"{what}: no spec row fits; {HOW_TO_SAY}")
    return Identified(None, reason=f"{what}: that fits {', '.join(r.spec.key for r in fits)}; {HOW_TO_SAY}",
                      candidates=tuple(r.spec.key for r in fits))


def _describe(ev: Mapping[str, Any]) -> str:
    parts = []
    if ev.get("cc"):
        parts.append(f"compute capability {ev['cc']}")
    if ev.get("sms"):
        parts.append(f"{int(ev['sms'])} SMs")
    if ev.get("memory"):
        parts.append(f"{ev['memory'] / 1e9:.1f} GB")
    if ev.get("bw"):
        parts.append(f"{ev['bw'] / 1e12:.3g} TB/s")
    return ", ".join(parts) or "no figures"


def match(device_name: str | None) -> GPUSpec | None:
    """The spec row for a device name as CUDA/NVML/ncu report it, or None when unknown.

    "NVIDIA H100 80GB HBM3" -> h100-sxm; "NVIDIA A100-SXM4-80GB" -> a100-80gb. Patterns are
    whole words ("A10" is not "A100", "H200" is not "GH200"). A name that fits no row, fits two
    (ambiguous, e.g. a bare "NVIDIA H100"), or names a MIG slice returns None. `identify` also
    uses the file's figures.
    """
    return identify(device_name).spec


# --- the peaks a trace is judged against -------------------------------------------------------

@dataclass(frozen=True)
class Override:
    """What the user said about the device: a spec row (`--gpu`) and/or explicit peaks (`--peaks`,
    bytes/s and FLOP/s of the trace's dtype)."""

    gpu: str | None = None
    bw: float | None = None
    flops: float | None = None

    @staticmethod
    def parse_peaks(text: str) -> tuple[float, float]:
        """'3.35,989' -> (3.35e12 B/s, 989e12 FLOP/s). ValueError with the expected form."""
        parts = [p.strip() for p in str(text).split(",")]
        vals = [_num(p) for p in parts] if len(parts) == 2 else []
        if len(vals) != 2 or None in vals:
            raise ValueError(f"--peaks takes BW_TBps,TFLOPs (e.g. 3.35,989), not {text!r}")
        return vals[0] * 1e12, vals[1] * 1e12


@dataclass(frozen=True)
class Peaks:
    """The ceilings used for MBU/MFU, and where they came from.

    `source`: "measured" (calibration), "datasheet" (the spec row, or the trace's own datasheet
    values), "ncu" (an Nsight Compute report's peaks at its measured clocks), "user" (`--peaks`),
    or None with `reason` when unknown. `flops`/`bw` are the values in use, `flops` for `dtype`;
    `table` holds the peak of every float dtype for `flops_for`.
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
    table: Mapping[str, float | None] = field(default_factory=dict)
    ncu_flops: float | None = None
    ncu_bw: float | None = None
    ncu_table: Mapping[str, float | None] = field(default_factory=dict)
    matched_by: tuple[str, ...] = ()
    inferred: bool = False
    override: str | None = None    # "gpu" / "peaks" when the user said so
    notes: tuple[str, ...] = ()     # peaks from the file that were not used, and why (physics)

    @property
    def ridge(self) -> float | None:
        """The ridge of the peaks in use (`ridge_point`)."""
        return ridge_point(self.flops, self.bw)

    def flops_for(self, dtype: str | None) -> float | None:
        """Peak FLOP/s for kernels of this compute dtype: the value in use for the trace's own
        dtype, the table's for another. None for int8 (integer ops are not FLOPs) and unknown."""
        d = normalize_dtype(dtype) if dtype else self.dtype
        if d is None or d == "int8":
            return None
        if d == self.dtype:
            return self.flops
        return self.table.get(d)

    def ops_for(self, dtype: str | None) -> float | None:
        """The peak a kernel's work is judged against: `flops_for` for the float dtypes, the int8
        tensor TOPS (integer op/s) for int8 work counted in integer ops; None where unknown."""
        d = normalize_dtype(dtype) if dtype else self.dtype
        if d == "int8":
            return _num(self.table.get("int8"))
        return self.flops_for(d)

    @property
    def differences(self) -> list[dict[str, Any]]:
        """Where ncu's own peaks and the datasheet's differ by more than 10% (both are shown)."""
        out = []
        for what, ds, nc in (("bw", self.datasheet_bw, self.ncu_bw), (f"{self.dtype} flops", self.datasheet_flops, self.ncu_flops),
                             ("fp32 flops", (self.gpu.peak_fp32 if self.gpu else None), self.ncu_table.get("fp32"))):
            if ds and nc and abs(nc / ds - 1) > DIFFER:
                out.append({"what": what, "datasheet": ds, "ncu": nc, "ratio": nc / ds})
        return out


def trace_dtype(meta: Mapping[str, Any]) -> str:
    """The trace's compute dtype: model.dtype, else workload.dtype, else bf16."""
    for section in ("model", "workload"):
        d = normalize_dtype((meta.get(section) or {}).get("dtype"))
        if d:
            return d
    return DEFAULT_DTYPE


def said_dtype(meta: Mapping[str, Any]) -> str | None:
    """The compute dtype the trace's metadata states (model.dtype, else workload.dtype); None
    where it states none (then `trace_dtype`'s bf16 is a default, not evidence)."""
    for section in ("model", "workload"):
        d = normalize_dtype((meta.get(section) or {}).get("dtype"))
        if d:
            return d
    return None


def _said_dtype(meta: Mapping[str, Any]) -> bool:
    return any(normalize_dtype((meta.get(s) or {}).get("dtype")) for s in ("model", "workload"))


def _is_cpu(meta: Mapping[str, Any]) -> bool:
    device = meta.get("device") or {}
    wl_device = str((meta.get("workload") or {}).get("device") or "")
    name = str(device.get("name") or "")
    return (name.strip().lower().startswith("cpu") or str(device.get("type") or "").lower() == "cpu"
            or wl_device.strip().lower().startswith("cpu"))


# ncu peak keys (collectors.readers.ncu.peaks_from_metrics) -> dtype. Tensor keys are
# `tensor_<src type>[_dst_<type>]_flops`; the fp32/fp16 ones are the non-tensor FMA rates.
_NCU_TENSOR = re.compile(r"^tensor_(fp16|bf16|tf32|fp8|fp4|e4m3|e5m2|e2m1)")


def ncu_table(ncu: Mapping[str, Any] | None) -> dict[str, float | None]:
    """Per-dtype peaks from an Nsight Compute report (`device.peaks.ncu`)."""
    ncu = ncu or {}
    out: dict[str, float | None] = {"fp32": _num(ncu.get("fp32_flops"))}
    best: dict[str, tuple[bool, float]] = {}
    for key, value in ncu.items():
        m = _NCU_TENSOR.match(str(key))
        v = _num(value)
        if m and v is not None:
            d = normalize_dtype(m.group(1))
            # GeForce runs fp16 with fp32 accumulate at half the fp16-accumulate rate: the
            # dst_fp32 rate is what inference kernels get, so it wins when both are there
            cand = ("dst_fp32" in key, v)
            best[d] = max(best.get(d, cand), cand)
    out.update({d: v for d, (_, v) in best.items()})
    out["int8"] = _num(ncu.get("tensor_int8_ops"))
    return {d: out.get(d) for d in DTYPES}


# A peak may sit this far above the dense datasheet figure at boost clock before it is called
# impossible: datasheets round (989.4 vs 989.5 TF), and some parts boost a few % above the
# published clock. The 2:4-sparse rates ncu once reported were 2x.
PHYSICS_SLACK = 1.05


def physical_limits(gpu: GPUSpec | None) -> dict[str, float | None]:
    """The ceilings no peak, rate or utilization may exceed: the dense datasheet peak per dtype at
    boost clock and the datasheet bandwidth (`bw`), each times PHYSICS_SLACK; None where unknown."""
    if gpu is None:
        return {}
    out: dict[str, float | None] = {d: (v * PHYSICS_SLACK if v else None) for d, v in gpu.tflops.items()}
    out["bw"] = gpu.peak_bw * PHYSICS_SLACK if gpu.peak_bw else None
    return out


def within_physics(table: Mapping[str, float | None], bw: float | None, gpu: GPUSpec | None
                   ) -> tuple[dict[str, float | None], float | None, list[str]]:
    """Peaks from a file (an ncu report's) with every value above the device's dense datasheet peak
    dropped (None), and a note per value dropped. Such a value is a sparse rate or a misread unit,
    never a property of the chip."""
    limits = physical_limits(gpu)
    out, notes = dict(table), []
    for d, v in table.items():
        lim = limits.get(d)
        if v and lim and v > lim:
            out[d] = None
            notes.append(f"ncu {d} peak {v / 1e12:.4g} T/s is above the dense datasheet peak "
                         f"{lim / PHYSICS_SLACK / 1e12:.4g} T/s of the {gpu.name}: not used")
    if bw and limits.get("bw") and bw > limits["bw"]:
        notes.append(f"ncu bandwidth {bw / 1e12:.4g} TB/s is above the datasheet {gpu.peak_bw / 1e12:.4g} TB/s: not used")
        bw = None
    return out, bw, notes


def peaks(meta: Mapping[str, Any] | None, dtype: str | None = None, override: Override | None = None) -> Peaks:
    """The peaks for a trace's metadata document.

    Order: the user's `--peaks` (source "user"), calibration (`device.peaks.measured`, per value),
    the datasheet of the identified spec row (or of `--gpu`), the explicit datasheet values the
    trace carries, and last an Nsight Compute report's own peaks (source "ncu"). A measured
    FLOP/s recorded for another dtype is not used. Raises ValueError for an unknown `--gpu`.
    """
    meta = meta or {}
    d = normalize_dtype(dtype) if dtype else trace_dtype(meta)
    d = d or DEFAULT_DTYPE
    override = override or Override()
    device = meta.get("device") or {}
    name = device.get("name")
    if override.gpu:
        gpu = by_key(override.gpu) or match(override.gpu)
        if gpu is None:
            raise ValueError(f"--gpu {override.gpu!r}: no such GPU in the spec table (keys: {', '.join(keys())})")
        ident = Identified(gpu, ("--gpu",))
    elif _is_cpu(meta) and not (override.bw or override.flops):
        return Peaks(None, None, None, "CPU run: no HBM/tensor peaks; MBU/MFU unknown", dtype=d)
    else:
        ident = identify(device)
    gpu = ident.spec
    given = device.get("peaks") or {}
    sheet = given.get("datasheet") or {}
    measured = given.get("measured") or {}
    ncu = given.get("ncu") or {}
    n_table = ncu_table(ncu)
    n_bw = _num(ncu.get("bw"))
    # physics: an ncu peak above the dense datasheet peak (a 2:4-sparse rate) is never used
    n_table, n_bw, notes = within_physics(n_table, n_bw, gpu)

    if gpu is not None:
        table = dict(gpu.tflops)
        ds_bw = gpu.peak_bw
    else:
        table = {k: None for k in DTYPES}
        table[d] = _num(sheet.get("flops"))
        ds_bw = _num(sheet.get("bw"))
    if dtype is None and not _said_dtype(meta) and gpu is not None and table.get(d) is None and table.get("fp32"):
        d = "fp32"  # no dtype said and no bf16 rate (a pre-tensor-core GPU): its fp32 rate
    ds_flops = table.get(d) if d in FLOAT_DTYPES else None
    m_flops, m_bw = _num(measured.get("flops")), _num(measured.get("bw"))
    m_dtype = normalize_dtype(measured.get("dtype")) if measured.get("dtype") else None
    if m_dtype and m_dtype != d:
        m_flops = None
    # a calibration above the dense datasheet peak measured something else (a sparse GEMM, a cache)
    checked, m_bw, more = within_physics({d: m_flops}, m_bw, gpu)
    m_flops = checked.get(d)
    notes += [n.replace("ncu", "measured", 1) for n in more]

    flops = m_flops if m_flops is not None else ds_flops
    bw = m_bw if m_bw is not None else ds_bw
    if m_flops is not None or m_bw is not None:
        source = "measured"
    elif flops is not None or bw is not None:
        source = "datasheet"
    else:
        source = None
    # No spec row and no datasheet values: an ncu report's own peaks (at its locked clocks).
    if gpu is None and source is None and (n_bw or any(n_table.values())):
        table = {k: n_table.get(k) for k in DTYPES}
        flops, bw, source = (n_table.get(d) if d in FLOAT_DTYPES else None), n_bw, "ncu"
    used_override = "gpu" if override.gpu else None
    if override.bw or override.flops:
        bw = override.bw or bw
        flops = override.flops or flops
        source, used_override = "user", "peaks"

    reason = None
    if flops is None or bw is None:
        if gpu is None and source is None:
            reason = ident.reason
        elif flops is None:
            who = gpu.name if gpu else repr(name)
            reason = ("int8 work is integer ops: no FLOP/s peak, MFU unknown" if d == "int8"
                      else f"{who} has no {d} peak in the spec table")
        else:
            reason = f"peak bandwidth unknown; {HOW_TO_SAY}"
    return Peaks(flops, bw, source, reason, ds_flops, ds_bw, m_flops, m_bw, gpu, d, table,
                 n_table.get(d) if d in FLOAT_DTYPES else None, n_bw, n_table,
                 ident.by, ident.inferred, used_override, tuple(notes))
