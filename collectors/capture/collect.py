"""`rooftop collect`: run the built-in Llama-style workload under the Recorder.

A warm-up (untraced), then a prefill and N decode steps, each in its own step range, written to
one trace. On a GPU the trace holds kernels; on CPU it holds ops, so the whole path runs anywhere.
Either way the rows are the Kineto importer's reading of the profiler's exported file (`--kineto`
keeps it), the same path as `rooftop import` of a capture made elsewhere.
torch is imported inside `run` only: building the argument parser stays cheap.
"""
from __future__ import annotations

import argparse
import sys
import time

from rooftop.llm.shapes import PRESETS, preset
from rooftop.trace import TraceError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", default="tiny", choices=sorted(PRESETS), help="model shapes (default tiny)")
    parser.add_argument("--batch", type=int, default=1, help="sequences per step (default 1)")
    parser.add_argument("--prompt-len", type=int, default=128, help="prompt tokens per sequence (default 128)")
    parser.add_argument("--gen-len", type=int, default=8, help="decode steps (default 8)")
    parser.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default=None,
                        help="default bf16 on cuda, fp32 on cpu")
    parser.add_argument("--attn", choices=("flash", "efficient", "cudnn", "math", "auto"), default="auto",
                        help="SDPA backend (default auto)")
    parser.add_argument("--cuda-graphs", action=argparse.BooleanOptionalAction, default=False,
                        help="replay decode steps from a CUDA graph (default off)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default cuda if available")
    parser.add_argument("--seed", type=int, default=0, help="random weights and tokens (default 0)")
    parser.add_argument("--warmup", type=int, default=1, help="untraced warm-up runs (default 1)")
    parser.add_argument("--counters", action="store_true",
                        help="also collect Nsight Compute counters for a few steps (needs ncu)")
    parser.add_argument("--counter-steps", default=None,
                        help="what to profile with ncu: PHASE[:N[-M]][/layer=L], comma-separated "
                             "(default decode:0/layer=0, one layer of decode step 0)")
    parser.add_argument("--counter-budget", type=float, default=None, metavar="SECONDS",
                        help="refuse to start ncu when the replay estimate is over this (default 240)")
    parser.add_argument("--counter-timeout", type=float, default=None, metavar="SECONDS",
                        help="stop ncu (its whole process group) after this (default budget + 180)")
    parser.add_argument("-o", "--output", default="run.parquet", help="trace file to write")
    parser.add_argument("--kineto", default=None, metavar="PATH",
                        help="also keep the profiler's own Kineto JSON (the trace is read from it either way)")
    # The re-run under ncu (collectors/capture/ncu_run.py): NVTX ranges only, no profiler, no trace.
    parser.add_argument("--counters-child", action="store_true", help=argparse.SUPPRESS)


class Progress:
    """A one-line progress bar on stderr; on a non-TTY only the final line is printed."""

    def __init__(self, total: int, stream=None):
        self.total, self.done = max(total, 1), 0
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.t0 = time.perf_counter()

    def advance(self, label: str, n: int = 1) -> None:
        self.done = min(self.total, self.done + n)
        if self.tty:
            width = 24
            filled = int(width * self.done / self.total)
            self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} {label:<24}")
            self.stream.flush()

    def finish(self, message: str) -> None:
        if self.tty:
            self.stream.write("\r" + " " * 60 + "\r")
        self.stream.write(f"{message} ({time.perf_counter() - self.t0:.1f} s)\n")
        self.stream.flush()


def _resolve(args, torch) -> tuple[str, str]:
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("rooftop: error: --device cuda but torch sees no CUDA GPU (use --device cpu)")
    dtype = args.dtype or ("bf16" if device == "cuda" else "fp32")
    if device == "cpu" and args.cuda_graphs:
        raise SystemExit("rooftop: error: --cuda-graphs needs --device cuda")
    if device == "cpu" and args.attn in ("efficient", "cudnn"):
        raise SystemExit(f"rooftop: error: --attn {args.attn} needs a CUDA GPU (use auto, flash or math on cpu)")
    # (the ncu child is started only after the parent passed these; it needs the ranges all the same)
    counters = bool(getattr(args, "counters", False))
    if counters and device != "cuda":
        raise SystemExit("rooftop: error: --counters needs a CUDA GPU (Nsight Compute profiles GPU kernels); "
                         "torch sees none" if not torch.cuda.is_available() else
                         "rooftop: error: --counters needs --device cuda")
    if counters or getattr(args, "counters_child", False):
        from collectors.capture.record import nvtx_available
        if not nvtx_available():
            raise SystemExit("rooftop: error: --counters needs the `nvtx` package (pip install nvtx): without it "
                             "the ranges ncu filters on are never emitted and it would profile 0 kernels")
    return device, dtype


def _check_memory(cfg, args, device: str, dtype: str, torch) -> str | None:
    """One line when the run would not fit in the GPU's free memory (before anything is built)."""
    if device != "cuda":
        return None
    from collectors.capture import memory

    free, _total = torch.cuda.mem_get_info()
    return memory.check(cfg, args.batch, args.prompt_len, args.gen_len, dtype, args.attn, float(free),
                        torch.cuda.get_device_name())


def run(args: argparse.Namespace) -> int:
    import torch

    from collectors.capture.calibrate import load_cached
    from collectors.capture.record import device_meta

    try:
        cfg = preset(args.preset)
    except KeyError as exc:
        print(f"rooftop: error: {exc.args[0]}", file=sys.stderr)
        return 2
    if min(args.batch, args.prompt_len) < 1 or args.gen_len < 0:
        print("rooftop: error: --batch and --prompt-len must be >= 1, --gen-len >= 0", file=sys.stderr)
        return 2
    try:
        device, dtype = _resolve(args, torch)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    too_big = _check_memory(cfg, args, device, dtype, torch)
    if too_big:
        print(f"rooftop: error: {too_big}", file=sys.stderr)
        return 2
    B, S, N = args.batch, args.prompt_len, args.gen_len
    workload = {"batch": B, "prompt_len": S, "gen_len": N, "attn": args.attn, "cuda_graphs": bool(args.cuda_graphs),
                "dtype": dtype, "device": device, "seed": args.seed, "preset": args.preset}
    dev = device_meta(device)
    cal = load_cached(dev["name"])
    if cal:
        dev["peaks"] = {"measured": {"flops": cal.get("flops"), "bw": cal.get("bw"), "dtype": cal.get("dtype", "bf16")}}
        dev["calibration"] = cal
    meta = {"device": dev, "source": {"tool": "rooftop collect", "command": " ".join(sys.argv)}}

    child = bool(getattr(args, "counters_child", False))
    try:
        _record(args, cfg, device, dtype, workload, meta, child)
    except torch.cuda.OutOfMemoryError:
        # the estimate (collectors/capture/memory.py) let it start; say so in one line, not a traceback
        from collectors.capture import memory
        need = memory.plan(cfg, B, S, N, dtype, args.attn).total
        print(f"rooftop: error: out of GPU memory during the run (estimated {need / 1e9:.1f} GB for batch {B} x "
              f"prompt {S} with --attn {args.attn}): try a smaller --batch or --prompt-len", file=sys.stderr)
        return 2
    if child:
        return 0
    if args.counters:
        # the recording's model, cache and tensors are gone with `_record`'s frame: give the
        # allocator's cached blocks back too, so the ncu child has the whole GPU
        import gc
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
        return _counters(args)
    return 0


def _record(args, cfg, device: str, dtype: str, workload: dict, meta: dict, child: bool) -> None:
    """Build the model on the device, warm up, and record the run (the ncu child: ranges only).
    Everything it allocates on the GPU is local to this call."""
    import torch

    from collectors.capture.record import Recorder
    from collectors.capture.workloads.llama import Llama, GraphedDecode, attention_backend

    B, S, N = args.batch, args.prompt_len, args.gen_len
    progress = Progress(args.warmup + 1 + N + 1)
    rec = Recorder(args.output, model=cfg, workload=workload, meta=meta, device=device, profile=not child,
                   kineto=getattr(args, "kineto", None))
    model = Llama(cfg, batch=B, max_len=S + N, dtype=dtype, device=device, attn=args.attn, seed=args.seed)
    gen = torch.Generator(device="cpu").manual_seed(args.seed)
    prompt = torch.randint(0, cfg.vocab, (B, S), generator=gen).to(device)
    with attention_backend(args.attn):
        for _ in range(args.warmup):
            _generate(model, prompt, min(N, 2), None, None)
            progress.advance("warm-up")
        graphed = GraphedDecode(model) if args.cuda_graphs else None
        with rec:
            _generate(model, prompt, N, rec, graphed, progress)
    progress.advance("write")
    if child:
        progress.finish(f"ran {cfg.name} for ncu: prefill {B}x{S} + {N} decode steps")
    else:
        progress.finish(f"wrote {args.output}: {cfg.name}, prefill {B}x{S} + {N} decode steps on {meta['device']['name']}")


def _generate(model, prompt, n: int, rec, graphed, progress: Progress | None = None) -> None:
    """A prefill and `n` greedy decode steps, each in its step range when recording."""
    import contextlib

    import torch

    B, S = prompt.shape

    def step(phase, i, context, new_tokens):
        if rec is None:
            return contextlib.nullcontext()
        # new_tokens counts the whole batch's tokens, as `predict` and serving engines' markers do
        return rec.step(phase, i, batch=B, context=context, new_tokens=B * new_tokens)

    # Greedy sampling is part of the step that produced the logits, so no op falls between steps.
    with step("prefill", 0, S, S):
        tokens = torch.argmax(model.prefill(prompt, rec)[:, -1], dim=-1, keepdim=True)
    if progress:
        progress.advance("prefill")
    with rec.phase("decode") if rec is not None else contextlib.nullcontext():
        for i in range(n):
            # graphed flash decode attends over the whole static cache (no mask): that is its context
            context = model.max_len if graphed is not None and not model.static_mask else S + i + 1
            with step("decode", i, context, 1):
                if graphed is not None:
                    logits = graphed.step(tokens, S + i)
                else:
                    logits = model.decode(tokens, S + i, rec)
                tokens = torch.argmax(logits[:, -1], dim=-1, keepdim=True)
            if progress:
                progress.advance(f"decode {i + 1}")
    if model.cos.is_cuda:
        torch.cuda.synchronize()


def _counters(args) -> int:
    """Hand over to the ncu runner (collectors/capture/ncu_run.py); the timeline trace is kept either way."""
    from collectors.capture.ncu_run import run_counters

    return int(run_counters(args, args.output) or 0)
