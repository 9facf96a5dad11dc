"""Build large Kineto (PyTorch profiler) JSON traces for the scale benchmarks.

Two sources of events, both replicated block by block and streamed to disk (a 1M-kernel trace is
GBs of JSON; it is never held in memory as one string):

- seed mode (default when the HTA fixture is present): the real `nccl_data.json.gz` trace
  (2,700 kernels, 40k events) repeated, each copy shifted past the previous one in time and with
  its correlation / External ids / flow ids renumbered, so joins stay one-to-one.
- `--synthetic`: a realistic decode loop written from scratch (per step: user_annotations
  `ProfilerStep#i` > `decode` > `step=i` > `layer=l` > `attn|mlp`, and per kernel a cpu_op, its
  cudaLaunchKernel, the kernel, and the ac2g flow pair), so the benchmarks run without fixtures.

A block is compiled once into a `str.format` template whose slots are the per-copy values
(timestamps in whole µs, ids, step numbers); every other number is kept as its original text, so
durations summed over N copies are exactly N x one block's.

    python bench/make_kineto.py OUT.json --kernels 100000 [--synthetic] [--gzip]
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED_NAME = "facebookresearch__HolisticTraceAnalysis__tests__data__nccl_parser_config__nccl_data.json.gz"
ID_KEYS = ("correlation", "External id", "Record function id")  # renumbered per copy (args)
TS, ID, STEP = 0, 1, 2  # slot kinds


def fixtures_dir() -> Path | None:
    for cand in (os.environ.get("ROOFTOP_FIXTURES"), HERE.parent.parent / "shared" / "fixtures",
                 HERE.parent / ".." / "shared" / "fixtures"):
        if cand and Path(cand, "traces").is_dir():
            return Path(cand)
    return None


def seed_path() -> Path | None:
    d = fixtures_dir()
    p = d / "traces" / SEED_NAME if d else None
    return p if p and p.exists() else None


class Lit(str):
    """A number kept as its JSON text (never through a double)."""


class StepName(str):
    """A string containing `{step}`, filled per copy."""


@dataclass
class Block:
    template: str          # the block's events joined by ",\n", with `{}` slots
    slots: list[tuple[int, int]]  # (kind, base value) per slot, in order
    head: dict             # top-level keys other than traceEvents
    kernels: int
    events: int
    span_us: int           # time shift between copies
    id_stride: int
    kernel_dur_ns: int     # sum of kernel durations in one copy


def _ns(text: str) -> int:
    whole, _, frac = str(text).partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3]) if frac else int(whole) * 1000


def compile_block(events: list[dict], head: dict, gap_us: int = 1000) -> Block:
    """Turn one copy's events into a format template. `ts` must be `Lit`; ids are ints."""
    slots: list[tuple[int, int]] = []
    marks: dict[str, tuple] = {}

    def mark(kind: int, base, suffix: str = "") -> str:
        key = f"@@S{len(marks)}@@"
        marks[key] = (kind, base, suffix)
        return key

    def lit(text: str) -> str:
        key = f"@@S{len(marks)}@@"
        marks[key] = (None, text, "")
        return key

    def prep(v, key=None):
        if isinstance(v, dict):
            return {k: prep(x, k) for k, x in v.items()}
        if isinstance(v, list):
            return [prep(x) for x in v]
        if isinstance(v, StepName):
            return v.replace("{step}", mark(STEP, 0))
        if isinstance(v, Lit):
            return lit(str(v))
        if key in ID_KEYS and isinstance(v, int):
            return mark(ID, v)
        return v

    t0 = min(_ns(e["ts"]) for e in events if "ts" in e)
    t1 = max(_ns(e["ts"]) + _ns(e.get("dur", "0")) for e in events if "ts" in e)
    max_id, kernels, kdur = 0, 0, 0
    parts = []
    for e in events:
        e = dict(e)
        args = e.get("args") or {}
        for k in ID_KEYS:
            if isinstance(args.get(k), int):
                max_id = max(max_id, args[k])
        if e.get("ph") in ("s", "f", "t") and isinstance(e.get("id"), int):
            max_id = max(max_id, e["id"])
            e["id"] = mark(ID, e["id"])
        if "ts" in e:
            whole, dot, frac = str(e["ts"]).partition(".")
            e["ts"] = mark(TS, int(whole), dot + frac)
        if e.get("cat") in ("kernel", "Kernel") and e.get("ph") == "X":
            kernels += 1
            kdur += _ns(e.get("dur", "0"))
        parts.append(json.dumps(prep(e), separators=(",", ":"), ensure_ascii=False))
    text = ",\n".join(parts).replace("{", "{{").replace("}", "}}")

    def sub(m: re.Match) -> str:
        kind, base, suffix = marks[m.group(1) or m.group(2)]
        if kind is None:
            return base
        slots.append((kind, base))
        return "{}" + suffix

    text = re.sub(r'"(@@S\d+@@)"|(@@S\d+@@)', sub, text)
    span_us = (t1 - t0) // 1000 + gap_us
    return Block(text, slots, head, kernels, len(events), span_us, max_id + 1, kdur)


def write_trace(block: Block, copies: int, out: Path, gz: bool = False) -> Path:
    """Stream `copies` copies of `block` to `out` (gzip level 1 with --gzip)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    head = dict(block.head)
    tail = {k: head.pop(k) for k in ("traceName", "displayTimeUnit", "baseTimeNanoseconds") if k in head}
    opener = (lambda p: gzip.open(p, "wt", encoding="utf-8", compresslevel=1)) if gz else \
        (lambda p: open(p, "w", encoding="utf-8", buffering=8 << 20))
    kinds = [k for k, _ in block.slots]
    bases = [b for _, b in block.slots]
    fmt = block.template.format
    with opener(tmp) as fh:
        fh.write("{\n")
        for k, v in head.items():
            fh.write(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},\n")
        fh.write('"traceEvents": [\n')
        for c in range(copies):
            off = (c * block.span_us, c * block.id_stride, c)
            if c:
                fh.write(",\n")
            fh.write(fmt(*[b + off[k] for k, b in zip(kinds, bases)]))
        fh.write("\n]")
        for k, v in tail.items():
            fh.write(f",\n{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}")
        fh.write("\n}\n")
    os.replace(tmp, out)
    return out


# --- the seed: a real trace -----------------------------------------------------------------------

def seed_block(path: Path) -> Block:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        doc = json.load(fh, parse_float=Lit)
    events = doc.pop("traceEvents")
    return compile_block(events, doc)


# --- synthetic decode loop ------------------------------------------------------------------------

_LAYER = [  # (block, cpu op, kernel name, dur ns, grid, Input Dims)
    ("attn", "aten::rms_norm", "void vllm::rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16 const*, float, int)", 2400, [8, 1, 1], [[8, 4096], [4096]]),
    ("attn", "aten::mm", "nvjet_tst_64x8_64x16_4x1_v_bz_coopB_TNT", 20000, [96, 1, 1], [[8, 4096], [4096, 6144]]),
    ("attn", "aten::add_", "void at::native::vectorized_elementwise_kernel<4, at::native::rotary_embedding>(int, float*)", 2100, [16, 1, 1], [[8, 32, 128], [8, 32, 128]]),
    ("attn", "aten::_flash_attention_forward", "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>, true>(Flash_fwd_params)", 30000, [1, 32, 8], [[8, 1, 32, 128], [8, 2048, 8, 128], [8, 2048, 8, 128]]),
    ("attn", "aten::mm", "nvjet_tst_64x8_64x16_4x1_v_bz_coopB_TNT", 14000, [64, 1, 1], [[8, 4096], [4096, 4096]]),
    ("mlp", "aten::rms_norm", "void vllm::rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16 const*, float, int)", 2400, [8, 1, 1], [[8, 4096], [4096]]),
    ("mlp", "aten::mm", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", 90000, [224, 1, 1], [[8, 4096], [4096, 28672]]),
    ("mlp", "aten::silu", "void at::native::vectorized_elementwise_kernel<4, at::native::silu_and_mul_kernel>(int, float*)", 2600, [56, 1, 1], [[8, 28672]]),
    ("mlp", "aten::mm", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", 48000, [128, 1, 1], [[8, 14336], [14336, 4096]]),
]
PID, TID, STREAM = 4242, 4243, 7


def _us(ns: int) -> Lit:
    return Lit(f"{ns // 1000}.{ns % 1000:03d}")


def synthetic_block(layers: int = 32) -> Block:
    """One decode step of a Llama-3-8B-like model at batch 8, as Kineto writes it (9 kernels/layer)."""
    ev: list[dict] = []
    corr = ext = 1
    cpu_t = 1_000_000_000  # ns; the GPU runs ~20 µs behind the launching thread
    gpu_t = cpu_t + 20_000

    def ann(name, t0, t1):
        ext_ = ext
        return {"ph": "X", "cat": "user_annotation", "name": name, "pid": PID, "tid": TID,
                "ts": _us(t0), "dur": _us(t1 - t0), "args": {"External id": ext_, "Ev Idx": ext_}}

    step_t0 = cpu_t
    layer_anns = []
    for layer in range(layers):
        layer_t0 = cpu_t
        for blk in ("attn", "mlp"):
            blk_t0 = cpu_t
            for b, op, kname, dur, grid, dims in _LAYER:
                if b != blk:
                    continue
                op_t0 = cpu_t
                launch = op_t0 + 3_000
                gpu_t = max(gpu_t, launch + 4_000)
                ev.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": PID, "tid": TID, "ts": _us(op_t0),
                           "dur": _us(9_000), "args": {"External id": ext, "Record function id": 0,
                                                       "Ev Idx": ext, "Input Dims": dims,
                                                       "Input type": ["c10::BFloat16"] * len(dims)}})
                ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": PID, "tid": TID,
                           "ts": _us(launch), "dur": _us(4_000),
                           "args": {"External id": ext, "cbid": 211, "correlation": corr}})
                ev.append({"ph": "X", "cat": "kernel", "name": kname, "pid": 0, "tid": STREAM, "ts": _us(gpu_t),
                           "dur": _us(dur), "args": {"External id": ext, "queued": 0, "device": 0, "context": 1,
                                                     "stream": STREAM, "correlation": corr,
                                                     "registers per thread": 128, "shared memory": 49152,
                                                     "blocks per SM": 0.5, "warps per SM": 2.0, "grid": grid,
                                                     "block": [128, 1, 1],
                                                     "est. achieved occupancy %": 6}})
                ev.append({"ph": "s", "id": corr, "pid": PID, "tid": TID, "ts": _us(launch), "cat": "ac2g",
                           "name": "ac2g"})
                ev.append({"ph": "f", "id": corr, "pid": 0, "tid": STREAM, "ts": _us(gpu_t), "cat": "ac2g",
                           "name": "ac2g", "bp": "e"})
                gpu_t += dur + 1_500
                cpu_t = op_t0 + 10_000
                corr += 1
                ext += 1
            layer_anns.append(ann(blk, blk_t0, cpu_t))
            ext += 1
        layer_anns.append(ann(StepName(f"layer={layer}"), layer_t0, cpu_t))
        ext += 1
    step_t1 = max(cpu_t, gpu_t) + 5_000
    outer = [ann(StepName("ProfilerStep#{step}"), step_t0 - 2_000, step_t1 + 1_000)]
    ext += 1
    outer.append(ann("decode", step_t0 - 1_000, step_t1))
    ext += 1
    outer.append(ann(StepName("step={step}"), step_t0 - 500, step_t1 - 500))
    head = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85018279936,
                              "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024,
                              "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
                              "sharedMemPerBlock": 49152, "numSms": 132, "regsPerMultiprocessor": 65536,
                              "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472}],
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
        "record_shapes": 1,
        "traceName": "synthetic_decode.pt.trace.json",
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": 1700000000000000000,
    }
    return compile_block(outer + layer_anns + ev, head, gap_us=200)


def make(out: Path, kernels: int, synthetic: bool = False, gz: bool = False, layers: int = 32) -> tuple[Path, Block, int]:
    """Write a trace of about `kernels` kernels; (path, block, copies)."""
    seed = None if synthetic else seed_path()
    if not synthetic and seed is None:
        raise SystemExit("seed fixture not found (set ROOFTOP_FIXTURES) — use --synthetic")
    block = synthetic_block(layers) if seed is None else seed_block(seed)
    copies = max(1, round(kernels / block.kernels))
    return write_trace(block, copies, out, gz), block, copies


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--kernels", type=int, default=100_000, help="about this many kernel events")
    p.add_argument("--synthetic", action="store_true", help="decode loop from scratch instead of the seed trace")
    p.add_argument("--gzip", action="store_true")
    args = p.parse_args(argv)
    path, block, copies = make(args.out, args.kernels, args.synthetic, args.gzip)
    print(f"{path}: {copies} copies x {block.kernels} kernels = {copies * block.kernels} kernels, "
          f"{copies * block.events} events, {path.stat().st_size / 1e6:.1f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
