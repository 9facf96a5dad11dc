"""The CLI as a user meets it: exit codes, one-line errors, `report --json` keys."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rooftop_cli import main
from rooftop.trace import write_trace

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def trace_path(tmp_path):
    rows = [dict(kind="kernel", name="gemv", start_ns=i * 2000, dur_ns=1500, path=f"decode/step={i}/layer=0/mlp",
                 model_flops=2e6, model_bytes=1e6) for i in range(4)]
    rows.append(dict(kind="kernel", name="gemm", start_ns=10_000, dur_ns=100_000, path="prefill/step=0",
                     model_flops=1e11, model_bytes=1e8))
    meta = {"device": {"name": "NVIDIA H200"}, "workload": {"batch": 1, "dtype": "bf16"},
            "steps": [{"phase": "decode", "index": i, "batch": 1, "new_tokens": 1, "context": 8 + i} for i in range(4)]}
    return write_trace(tmp_path / "t.parquet", rows, meta)


def run_cli(*args):
    out = subprocess.run([sys.executable, "-m", "rooftop", *map(str, args)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    return out.returncode, out.stdout, out.stderr


def test_report_json_keys(trace_path, capsys):
    assert main(["report", "--json", str(trace_path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"trace", "device", "totals", "phases", "steps", "top_kernels", "findings"} <= set(doc)
    assert doc["trace"]["path"] == str(trace_path) and doc["trace"]["modeled"] is False
    assert doc["device"]["name"] == "NVIDIA H200" and doc["device"]["peaks_source"] == "datasheet"
    assert doc["device"]["peak_bw"] == pytest.approx(4.8e12)
    assert doc["totals"]["kernels"] == 5
    phases = {p["phase"]: p for p in doc["phases"]}
    d = phases["decode"]
    assert d["steps"] == 4 and d["bytes_source"] == "model"
    for key in ("phase", "steps", "kernels", "span_ns", "busy_ns", "flops", "bytes", "bytes_source", "tflops",
                "tbps", "mfu", "mbu"):
        assert key in d
    assert 0 <= d["mbu"] <= 1 and 0 <= d["mfu"] <= 1
    assert [(s["phase"], s["step"]) for s in doc["steps"]] == [("decode", i) for i in range(4)] + [("prefill", 0)]
    assert {"id", "severity", "title", "detail"} <= set(doc["findings"][0])


def test_report_text(trace_path, capsys):
    assert main(["report", str(trace_path)]) == 0
    out = capsys.readouterr().out
    assert "decode" in out and "prefill" in out and "findings" in out and "H200" in out


@pytest.mark.parametrize("content,needle", [
    (b"", "empty"),
    (b"\x00\x01garbage", "unrecognised|not a"),
])
def test_bad_file_one_line_exit_2(tmp_path, content, needle):
    p = tmp_path / "bad.parquet"
    p.write_bytes(content)
    code, out, err = run_cli("report", p)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("rooftop: error: ") and str(p) in err and re.search(needle, err)
    assert "Traceback" not in err


def test_missing_file(tmp_path):
    code, _, err = run_cli("report", tmp_path / "nope.parquet")
    assert code == 2 and "no such file" in err and err.count("\n") == 1


def test_usage_error_is_one_line():
    code, _, err = run_cli("report")
    assert code == 2 and err.startswith("rooftop: error:") and err.count("\n") == 1


def test_diff(trace_path, tmp_path, capsys):
    rows = [dict(kind="kernel", name="gemv", start_ns=i * 1500, dur_ns=1500, path=f"decode/step={i}",
                 model_flops=2e6, model_bytes=1e6) for i in range(4)]
    b = write_trace(tmp_path / "b.parquet", rows, {"device": {"name": "NVIDIA H200"}})
    assert main(["diff", "--json", str(trace_path), str(b)]) == 0
    doc = json.loads(capsys.readouterr().out)
    dec = [p for p in doc["phases"] if p["phase"] == "decode"][0]
    assert dec["span_ns_a"] == 4 * 1500 and dec["span_ns_b"] == 4 * 1500
    gem = [g for g in doc["groups"] if g["key"] == "gemm"][0]
    assert gem["status"] == "only in A" and gem["time_delta"] == -100_000
    assert main(["diff", str(trace_path), str(b)]) == 0
    assert "kernel groups with the largest time change" in capsys.readouterr().out


def test_names_are_not_interpreted(tmp_path, capsys):
    rows = [dict(kind="kernel", name="evil\x1b[31mred\x07[bold]x[/]", start_ns=0, dur_ns=10, path="decode/step=0")]
    p = write_trace(tmp_path / "e.parquet", rows, {})
    assert main(["report", str(p)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[31mred" in out and "[bold]x[/]" in out


def test_gpus_lists_table(capsys):
    assert main(["gpus"]) == 0
    out = capsys.readouterr().out
    assert "h100-sxm" in out.lower() and "h200" in out.lower()


def test_open_unreadable_file_fails_before_the_app_starts(tmp_path):
    p = tmp_path / "g.json"
    p.write_text("garbage")
    code, out, err = run_cli(p)
    assert code == 2 and out == ""          # no full-screen escape sequences were written
    assert err.startswith("rooftop: error: ") and "unrecognised" in err and err.count("\n") == 1


def test_three_traces_is_an_error_that_says_so(tmp_path, capsys):
    from rooftop_cli import main

    assert main(["a.parquet", "b.parquet", "c.parquet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "one trace, or two to compare; got 3" in err


def test_report_of_an_import_draws_its_progress_and_ends_the_line_first(tmp_path, capsys, monkeypatch):
    """`rooftop report` of a file it converts in memory draws the import's progress line on stderr
    when it is a terminal (and the file large: every file here), then `analysing`, and ends the
    line before the report."""
    from collectors.readers.progress import ANALYSING, JOINING, ProgressLine
    from test_kineto import _synthetic, _write

    monkeypatch.setattr(ProgressLine, "MIN_BYTES", 0)
    src = _write(tmp_path / "step.json", _synthetic())
    assert main(["report", str(src)]) == 0
    assert capsys.readouterr().err == ""  # stderr no terminal (a script, CI): no line at all
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # (pytest's capture: a terminal now)
    assert main(["report", str(src)]) == 0
    captured = capsys.readouterr()
    lines = captured.err.split("\r")
    assert lines[0] == "" and lines[1].startswith("importing step.json: ")
    assert any(line.rstrip().endswith(JOINING) for line in lines)
    assert lines[-1].rstrip(" \n").endswith(f" · {ANALYSING}") and captured.err.endswith("\n")
    assert captured.out.startswith("rooftop report: ") and "importing" not in captured.out
    parquet = tmp_path / "step.parquet"  # a rooftop trace is read, not imported: no line at all
    assert main(["import", str(src), "-o", str(parquet)]) == 0
    capsys.readouterr()
    assert main(["report", str(parquet)]) == 0
    assert capsys.readouterr().err == ""
