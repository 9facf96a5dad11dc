"""`rooftop calibrate`: the achievable ceilings of this GPU, for MBU/MFU against what is reachable.

Bandwidth: a large device-to-device copy; it reads and writes every byte, so bytes/s counts
2 x the buffer size (how STREAM "copy" and nvbandwidth count). Compute: a square bf16 GEMM of
2·N³ FLOPs. Each is the median of `repeats` timed runs (CUDA events) after warm-up. Results go to
`$XDG_CACHE_HOME/rooftop/calibration.json`, keyed by device name; `rooftop collect` stores the
matching entry into the traces it writes.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

Timer = Callable[[Callable[[], Any]], float]  # runs fn once, returns elapsed seconds


def cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rooftop" / "calibration.json"


def median_s(samples: Sequence[float]) -> float:
    if not samples:
        raise ValueError("no timing samples")
    return float(statistics.median(samples))


def copy_bandwidth(nbytes: int, samples_s: Sequence[float]) -> float:
    """Bytes/s of a device-to-device copy: each byte is read once and written once."""
    return 2.0 * nbytes / median_s(samples_s)


def gemm_rate(n: int, samples_s: Sequence[float]) -> float:
    """FLOP/s of an N x N x N GEMM: 2·N³ FLOPs per run."""
    return 2.0 * n ** 3 / median_s(samples_s)


def cuda_timer(fn: Callable[[], Any]) -> float:
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def measure(device: str = "cuda", bytes: int = 1 << 30, gemm_n: int = 8192, repeats: int = 20,
            warmup: int = 3, timer: Timer | None = None) -> dict[str, Any]:
    """Median copy bandwidth (bytes/s) and bf16 GEMM rate (FLOP/s) on `device`."""
    import torch

    timer = timer or cuda_timer
    src = torch.empty(bytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    a = torch.randn(gemm_n, gemm_n, device=device).to(torch.bfloat16)
    b = torch.randn(gemm_n, gemm_n, device=device).to(torch.bfloat16)

    def copy():
        dst.copy_(src)

    def gemm():
        torch.mm(a, b)

    def sample(fn):
        for _ in range(warmup):
            fn()
        return [timer(fn) for _ in range(repeats)]

    copy_s, gemm_s = sample(copy), sample(gemm)
    name = torch.cuda.get_device_name(device) if str(device).startswith("cuda") else "cpu"
    return {"device": name, "bw": copy_bandwidth(bytes, copy_s), "flops": gemm_rate(gemm_n, gemm_s),
            "dtype": "bf16", "copy_bytes": bytes, "gemm_n": gemm_n, "repeats": repeats,
            "copy_s": copy_s, "gemm_s": gemm_s, "torch": torch.__version__,
            "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        # A broken cache must not stop a collection: it is a cache, recalibrating rewrites it.
        print(f"rooftop: ignoring unreadable calibration cache {path}: {exc}", file=sys.stderr)
        return {}
    return doc if isinstance(doc, dict) else {}


def save(result: dict[str, Any], path: Path | None = None) -> Path:
    """Store `result` under its device name in the cache file (atomically)."""
    path = path or cache_path()
    doc = _read_cache(path)
    doc[str(result.get("device"))] = result
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".calibration.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)
    os.replace(tmp, path)
    return path


def load_cached(device_name: str | None = None, path: Path | None = None) -> dict[str, Any] | None:
    """The cached calibration of `device_name` (or of the only device cached); None if absent."""
    doc = _read_cache(path or cache_path())
    if device_name is None:
        return next(iter(doc.values())) if len(doc) == 1 else None
    entry = doc.get(device_name)
    return entry if isinstance(entry, dict) else None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bytes", type=int, default=1 << 30, help="copy buffer size in bytes (default 1 GiB)")
    parser.add_argument("--gemm-n", type=int, default=8192, help="square bf16 GEMM size (default 8192)")
    parser.add_argument("--repeats", type=int, default=20, help="timed runs; the median is kept (default 20)")
    parser.add_argument("--device", default="cuda", help="CUDA device (default cuda)")


def run(args: argparse.Namespace) -> int:
    import torch

    if not torch.cuda.is_available():
        print("rooftop calibrate: calibration needs a CUDA GPU, and torch sees none", file=sys.stderr)
        return 2
    result = measure(args.device, bytes=args.bytes, gemm_n=args.gemm_n, repeats=args.repeats)
    path = save(result)
    print(f"{result['device']}: copy {result['bw'] / 1e12:.2f} TB/s, bf16 GEMM {result['flops'] / 1e12:.0f} "
          f"TFLOP/s (median of {args.repeats}); saved to {path}")
    return 0
