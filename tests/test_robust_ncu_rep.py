"""Issue 38, item 3: NVIDIA's `.ncu-rep` reader aborts the process on a report with one inflated
record length (a failed protobuf CHECK, SIGABRT). rooftop runs it in a forked child: the abort is
one line naming the file, and rooftop itself ends normally."""
from __future__ import annotations

import os
import struct
import subprocess
import sys

import pytest

from bad_inputs.harness import ROOT, control_chars

REPORT = "AveryClapp__ESMM-Research__profile.ncu-rep"


def _records(data: bytes) -> list[tuple[int, int]]:
    off, out = 10, []  # the container: "NVR\0", u32 2, u16 0x0708, then u32-length records
    while off < len(data):
        (n,) = struct.unpack_from("<I", data, off)
        out.append((off, n))
        off += 4 + n
    return out


@pytest.mark.parametrize("record,delta", [(3, 7), (20, 1), (20, 100_000)])
def test_an_inflated_record_length_is_one_line(tmp_path, fixtures_dir, record, delta):
    pytest.importorskip("ncu_report")
    data = bytearray((fixtures_dir / "ncu" / REPORT).read_bytes())
    off, n = _records(bytes(data))[record]
    struct.pack_into("<I", data, off, n + delta)
    bad = tmp_path / "inflated.ncu-rep"
    bad.write_bytes(bytes(data))
    for argv in (["report", str(bad)], ["import", str(bad), "-o", str(tmp_path / "o.parquet")]):
        p = subprocess.run([sys.executable, "-m", "rooftop", *argv], capture_output=True, text=True, cwd=ROOT,
                           timeout=120, errors="replace")
        assert p.returncode == 2, (p.returncode, p.stderr[-500:])
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and str(bad) in lines[0] and "internal error" not in lines[0], p.stderr[-800:]
        assert "crashed" in lines[0] or "truncated" in lines[0]
        assert not control_chars(p.stderr) and p.stdout == ""


def test_a_sound_report_reads_the_same_in_the_child(fixtures_dir, monkeypatch):
    pytest.importorskip("ncu_report")
    from collectors.readers.ncu_rep import read_ncu_rep

    rep = fixtures_dir / "ncu" / REPORT
    child, meta = read_ncu_rep(rep)
    monkeypatch.setenv("ROOFTOP_NCU_IN_PROCESS", "1")
    here, meta_here = read_ncu_rep(rep)
    assert child.equals(here) and meta == meta_here and len(child) > 0


def test_a_reader_that_never_ends_is_stopped_with_one_line(tmp_path, monkeypatch):
    """NVIDIA's reader caught in a loop (a damaged report it spins on): the child is killed when the
    time budget (ROOFTOP_NCU_REP_SECONDS) is spent, and the error says so and how to allow more."""
    import time

    from collectors.readers import ncu_rep
    from collectors.readers.ncu import NcuError

    rep = tmp_path / "spins.ncu-rep"
    rep.write_bytes(b"NVR\0" + b"\0" * 64)
    monkeypatch.setattr(ncu_rep, "_load_module", lambda: object())
    monkeypatch.setattr(ncu_rep, "_read", lambda path: time.sleep(600))
    monkeypatch.setenv("ROOFTOP_NCU_REP_SECONDS", "1")
    monkeypatch.delenv("ROOFTOP_NCU_IN_PROCESS", raising=False)
    t0 = time.monotonic()
    with pytest.raises(NcuError) as info:
        ncu_rep.read_ncu_rep(rep)
    assert time.monotonic() - t0 < 30
    message = str(info.value)
    assert "did not finish in 1 s" in message and "ROOFTOP_NCU_REP_SECONDS" in message and "\n" not in message
