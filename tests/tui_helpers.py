"""Small deterministic traces for the TUI tests (shared by every TUI test module).

Each builder writes a real trace file with `rooftop.trace.write_trace` and returns its path, so the
tests go through the same loader a user does. Numbers are round so screens show stable text:

- one prefill step (index 0) and four decode steps (0..3) over a two-layer model;
- per layer an `attn` range (a QKV GEMM + a flash kernel) and an `mlp` range (two GEMMs + an
  elementwise kernel); decode steps get slower by 1 µs per step so the step curve has a slope;
- `counters=True` adds DRAM bytes, FLOPs and warp stall columns (long_scoreboard dominates);
- `weird_names=True` adds kernels whose names look like Rich markup or terminal escapes.
"""
from __future__ import annotations

from pathlib import Path

from rooftop.llm.shapes import preset
from rooftop.trace import STALL_COLUMNS, write_trace

# The app's one stylesheet: test apps that mount a screen or widget alone load it too, as the app does.
STYLESHEET = str(Path(__file__).resolve().parent.parent / "tui" / "rooftop.tcss")

# Names that must be displayed literally (never as markup, never as terminal control).
WEIRD_NAMES = (
    "[bold]boldk[/]",
    "linkk[link=https://evil.example]click[/link]",
    "esck\x1b[31mred",
    "bellk\x07ding",
    "arr[0]k",
)

DEVICE = {
    "name": "NVIDIA H100 80GB HBM3", "cc": "9.0", "sms": 132,
    "peaks": {"datasheet": {"flops": 989e12, "bw": 3.35e12}},
}

_GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
_FLASH = "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t> >(Flash_fwd_params)"
_SILU = "void at::native::vectorized_elementwise_kernel<4, at::native::silu_kernel>(int, at::native::silu_kernel, at::detail::Array<char*, 2>)"


def _stalls(dominant: str) -> dict[str, float]:
    row = {c: 0.1 for c in STALL_COLUMNS}
    row[f"stall_{dominant}"] = 4.0
    row["stall_selected"] = 1.0
    return row


def _events(*, counters: bool, weird_names: bool, slow: float = 1.0) -> list[dict]:
    rows: list[dict] = []
    t = 0

    def kernel(name: str, path: str, dur: int, flops: float, nbytes: float, stall: str = "long_scoreboard"):
        nonlocal t
        row = {"kind": "kernel", "name": name, "start_ns": t, "dur_ns": dur, "device": 0, "stream": 7,
               "path": path, "model_flops": flops, "model_bytes": nbytes, "counters": counters,
               "grid": [132, 1, 1], "block": [128, 1, 1], "registers": 128, "shared_mem": 49152}
        if counters:
            row.update(flops=flops, dram_read=nbytes * 0.9, dram_write=nbytes * 0.2, sm_pct=40.0,
                       dram_pct=80.0, occupancy_pct=25.0, l1_hit_pct=10.0, l2_hit_pct=50.0, **_stalls(stall))
        rows.append(row)
        t += dur + 1_000  # 1 µs launch gap after every kernel

    def rng(path: str, start: int):
        rows.append({"kind": "range", "name": path.rsplit("/", 1)[-1], "path": path,
                     "start_ns": start, "dur_ns": t - start})

    steps = [("prefill", 0, 64)] + [("decode", i, 1) for i in range(4)]
    for phase, step, tokens in steps:
        step_start = t
        base = f"{phase}/step={step}"
        scale = 8 if phase == "prefill" else 1
        extra = int(1_000 * step * slow) if phase == "decode" else 0
        for layer in range(2):
            lp = f"{base}/layer={layer}"
            layer_start = s = t
            kernel(_GEMM, f"{lp}/attn", 10_000 * scale + extra, 2e8 * tokens, 3e7)
            kernel(_FLASH, f"{lp}/attn", 5_000 * scale, 1e8 * tokens, 2e6 * scale)
            rng(f"{lp}/attn", s)
            s = t
            kernel(_GEMM, f"{lp}/mlp", 20_000 * scale, 4e8 * tokens, 6e7)
            kernel(_SILU, f"{lp}/mlp", 2_000 * scale, 1e6 * tokens, 4e6, stall="wait")
            kernel(_GEMM, f"{lp}/mlp", 15_000 * scale, 3e8 * tokens, 4.5e7)
            rng(f"{lp}/mlp", s)
            rng(lp, layer_start)
        if weird_names and phase == "decode" and step == 0:
            for name in WEIRD_NAMES:
                kernel(name, f"{base}/layer=1/mlp", 3_000, 1e6, 1e6)
        rng(base, step_start)
    return rows


def _meta(*, modeled: bool, label: str = "tiny", batch: int = 1) -> dict:
    model = preset("tiny").to_meta("bf16")
    model["name"] = label
    return {
        "source": {"tool": "rooftop-test", "version": "0", "command": "tests", "host": "test", "time": "2025-01-01T00:00:00"},
        "device": DEVICE,
        "model": model,
        "workload": {"batch": batch, "prompt_len": 64, "gen_len": 4, "attn": "flash", "cuda_graphs": False,
                     "dtype": "bf16", "device": "cuda"},
        "steps": [{"phase": "prefill", "index": 0, "batch": batch, "new_tokens": 64, "context": 64}]
                 + [{"phase": "decode", "index": i, "batch": batch, "new_tokens": batch, "context": 65 + i}
                    for i in range(4)],
        "modeled": modeled,
        "warnings": [],
    }


def small_trace(tmp_path: Path, counters: bool = False, modeled: bool = False, weird_names: bool = False,
                name: str = "small.parquet") -> Path:
    """A five-step run (prefill 0, decode 0..3) of the `tiny` preset on an H100; returns its path."""
    path = Path(tmp_path) / name
    write_trace(path, _events(counters=counters, weird_names=weird_names), _meta(modeled=modeled))
    return path


def second_trace(tmp_path: Path, counters: bool = False, modeled: bool = False, weird_names: bool = False,
                 name: str = "second.parquet") -> Path:
    """The same run made slower (decode GEMMs grow 3 µs per step): the B side of a comparison."""
    path = Path(tmp_path) / name
    write_trace(path, _events(counters=counters, weird_names=weird_names, slow=3.0),
                _meta(modeled=modeled, label="tiny-b"))
    return path


def bad_file(tmp_path: Path, name: str = "bad.parquet") -> Path:
    """A file that is not Parquet at all."""
    path = Path(tmp_path) / name
    path.write_text("this is not a trace\n")
    return path


def multi_rank_run(tmp_path: Path, slow: tuple[float, ...] = (1.0, 3.0), name: str = "run") -> Path:
    """A directory run with one file per rank (`rank=N/trace.parquet`); rank N's decode GEMMs grow
    `1 µs · step · slow[N]` per layer, so decode step s spans 113 + 2·s·slow[N] µs on rank N
    (two layers of 52 µs of kernels + nine 1 µs gaps). With the default (1, 3), rank 1 is the
    straggler of decode steps 1-3; step 3: min 119 µs, median 125, max 131, spread 12/125 = 9.6%."""
    run = Path(tmp_path) / name
    for rank, factor in enumerate(slow):
        meta = _meta(modeled=False)
        meta["rank"] = rank
        write_trace(run / f"rank={rank}" / "trace.parquet", _events(counters=False, weird_names=False, slow=factor),
                    meta)
    return run


def calibrated_trace(tmp_path: Path, name: str = "calibrated.parquet") -> Path:
    """`small_trace` with counters, plus a calibration: measured 2.68 TB/s and 800 TFLOP/s bf16."""
    meta = _meta(modeled=False)
    meta["device"] = {**DEVICE, "peaks": {"datasheet": DEVICE["peaks"]["datasheet"],
                                          "measured": {"bw": 2.68e12, "flops": 800e12, "dtype": "bf16"}}}
    path = Path(tmp_path) / name
    write_trace(path, _events(counters=True, weird_names=False), meta)
    return path


NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def comm_trace(tmp_path: Path, name: str = "comm.parquet") -> Path:
    """`small_trace` with an all-reduce on its own stream beside every other decode step's first
    kernel (partly hidden by it): the Overview's communication table."""
    rows = _events(counters=False, weird_names=False)
    firsts = [r for r in rows if r["kind"] == "kernel" and r["path"].startswith("decode")
              and r["path"].endswith("layer=0/attn")][::2]
    for r in firsts:
        rows.append({**r, "name": NCCL, "stream": 9, "start_ns": r["start_ns"] + 2_000, "dur_ns": 20_000,
                     "model_flops": None, "model_bytes": None})
    path = Path(tmp_path) / name
    write_trace(path, rows, _meta(modeled=False))
    return path
