"""Issue 40: nothing silently dropped, what the file lost said before the analysis, and a file cut
before its GPU events never analysed as if its CPU ops were kernels."""
from __future__ import annotations

import json

import pyarrow as pa

from rooftop_cli import main
from rooftop.present.render import is_integrity
from rooftop.trace.conform import _drop_untimed


def _kineto_cut_before_kernels(path):
    """A GPU run as Kineto writes it (CPU ops and runtime launches first, kernels after them), cut
    inside the first kernel event."""
    ops = [{"ph": "X", "cat": "cpu_op", "name": f"aten::mm_{i}", "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5,
            "args": {"External id": i}} for i in range(6)]
    launches = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10 * i + 1,
                 "dur": 2, "args": {"correlation": 100 + i, "External id": i}} for i in range(6)]
    kernels = [{"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": 10 * i + 4,
                "dur": 3, "args": {"correlation": 100 + i, "device": 0, "stream": 7}} for i in range(6)]
    text = json.dumps({"traceEvents": ops + launches + kernels})
    cut = text.index('"cat": "kernel"') + 5
    path.write_text(text[:cut])
    return path


def test_a_file_cut_before_its_kernels_is_not_a_cpu_run(tmp_path, capsys):
    path = _kineto_cut_before_kernels(tmp_path / "cut.json")
    assert main(["report", "--json", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["phases"] == [] and doc["top_kernels"] == []  # no CPU op counted as a kernel
    assert any("cut before its GPU events" in w and "6 CPU op(s)" in w for w in doc["warnings"])
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    first = out.index("warnings about the file (read these first)")
    assert first < out.index("findings") and out.index("truncated trace") < out.index("findings")
    assert "launch gaps" not in out


def test_dropped_rows_are_named():
    table = pa.table({"id": [1, 2, None], "kind": ["kernel", "kernel", "kernel"],
                      "name": ["gemm", "flash_fwd_kernel", "softmax"], "start_ns": [0, 5, 9],
                      "dur_ns": [3, None, 1]})
    kept, said = _drop_untimed(table, "x")
    assert kept.num_rows == 1
    assert said == ["2 event(s) without id, start or duration dropped: kernel flash_fwd_kernel, kernel softmax"]
    assert is_integrity(said[0])


def test_integrity_is_told_from_other_warnings():
    assert is_integrity("truncated report (ends inside a record at byte 10 of 20)")
    assert is_integrity("3 text value(s) longer than 1,000 characters cut")
    assert not is_integrity("ncu has no timeline: start_ns places the profiled kernels back to back")


def test_an_empty_cost_column_says_what_would_fill_it_for_this_kind_of_file():
    from rooftop.present.hints import costs_hint
    from rooftop.present.render import coverage_notes
    assert "record_shapes=True" in costs_hint({"tool": "kineto", "record_shapes": 0})
    assert "record_shapes" not in costs_hint({"tool": "kineto", "record_shapes": 1})
    assert "ncu --set full" in costs_hint({"tool": "nsys"})
    assert "--section MemoryWorkloadAnalysis" in costs_hint({"tool": "ncu"})
    phases = [{"phase": "decode", "bytes_coverage": 0.0, "mbu_status": "unknown", "flops_coverage": 0.0,
               "mfu_status": "unknown"}]
    notes = coverage_notes(phases, {"tool": "kineto", "record_shapes": 0})
    assert notes[0] == "  decode: MBU unknown (no per-kernel bytes)"
    assert sum("record_shapes=True" in n for n in notes) == 1  # said once, not per line


def test_the_nsys_fixture_report_says_how_to_get_costs(fixtures_dir, capsys):
    assert main(["report", str(fixtures_dir / "traces" / "NVIDIA__Fuser__report1.sqlite")]) == 0
    assert "to get per-kernel FLOPs: Nsight Systems records times" in capsys.readouterr().out
