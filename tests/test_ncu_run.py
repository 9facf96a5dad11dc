"""`rooftop collect --counters`: the ncu command, and every failure path with a fake `ncu`."""
from __future__ import annotations

import sys
import types
from pathlib import Path

import pandas as pd
import pytest

from collectors.readers.ncu import NcuError
from collectors.capture.ncu_run import (EXIT_NO_COUNTERS, EXIT_OK, build_ncu_command, child_command,
                                count_filtered_kernels, estimate_replay_seconds, parse_counter_steps,
                                run_counters)
from rooftop.trace import load_trace, write_trace


def args(**kw):
    base = dict(preset="tiny", batch=2, prompt_len=16, gen_len=8, dtype="bf16", attn="flash",
                cuda_graphs=False, device="cuda", counter_steps="decode:0/layer=0", output="run.parquet")
    base.update(kw)
    return types.SimpleNamespace(**base)


def test_parse_counter_steps():
    assert parse_counter_steps("prefill,decode:0-2") == ["prefill/", "decode/step=0/", "decode/step=1/", "decode/step=2/"]
    assert parse_counter_steps(None) == ["decode/step=0/layer=0/"]  # one layer of one step by default
    assert parse_counter_steps("decode:5, decode:4-5") == ["decode/step=5/", "decode/step=4/"]
    assert parse_counter_steps("decode") == ["decode/"]
    for bad in ("warmup", "decode:3-1", "decode:x", "decode:0-1000"):
        with pytest.raises(NcuError):
            parse_counter_steps(bad)


def test_child_command_and_ncu_command():
    filters = parse_counter_steps("prefill,decode:0-2")
    child = child_command(args(), filters)
    assert child[:4] == [sys.executable, "-m", "rooftop", "collect"]
    assert child[-1] == "--counters-child"
    assert child[child.index("--gen-len") + 1] == "3"  # decode steps 0-2 need 3 steps, not 8
    assert child[child.index("--preset") + 1] == "tiny" and "--no-cuda-graphs" in child
    assert child_command(args(counter_steps="decode"))[child.index("--gen-len") + 1] == "8"
    assert child_command(args())[child.index("--gen-len") + 1] == "1"  # decode/step=0/layer=0/: one step
    cmd = build_ncu_command(filters, "/tmp/r.ncu-rep", child, ncu="/opt/ncu")
    assert cmd[0] == "/opt/ncu" and cmd[1] == "--nvtx"
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--nvtx-include"] == filters
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    sections = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--section"]
    assert {"WarpStateStats", "SpeedOfLight", "MemoryWorkloadAnalysis",
            "SpeedOfLight_HierarchicalTensorRooflineChart"} <= set(sections)
    metrics = cmd[cmd.index("--metrics") + 1].split(",")
    assert {"dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum"} <= set(metrics)
    assert cmd[cmd.index("--export") + 1] == "/tmp/r.ncu-rep" and "--force-overwrite" in cmd
    assert cmd[-len(child):] == child


def test_estimate_and_count():
    assert estimate_replay_seconds(0, 40) == 0
    assert estimate_replay_seconds(10, 40) == pytest.approx(10 * (40 * 0.02 + 0.2))
    assert estimate_replay_seconds(20, 40) == pytest.approx(2 * estimate_replay_seconds(10, 40))
    ev = pd.DataFrame({"kind": ["kernel"] * 4 + ["range"],
                       "path": ["prefill/step=0/layer=0", "decode/step=1/layer=0", "decode/step=3", "warmup",
                                "prefill"]})
    assert count_filtered_kernels(ev, parse_counter_steps("prefill,decode:0-2")) == 2


# --- running, with a fake ncu ---------------------------------------------------------------

def timeline_trace(path: Path, paths=("Non-fused-GEMM", "Non-fused-GEMM", "Fused-GEMM")):
    rows = [{"id": i, "kind": "kernel", "name": "void cutlass::Kernel<cutlass::gemm::kernel::Gemm<X>>(Params)",
             "path": p, "start_ns": 1000 * i, "dur_ns": 900} for i, p in enumerate(paths)]
    write_trace(path, rows, {"source": {"tool": "rooftop collect"}, "device": {"name": "NVIDIA A100"}})
    return path


def fake_ncu(tmp_path: Path, body: str) -> str:
    exe = tmp_path / "bin" / "ncu"
    exe.parent.mkdir(exist_ok=True)
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(0o755)
    return str(exe)


@pytest.fixture
def trace(tmp_path):
    # kernels inside the default filter (decode/step=0/layer=0/), so the budget check lets ncu start
    return timeline_trace(tmp_path / "run.parquet", paths=("decode/step=0/layer=0/attn",) * 2 + ("decode/step=0/layer=0/mlp",))


def test_ncu_missing(trace, tmp_path, monkeypatch, capsys):
    before = trace.read_bytes()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert run_counters(args(), trace) == EXIT_NO_COUNTERS
    err = capsys.readouterr().err
    assert "`ncu`" in err and "not on PATH" in err and "complete without them" in err
    assert trace.read_bytes() == before


def test_permission_error(trace, tmp_path, capsys):
    before = trace.read_bytes()
    ncu = fake_ncu(tmp_path, 'echo "==PROF== Connected to process 1"\n'
                   'echo "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU '
                   'Performance Counters on the target device 0."\nexit 1')
    assert run_counters(args(), trace, ncu=ncu, check_permission=False) == EXIT_NO_COUNTERS
    err = capsys.readouterr().err
    assert "NVreg_RestrictProfilingToAdminUsers=0" in err and "/etc/modprobe.d/" in err
    assert "CAP_SYS_ADMIN" in err and "sudo" in err and "--nvtx-include" in err  # the command was shown
    assert trace.read_bytes() == before
    assert load_trace(trace).events["counters"].isna().all()


def test_replay_failure(trace, tmp_path, capsys):
    before = trace.read_bytes()
    ncu = fake_ncu(tmp_path, 'echo "==ERROR== Failed to profile kernel \\"k\\": replay failed"\nexit 1')
    assert run_counters(args(), trace, ncu=ncu) == EXIT_NO_COUNTERS
    err = capsys.readouterr().err
    assert "exited with status 1" in err and "replay failed" in err
    assert trace.read_bytes() == before
    # exit 0 but no report written
    ncu = fake_ncu(tmp_path, "exit 0")
    assert run_counters(args(), trace, ncu=ncu) == EXIT_NO_COUNTERS
    assert "wrote no report" in capsys.readouterr().err
    assert trace.read_bytes() == before


def test_success_joins_the_report(tmp_path, capsys, fixtures_dir, monkeypatch):
    pytest.importorskip("ncu_report")
    # the real report's kernels sit in ranges `Non-fused-GEMM`/`Fused-GEMM`, which no --counter-steps
    # item names: the budget check is passed over here (it has its own tests), the join is the subject
    import collectors.capture.ncu_run as ncu_run
    monkeypatch.setattr(ncu_run, "check_budget", lambda events, filters, budget: (3, 3.0, None))
    trace = timeline_trace(tmp_path / "run.parquet")
    rep = fixtures_dir / "ncu" / "panjd123__cutlass__report.ncu-rep"
    # The fake ncu "profiles" by copying the real report to wherever --export points.
    ncu = fake_ncu(tmp_path, 'while [ "$#" -gt 0 ]; do if [ "$1" = "--export" ]; then out="$2"; fi; shift; done\n'
                   f'cp "{rep}" "$out"\necho "==PROF== Disconnected"')
    assert run_counters(args(counter_steps="prefill"), trace, ncu=ncu) == EXIT_OK
    assert "joined onto 3 of 3" in capsys.readouterr().err
    tr = load_trace(trace)
    ev = tr.events.sort_values("id")
    assert ev["counters"].tolist() == [True, True, True]
    assert ev["dram_read"].tolist() == [1345664.0, 1345664.0, 1522944.0]
    assert ev["dur_ns"].tolist() == [900, 900, 900]  # the timeline's durations stay
    assert ev["stall_long_scoreboard"].iloc[2] == pytest.approx(2.062096623679996, rel=1e-6)
    assert tr.meta["device"]["name"] == "NVIDIA A100"
    assert tr.meta["device"]["peaks"]["ncu"]["bw"] == pytest.approx(1.929169e12, rel=1e-6)
    assert tr.meta["source"]["counters"]["matched"] == 3
    assert (tmp_path / "run.ncu-rep").is_file()


def test_bad_report_keeps_trace(trace, tmp_path, capsys):
    pytest.importorskip("ncu_report")
    before = trace.read_bytes()
    ncu = fake_ncu(tmp_path, 'while [ "$#" -gt 0 ]; do if [ "$1" = "--export" ]; then out="$2"; fi; shift; done\n'
                   'echo garbage > "$out"')
    assert run_counters(args(), trace, ncu=ncu) == EXIT_NO_COUNTERS
    assert "not an Nsight Compute report or empty" in capsys.readouterr().err
    assert trace.read_bytes() == before
