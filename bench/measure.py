"""Run one command in a fresh process: wall time, peak RSS, and what stopped it.

Peak RSS comes from `os.wait4` on that one child (ru_maxrss of the child and the children it
waited for), so measurements taken one after another in the same driver do not mix. A time limit
kills the process group; a memory cap is an address-space limit (RLIMIT_AS) set in the child.
"""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Result:
    wall_s: float
    rss_mb: float
    status: str            # "ok", "timeout", "killed (memory)", "failed (rc N)"
    stdout: str = ""
    stderr: str = ""
    tree_mb: float = 0.0   # peak of the summed RSS of the process and its workers (sampled)
    cpu_s: float = 0.0     # user + system CPU seconds of the process and the children it waited for

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def cell(self, limit_s: float | None = None, mem_gb: float | None = None) -> str:
        """How this run reads in a table: a time, or why there is none."""
        if self.ok:
            return f"{self.wall_s:.2f}"
        if self.status == "timeout":
            return f"did not finish in {limit_s:.0f} s"
        if self.status.startswith("killed"):
            return f"killed past {mem_gb:.0f} GB after {self.wall_s:.0f} s" if mem_gb else "killed"
        return self.status


_compiled = False


def compile_bytecode() -> None:
    """Compile the project's modules once, as an installed copy has them. Where
    PYTHONDONTWRITEBYTECODE is set (this VM sets it), a checkout otherwise compiles its ~40 modules
    in every measured process: +0.3-0.5 s on a 1k-kernel import, which no installed copy pays."""
    global _compiled
    if not _compiled:
        subprocess.run([sys.executable, "-m", "compileall", "-q", "rooftop", "collectors", "tui"], cwd=ROOT,
                       stdout=subprocess.DEVNULL, check=False)
        _compiled = True


def run(cmd: list[str], timeout_s: float = 600, mem_gb: float | None = None, env: dict | None = None,
        cwd: Path = ROOT) -> Result:
    compile_bytecode()
    def limits():  # runs in the child before exec; only the driver's main thread exists here
        os.setsid()
        if mem_gb:
            cap = int(mem_gb * (1 << 30))
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, preexec_fn=limits, text=True)
    # Read pipes in threads so a chatty child cannot block; wait4 gives this child's own rusage.
    out: dict[str, str] = {}
    readers = [threading.Thread(target=lambda n=n, f=f: out.__setitem__(n, f.read()), daemon=True)
               for n, f in (("out", p.stdout), ("err", p.stderr))]
    for r in readers:
        r.start()
    fired = []
    timer = threading.Timer(timeout_s, lambda: (fired.append(1), _kill(p.pid)))
    timer.start()
    tree = [0.0]
    done = threading.Event()
    sampler = threading.Thread(target=_sample_tree, args=(p.pid, tree, done), daemon=True)
    sampler.start()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    done.set()
    sampler.join(1)
    timer.cancel()
    timed_out = bool(fired)
    p.returncode = os.waitstatus_to_exitcode(status)
    for r in readers:
        r.join(5)
    rss_mb = usage.ru_maxrss / 1024  # KiB on Linux
    err = out.get("err", "")
    if timed_out:
        state = "timeout"
    elif p.returncode == 0:
        state = "ok"
    elif "MemoryError" in err or "std::bad_alloc" in err or p.returncode == -signal.SIGKILL \
            or "Cannot allocate memory" in err or "out of memory" in err:
        state = "killed (memory)"
    else:
        state = f"failed (rc {p.returncode})"
    return Result(wall, rss_mb, state, out.get("out", ""), err, max(tree[0], rss_mb),
                  usage.ru_utime + usage.ru_stime)


def _sample_tree(pgid: int, peak: list, done: threading.Event, every_s: float = 0.02) -> None:
    """Peak of the summed RSS of the child and its descendants: `wait4`'s ru_maxrss is one
    process's peak, and a parallel reader's workers hold memory at once.

    The descendants are found through each task's `children` file, a few reads per sample: a scan
    of every /proc entry at this rate took a noticeable share of a core, from a measured tool that
    uses both cores and not from the one-core floor. Where the kernel has no
    `children` files, every process of the child's group, as before."""
    page = os.sysconf("SC_PAGE_SIZE")
    while not done.wait(every_s):
        total = 0
        for pid in _descendants(pgid):
            try:
                with open(f"/proc/{pid}/statm", "rb") as f:
                    total += int(f.read().split()[1]) * page
            except (OSError, ValueError, IndexError):
                continue
        peak[0] = max(peak[0], total / (1 << 20))


def _descendants(root: int) -> list[int]:
    """`root` and every process below it (`/proc/PID/task/TID/children`), or, without those files,
    every process of `root`'s process group (a scan of /proc)."""
    if not os.path.exists(f"/proc/{root}/task/{root}/children"):
        return _group(root) if os.path.exists(f"/proc/{root}") else []
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):  # it (or one of its threads) ended meanwhile: the others still count
            continue
    return out


def _group(pgid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
            if int(stat[stat.rindex(")") + 2:].split()[2]) == pgid:  # field 5 of stat: the process group
                out.append(int(d))
        except (OSError, ValueError, IndexError):
            continue
    return out


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def py(code: str, *args: str, python: str | None = None, **kw) -> Result:
    """`python -c code args...` with the project's interpreter (or another venv's)."""
    return run([python or sys.executable, "-c", code, *args], **kw)


def machine() -> str:
    """`2 cores, 23 GiB, AMD EPYC` for the results table."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)
    return f"{os.cpu_count()} cores (nproc {len(os.sched_getaffinity(0))}), {mem:.0f} GiB RAM, {model}"
