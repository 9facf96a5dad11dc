"""The bench tools' own arithmetic: the rounds' ratios, the processes whose memory is summed."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import import_bench  # noqa: E402
import measure  # noqa: E402


def test_rounds_table_takes_the_ratio_of_each_pair_and_skips_a_pair_that_did_not_finish():
    rows = [{"kernels": 1000, "rounds": [
        {"rooftop_2_s": 2.0, "floor_s": 1.0}, {"rooftop_2_s": 6.0, "floor_s": 2.0},
        {"rooftop_2_s": 1.0, "floor_s": None},  # the floor did not finish: no pair
        {"rooftop_2_s": 2.0, "floor_s": 0.5}]}, {"kernels": 10, "rounds": []}]
    lines = import_bench.rounds_table(rows).splitlines()
    assert len(lines) == 3  # header, rule, one size (the other has no pair)
    # medians of each column (2.0 of 2, 2, 6; 1.0 of 0.5, 1, 2), ratios per pair 2, 3, 4: not 2.0 / 1.0
    assert lines[2] == "| 1,000 | 3 | 2.00; 2.00-6.00 | 1.00; 0.50-2.00 | 2.00x / 3.00x / 4.00x |"


def test_the_memory_sampler_finds_a_process_and_its_forked_workers():
    code = ("import os, sys, time\n"
            "r, w = os.pipe()\n"
            "if os.fork() == 0:\n"
            "    os.write(w, str(os.getpid()).encode()); time.sleep(5); os._exit(0)\n"
            "print(os.read(r, 32).decode(), flush=True); time.sleep(5)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    worker = None
    try:
        worker = int(p.stdout.readline())
        deadline = time.monotonic() + 5
        while worker not in measure._descendants(p.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert set(measure._descendants(p.pid)) == {p.pid, worker}
    finally:
        for pid in (p.pid, worker):
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        p.wait()
