"""Fuzz the compiled Kineto decoder (collectors/readers/_kineto_fast.c) under sanitizers.

Builds the decoder with `-fsanitize=address,undefined` (or `undefined` alone) and
`-fno-sanitize-recover=all` into a temporary directory, loads that build in a child Python, and
feeds it: a corpus of events (absent `pid`/`tid`/`ts`/`dur`, absurd numbers, escapes, nested
args), every cut of the corpus, and random byte mutations of it. Any sanitizer report (an
out-of-bounds read, a NULL-plus-offset, signed overflow) ends the child with an error: exit 1
here, with the report on stderr. Needs gcc and the Python headers.

    python scripts/sanitize_kineto.py [--runs 200000] [--sanitize address,undefined] [--seed 1]

tests/test_robust_decoder.py runs a short UBSan round of this in the ordinary test run.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "collectors" / "readers" / "_kineto_fast.c"

CORPUS = [
    '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2,'
    ' "args": {"device": 0, "stream": 7, "correlation": 1, "grid": [1, 2, 3], "block": [128, 1, 1]}}',
    '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "args": {"correlation": 1}}',  # no pid/tid
    '{"ph": "X", "cat": "gpu_user_annotation", "name": "r", "ts": 1, "dur": 2}',  # device from absent pid
    '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": "p", "tid": null, "ts": 1e999999999, "dur": -1,'
    ' "args": {"External id": 3, "Input Dims": [[2, 3], []], "Input type": ["float"]}}',
    '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 99999999999999999999,'
    ' "ts": 2, "dur": 1, "args": {"correlation": 1, "External id": 3}}',
    '{"ph": "X", "cat": "user_annotation", "name": "x\\u00e9\\ud83d\\ude00\\ud800", "pid": 1, "tid": 1, "ts": 0.0001,'
    ' "dur": 18446744073709551616}',
    '{"ph": "f", "id": 1, "pid": 0, "tid": 1, "ts": 1, "cat": "ac2g", "name": "x", "bp": "e"}',
    '{"ph": "X", "cat": "python_function", "name": "step(a.py:3)", "pid": 1, "tid": 1, "ts": 5, "dur": 1}',
    '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2, "args": null}',
    '{}',
]

CHILD = r"""
import importlib.util, random, sys
spec = importlib.util.spec_from_file_location("_kineto_fast", sys.argv[1])
fast = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fast)
runs, seed = int(sys.argv[2]), int(sys.argv[3])
corpus = sys.stdin.read().split("\n")
text = "[" + ",\n".join(corpus) + "]"
for e in corpus:
    fast.decode("[" + e + "]")
for cut in range(len(text) + 1):
    fast.decode(text[:cut])
rnd = random.Random(seed)
alphabet = '{}[]":,\\ 0123456789.e-+EXnulltrfaud\x00\x1f'
for _ in range(runs):
    chars = list(rnd.choice(corpus) if rnd.random() < 0.5 else text)
    for _ in range(rnd.randint(1, 6)):
        i = rnd.randrange(len(chars) + 1)
        op = rnd.random()
        if op < 0.4 and i < len(chars):
            chars[i] = rnd.choice(alphabet)
        elif op < 0.7 and i < len(chars):
            del chars[i]
        else:
            chars.insert(i, rnd.choice(alphabet))
    body = "".join(chars)
    fast.decode(body)
    raw = body.encode("ascii", "replace")
    if len(raw) > 2:
        fast.decode(raw, 1, len(raw) - 1)
print("decoded", runs, "mutations")
"""


def build(out: Path, sanitize: str) -> Path:
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    so = out / f"_kineto_fast{suffix}"
    cmd = ["gcc", "-shared", "-fPIC", "-O1", "-g", "-fno-omit-frame-pointer", f"-fsanitize={sanitize}",
           "-fno-sanitize-recover=all", f"-I{sysconfig.get_paths()['include']}", str(SOURCE), "-o", str(so)]
    subprocess.run(cmd, check=True)
    return so


def run(runs: int = 200_000, sanitize: str = "address,undefined", seed: int = 1, timeout: float | None = None) -> int:
    with tempfile.TemporaryDirectory(prefix="rooftop-san-") as tmp:
        so = build(Path(tmp), sanitize)
        env = {**os.environ, "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
               "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0"}
        if "address" in sanitize:  # the ASan runtime must come first: preloaded into the interpreter
            lib = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
            env["LD_PRELOAD"] = lib
        p = subprocess.run([sys.executable, "-c", CHILD, str(so), str(runs), str(seed)], input="\n".join(CORPUS),
                           capture_output=True, text=True, env=env, timeout=timeout)
        sys.stdout.write(p.stdout)
        sys.stderr.write(p.stderr[-20000:])
        return 0 if p.returncode == 0 and "runtime error" not in p.stderr and "ERROR: AddressSanitizer" not in p.stderr else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200_000)
    ap.add_argument("--sanitize", default="address,undefined")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    return run(args.runs, args.sanitize, args.seed)


if __name__ == "__main__":
    raise SystemExit(main())
