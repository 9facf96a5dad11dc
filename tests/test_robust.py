"""Issue 13 (robustness, second pass): secrets, text that is never interpreted, bounded work,
special paths, messages and warnings. The hostile files themselves are in tests/bad_inputs/corpus.py
(`robust_cases`); this file checks what the corpus contract alone cannot see."""
from __future__ import annotations

import io
import json
import os
import re
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rooftop.trace.redact import REDACTED, redact, redact_text
from rooftop.present.text import has_unsafe, printable, spreadsheet_cell, write_csv
from rooftop.trace import TraceError, load_trace, write_trace

from bad_inputs.corpus import (BIDI, CONTEXT_SECRETS, FORMULA, SECRET_VALUES, SECRETS, _kernel_ev, _kineto_doc, _meta,
                               _row, robust_cases)
from bad_inputs.harness import ROOT, check, run_in_process

BY_NAME = {c.name: c for c in robust_cases()}


def _build(name: str, tmp_path: Path) -> Path:
    return BY_NAME[name].make(tmp_path, None)


def _all_text(path: Path) -> str:
    """Every string a written trace holds: all columns and the metadata document."""
    files = [path] if path.is_file() else sorted(path.rglob("*.parquet"))
    out = []
    for f in files:
        t = pq.read_table(f)
        out.append((t.schema.metadata or {}).get(b"rooftop", b"").decode("utf-8", "replace"))
        for c in t.column_names:
            col = t.column(c)
            if "string" in str(col.type):
                out += [str(v) for v in col.to_pylist() if v is not None]
    return "\n".join(out)


# --- 1. secrets ------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", list(SECRETS.values()), ids=list(SECRETS))
def test_every_token_shape_is_scrubbed(value):
    for text in (value, f"--token {value}", f"x={value};", f"[{value}]", f'"{value}"', f"name {value} tail"):
        assert value not in redact_text(text), text


@pytest.mark.parametrize("key", list(CONTEXT_SECRETS), ids=list(CONTEXT_SECRETS))
def test_secrets_given_away_by_context_are_scrubbed(key):
    head, value = CONTEXT_SECRETS[key]
    secret = value.split("@")[0].rstrip('"}')
    assert secret not in redact_text(head + value)


@pytest.mark.parametrize("text", [
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, float)",
    "decode/step=12/layer=3/attn", "token budget 512", "max_tokens=128", "--max-tokens 5", "tokenizer=llama",
    "num_tokens=4096", "author=alice", "sk-short", "ampere_sgemm_128x64_tn", "https://example.com/a:b",
])
def test_ordinary_text_is_not_redacted(text):
    assert redact_text(text) == text


_NOISE = st.text(alphabet=st.characters(blacklist_categories=("Cs",), max_codepoint=0x2FF), max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=_NOISE, after=_NOISE, which=st.sampled_from(sorted(SECRETS)))
def test_a_token_never_survives_whatever_surrounds_it(before, after, which):
    """A token after any separator survives nothing (it may only be glued to a preceding word)."""
    value = SECRETS[which]
    text = f"{before} {value} {after}"
    assert value not in redact_text(text)
    assert value not in json.dumps(redact({"k": text, text: [text]}))


@pytest.mark.parametrize("text", [
    "-eyJ" * 50_000, "a" * 200_000 + "token", "a=" * 100_000 + "token", "x:" * 100_000 + "secret",
    "hf_" * 70_000, "://a:" * 40_000, "Bearer " * 30_000, '"a":' * 50_000 + "token", "--a " * 50_000 + "token",
    "token" * 40_000, "token=" * 35_000, "--token " * 25_000, "Token=a" * 30_000,
])
def test_redaction_is_linear_on_hostile_text(text):
    """Every pattern starts at a literal or at the start of a run and takes its body possessively:
    200 K characters in well under a second (a quadratic pattern needs minutes)."""
    t = time.perf_counter()
    redact_text(text)
    assert time.perf_counter() - t < 2.0


@pytest.mark.parametrize("name", ["r13-secrets-kineto", "r13-secrets-nsys", "r13-secrets-csv",
                                  "r13-secrets-parquet-dict", "r13-secrets-parquet-large", "r13-secrets-parquet-plain"])
def test_no_secret_reaches_a_written_trace_or_a_report(name, tmp_path):
    path = _build(name, tmp_path)
    out = tmp_path / "out.parquet"
    o = run_in_process(["import", str(path), "-o", str(out)])
    assert o.rc == 0, o.err
    written = _all_text(out)
    report = run_in_process(["report", str(path)])
    shown = run_in_process(["report", "--json", str(path)])
    for value in SECRET_VALUES:
        for where, text in (("written", written), ("report", report.out), ("json", shown.out),
                            ("stderr", o.err + report.err)):
            assert value not in text, f"{value} survives in the {where} output"
    assert REDACTED in written
    assert "/home/alice" not in written  # an absolute source path is stored as the file's name


def test_scrub_covers_every_text_column_and_metadata_on_load(tmp_path):
    path = _build("r13-secrets-parquet-dict", tmp_path)
    t = load_trace(path)
    for c in t.events.columns:
        if t.events[c].dtype == object or str(t.events[c].dtype) == "category":
            text = "\n".join(map(str, pd.unique(t.events[c].astype(object))))
            assert not any(v in text for v in SECRET_VALUES), c
    assert not any(v in json.dumps(t.meta, default=str) for v in SECRET_VALUES)
    assert t.meta["source"]["file"] == "run.json"


# --- 2. nothing is interpreted ----------------------------------------------------------------------

def test_printable_escapes_controls_bidi_and_invisibles():
    shown = printable("a\x1b[31mb\x07\u202ec\u200bd\u2066e\ufeff\u00ad\ud800\u2028" + "\x9b")
    assert not has_unsafe(shown)
    for escaped in ("\\x1b", "\\x07", "\\u202e", "\\u200b", "\\u2066", "\\ufeff", "\\xad", "\\ud800", "\\u2028",
                    "\\x9b"):
        assert escaped in shown
    assert printable("café 中 😀 [bold]x[/]") == "café 中 😀 [bold]x[/]"  # text and markup-looking text kept
    assert printable(None) == "—" and printable(float("nan")) == "—"


@pytest.mark.parametrize("cell, want", [("=1+2", "'=1+2"), ("+cmd", "'+cmd"), ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"),
                                        ("\tx", "'\\x09x"), ("\rx", "'\\x0dx"), ("gemm", "gemm"), (5, 5), (None, None)])
def test_spreadsheet_cells_never_run(cell, want):
    assert spreadsheet_cell(cell) == want


def test_csv_export_is_safe_and_atomic(tmp_path, monkeypatch):
    frame = pd.DataFrame({"kernel": pd.Categorical([FORMULA, "gemm", BIDI]), "time": [1.0, -2.0, 3.0],
                          "=cmd": ["a", "b", "c"]})
    path = tmp_path / "x.csv"
    write_csv(path, frame)
    text = path.read_text(encoding="utf-8")
    rows = list(__import__("csv").reader(io.StringIO(text)))
    assert rows[0] == ["kernel", "time", "'=cmd"]
    assert rows[1][0].startswith("'=") and rows[2][0] == "gemm" and not has_unsafe(rows[3][0])
    assert rows[2][1] == "-2.0"  # numbers stay numbers
    assert [p.name for p in tmp_path.iterdir()] == ["x.csv"]  # no temporary file left

    def boom(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(pd.DataFrame, "to_csv", boom)
    with pytest.raises(OSError):
        write_csv(tmp_path / "y.csv", frame)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.csv"]  # a failed export leaves nothing


def test_report_and_diff_show_hostile_text_literally(tmp_path):
    path = _build("r13-interpreted", tmp_path)
    for argv in (["report", str(path)], ["diff", str(path), str(path)]):
        o = run_in_process(argv)
        assert o.rc == 0, o.err
        assert not any(has_unsafe(line) for line in o.out.splitlines()), argv
        assert "\\u202e" in o.out or argv[0] == "diff"


# --- 3. bounded work ------------------------------------------------------------------------------

LIMITED = ["r13-malformed-mid", "r13-malformed-head", "r13-gzip-bomb", "r13-absurd-patterns", "r13-deep-ranges",
           "r13-bad-events"]


def _limited(argv: list[str], env: dict | None = None, timeout: float = 60, mem_gb: float = 3.0):
    """`python -m rooftop ARGV` under a memory limit (address space) and a wall-clock limit."""
    def limit():
        cap = int(mem_gb * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    p = subprocess.run([sys.executable, "-m", "rooftop", *argv], capture_output=True, text=True, errors="replace",
                       timeout=timeout, cwd=ROOT, preexec_fn=limit, env={**os.environ, **(env or {})})
    return p


@pytest.mark.parametrize("name", LIMITED)
def test_hostile_files_end_within_time_and_memory(name, tmp_path):
    path = _build(name, tmp_path)
    t = time.perf_counter()
    p = _limited(["import", str(path), "-o", str(tmp_path / "o.parquet")])
    elapsed = time.perf_counter() - t
    from bad_inputs.harness import Outcome
    check(Outcome(p.returncode, p.stdout, p.stderr), path, None if BY_NAME[name].expect == "warn" else BY_NAME[name].expect)
    assert elapsed < 45, f"{name}: {elapsed:.1f} s"
    if BY_NAME[name].expect == "warn":
        assert "rooftop: warning:" in p.stderr  # import prints what it dropped; the output is still written
        assert (tmp_path / "o.parquet").is_file()


def test_malformed_json_is_found_once_and_named(tmp_path):
    o = run_in_process(["import", str(_build("r13-malformed-mid", tmp_path)), "-o", str(tmp_path / "o.parquet")])
    assert o.rc == 0
    assert re.search(r"malformed JSON .* at character [\d,]+: kept the 30000 events before it", o.err), o.err
    o = run_in_process(["report", str(_build("r13-malformed-head", tmp_path))])
    assert "malformed JSON" in o.err and "at character" in o.err


def test_one_bad_event_costs_one_event(tmp_path):
    from collectors.readers.importers import convert
    table, meta = convert(_build("r13-bad-events", tmp_path))
    warnings = " | ".join(meta["warnings"])
    assert "3 event(s) whose timestamp is not a usable number dropped" in warnings
    assert "4 event(s) with an out-of-range launch size or id dropped" in warnings
    kernels = [n for n, k in zip(table.column("name").to_pylist(), table.column("kind").to_pylist()) if k == "kernel"]
    assert len(kernels) == 6  # the 5 good ones and the lone surrogate's, whose name is cleaned
    assert "lone\ufffdsurrogate" in kernels


def test_deep_nesting_is_linear_and_cut(tmp_path):
    from collectors.readers.kineto import read_kineto
    t = time.perf_counter()
    rows, meta = read_kineto(_build("r13-deep-ranges", tmp_path))
    assert time.perf_counter() - t < 20
    paths = rows["path"].dropna()
    assert paths.str.len().max() <= 1024 + 2
    assert any("range path(s) deeper than" in w for w in meta["warnings"])


@pytest.mark.parametrize("env, case, budget", [
    ({"ROOFTOP_MAX_ROWS": "2"}, "parquet", "ROOFTOP_MAX_ROWS"),
    ({"ROOFTOP_MAX_ROWS": "2"}, "kineto", "ROOFTOP_MAX_ROWS"),
    ({"ROOFTOP_MAX_ROWS": "2"}, "nsys", "ROOFTOP_MAX_ROWS"),
    ({"ROOFTOP_MAX_SQL_VALUE": "1000"}, "nsys-long", "ROOFTOP_MAX_SQL_VALUE"),
    ({"ROOFTOP_MAX_INFLATE_RATIO": "2"}, "gzip", "ROOFTOP_MAX_INFLATE_RATIO"),
])
def test_budgets_give_one_line_naming_the_budget(env, case, budget, tmp_path, monkeypatch):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    if case == "parquet":
        path = write_trace(tmp_path / "t.parquet", [_row(i) for i in range(5)], _meta())
    elif case == "kineto":
        path = tmp_path / "t.json"
        path.write_text(json.dumps(_kineto_doc([_kernel_ev(i, 10 * i, 5) for i in range(5)])))
    elif case == "gzip":  # 70 MB of blanks: past the free 32 MiB, and 1000x its compressed size
        import gzip
        doc = json.dumps(_kineto_doc([_kernel_ev(i, 10 * i, 5) for i in range(5)]))
        path = tmp_path / "t.json.gz"
        path.write_bytes(gzip.compress(doc[:-2].encode() + b" " * (70 << 20) + b"]}"))
    else:
        path = tmp_path / "t.sqlite"
        con = sqlite3.connect(path)
        con.executescript("CREATE TABLE StringIds (id INTEGER, value TEXT); CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL"
                          " (start INTEGER, end INTEGER, deviceId INTEGER, streamId INTEGER, correlationId INTEGER,"
                          " demangledName INTEGER, shortName INTEGER);")
        con.execute("INSERT INTO StringIds VALUES (1, ?)", ("k" * (5000 if case == "nsys-long" else 3),))
        for i in range(5):
            con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 7, ?, 1, 1)", (10 * i, 10 * i + 5, i))
        con.commit()
        con.close()
    o = run_in_process(["report", str(path)])
    check(o, path, "error")
    assert budget in o.err, o.err


# --- 4. special paths -----------------------------------------------------------------------------

def test_fifo_devices_proc_and_directories_get_one_line_at_once(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    cases = [(fifo, "named pipe"), (Path("/dev/zero"), "character device"), (Path("/proc/self/status"), "/proc")]
    for path, what in cases:
        for argv in (["report", str(path)], ["import", str(path), "-o", str(tmp_path / "o.parquet")], [str(path)]):
            t = time.perf_counter()
            o = run_in_process(argv)  # an open() of the FIFO would block: the harness alarm would fire
            assert time.perf_counter() - t < 5
            check(o, path, "error")
            assert what in o.err, o.err
    d = tmp_path / "adir"
    d.mkdir()
    from rooftop.trace.parquet import _read_file
    with pytest.raises(TraceError, match="is a directory"):
        _read_file(d)


# (permission denied, for every format and command, as root too: tests/test_robust_paths.py)


def test_output_is_never_the_input_nor_a_special_file(tmp_path):
    src = write_trace(tmp_path / "t.parquet", [_row(0)], _meta())
    before = src.read_bytes()
    link = tmp_path / "link.parquet"
    link.symlink_to(src)
    fifo = tmp_path / "fifo.parquet"
    os.mkfifo(fifo)
    for out, words in ((src, "the output is the input"), (link, "the output is the input"),
                       (Path("/dev/null"), "not a regular file"), (fifo, "not a regular file"),
                       (tmp_path, "is a directory")):
        o = run_in_process(["import", str(src), "-o", str(out)])
        assert o.rc == 2 and words in o.err, (out, o.err)
    assert src.read_bytes() == before
    o = run_in_process(["predict", "--preset", "llama3-8b", "--gpu", "h100", "-o", "/dev/null"])
    assert o.rc == 2 and "not a regular file" in o.err, o.err


def _rank_dir(tmp_path: Path, ranks: dict[str, int | None], bad: str | None = None) -> Path:
    src = tmp_path / "run"
    src.mkdir()
    for name, rank in ranks.items():
        head = {"distributedInfo": {"rank": rank}} if rank is not None else {}
        text = json.dumps(_kineto_doc([_kernel_ev(1, 10, 5)], **head))
        (src / name).write_text(text[: len(text) // 3] + "{{{{" if name == bad else text)
    return src


def test_per_rank_output_is_atomic_fresh_and_unique(tmp_path):
    out = tmp_path / "out"
    src = _rank_dir(tmp_path, {"a.json": 0, "b.json": 1})
    assert run_in_process(["import", str(src), "-o", str(out)]).rc == 0
    assert sorted(p.parent.name for p in out.glob("rank=*/trace.parquet")) == ["rank=0", "rank=1"]
    # a later run with one rank replaces the whole directory: no stale rank=1 mixed in
    src2 = tmp_path / "two"
    src2.mkdir()
    (src2 / "only.json").write_text(json.dumps(_kineto_doc([_kernel_ev(1, 10, 5)], distributedInfo={"rank": 0})))
    assert run_in_process(["import", str(src2), "-o", str(out)]).rc == 0
    assert sorted(p.parent.name for p in out.glob("rank=*/trace.parquet")) == ["rank=0"]
    # two files claiming one rank: an error, and nothing is written
    dup = tmp_path / "dup"
    dup.mkdir()
    for n in ("x.json", "y.json"):
        (dup / n).write_text(json.dumps(_kineto_doc([_kernel_ev(1, 10, 5)], distributedInfo={"rank": 3})))
    o = run_in_process(["import", str(dup), "-o", str(tmp_path / "dup-out")])
    assert o.rc == 2 and "rank 3 appears twice" in o.err, o.err
    assert not (tmp_path / "dup-out").exists()
    # a rank that fails half-way leaves neither the output nor a temporary directory
    listing = sorted(p.name for p in tmp_path.iterdir())
    (tmp_path / "b").mkdir()
    listing.append("b")
    bad = _rank_dir(tmp_path / "b", {"r0.json": 0, "r1.json": None}, bad="r1.json")
    o = run_in_process(["import", str(bad), "-o", str(tmp_path / "bad-out")])
    if o.rc == 2:
        assert not (tmp_path / "bad-out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(listing + (["bad-out"] if o.rc == 0 else []))
    assert not list(tmp_path.glob(".*.tmp"))
    # an existing directory that is not an earlier import is never replaced
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    o = run_in_process(["import", str(src), "-o", str(mine)])
    assert o.rc == 2 and "not an earlier rooftop import" in o.err
    assert (mine / "notes.txt").read_text() == "keep me"


def test_wal_mode_sqlite_leaves_no_files(tmp_path):
    path = tmp_path / "wal.sqlite"
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    con.executescript("CREATE TABLE StringIds (id INTEGER, value TEXT); INSERT INTO StringIds VALUES (1, 'k');"
                      "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER,"
                      " streamId INTEGER, correlationId INTEGER, demangledName INTEGER, shortName INTEGER);"
                      "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (10, 20, 0, 7, 1, 1, 1);")
    con.commit()
    con.close()
    before = sorted(p.name for p in tmp_path.iterdir())
    assert before == ["wal.sqlite"]
    o = run_in_process(["report", str(path)])
    assert o.rc == 0, o.err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def _big_kineto(path: Path, n: int = 400_000) -> Path:
    ev = '{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": %d, "dur": 5, "args": {"correlation": %d}}'
    path.write_text('{"traceEvents": [' + ",".join(ev % (10 + i, i) for i in range(n)) + "]}")
    return path


@pytest.mark.parametrize("sig, rc, word", [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")])
def test_signals_leave_no_temporary_files_and_one_line(sig, rc, word, tmp_path):
    src = _big_kineto(tmp_path / "big.json")
    out = tmp_path / "out" / "t.parquet"
    # the signal while the output's temporary file is there (`rooftop.trace.atomic`), not after a fixed
    # sleep: the whole import takes ~2 s here, and a fixed 2 s often came after it; a run that ends
    # before its temporary file is seen is run again
    for _ in range(3):
        p = subprocess.Popen([sys.executable, "-m", "rooftop", "import", str(src), "-o", str(out)], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while p.poll() is None and not list(out.parent.glob(f".{out.name}.*.tmp")) and time.monotonic() < deadline:
            time.sleep(0.002)
        if p.poll() is None:
            break
        p.communicate()
        out.unlink(missing_ok=True)
    else:
        pytest.skip("the import finished before its temporary file was seen, three times (a very fast machine)")
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    if p.returncode == 0:
        pytest.skip("the import finished before the signal (a very fast machine)")
    assert p.returncode == rc, err
    said = [line for line in err.splitlines() if line.strip() and not line.startswith("importing ")]
    assert said == [f"rooftop: {word}"], err  # one line (after the progress line, if one was drawn)
    assert not out.exists()
    leftovers = [q.name for q in (tmp_path / "out").iterdir()] if (tmp_path / "out").exists() else []
    assert not leftovers, leftovers


# --- 5./6. messages and warnings --------------------------------------------------------------------

def test_metadata_too_deep_and_not_json_safe(tmp_path):
    from bad_inputs.corpus import _meta_cases
    cases = {c.name: c for c in _meta_cases()}
    deep = cases["parquet-meta-too-deep"].make(tmp_path, None)
    o = run_in_process(["report", str(deep)])
    check(o, deep, "error")
    assert "nested too deep" in o.err
    nan = cases["parquet-meta-not-json-safe"].make(tmp_path, None)
    o = run_in_process(["report", "--json", str(nan)])
    assert o.rc == 0, o.err
    json.loads(o.out)  # strict JSON: NaN/inf/huge numbers became null


@pytest.mark.parametrize("column", ["name", "kind", "start_ns", "dur_ns", "id"])
def test_a_wrong_required_type_names_column_and_types(column, tmp_path):
    path = BY_NAME[f"r13-type-{column}-struct"].make(tmp_path, None)
    o = run_in_process(["report", str(path)])
    check(o, path, "error")
    assert f"column {column} has type struct" in o.err and "expected" in o.err, o.err


def test_a_wrong_optional_type_is_ignored_with_a_warning(tmp_path):
    path = BY_NAME["r13-type-grid-text"].make(tmp_path, None)
    t = load_trace(path)
    assert any("grid (binary)" in w for w in t.warnings), t.warnings
    assert t.events["grid"].isna().all()


def test_import_prints_warnings_and_still_writes(tmp_path, fixtures_dir):
    data = (fixtures_dir / "traces" / "facebookresearch__HolisticTraceAnalysis__tests__data__trace_filter__sampled_rank-0"
            ".json.gz").read_bytes()
    src = tmp_path / "cut.json.gz"
    src.write_bytes(data[: len(data) // 2])
    out = tmp_path / "o.parquet"
    o = run_in_process(["import", str(src), "-o", str(out)])
    assert o.rc == 0
    assert "rooftop: warning: truncated trace" in o.err
    assert load_trace(out).warnings
    r = run_in_process(["report", str(out)])
    assert "truncated trace" in r.out


def test_truncated_ncu_rep_warns_that_kernels_are_missing(tmp_path, fixtures_dir):
    pytest.importorskip("ncu_report")
    data = (fixtures_dir / "ncu" / "AveryClapp__ESMM-Research__profile.ncu-rep").read_bytes()
    cut = tmp_path / "cut.ncu-rep"
    cut.write_bytes(data[: int(len(data) * 0.99)])
    p = _limited(["import", str(cut), "-o", str(tmp_path / "o.parquet")])
    assert p.returncode == 0, p.stderr
    assert "truncated report" in p.stderr and "kernels profiled after the cut are missing" in p.stderr
    mid = tmp_path / "mid.ncu-rep"
    mid.write_bytes(data[: len(data) // 2])
    p = _limited(["report", str(mid)])
    assert p.returncode == 2 and "truncated Nsight Compute report" in p.stderr, p.stderr


def test_csv_with_bom_is_accepted(tmp_path):
    path = _build("raw-r13-bom.csv", tmp_path)
    check(run_in_process(["report", str(path)]), path, "ok")


def test_no_robust_case_is_an_internal_error(tmp_path):
    """Every generated hostile file ends in a load or a one-line error that is not 'internal error'
    (the corpus runs each wrong type through every door; here one per column suffices)."""
    for case in robust_cases():
        if case.name in LIMITED or (case.name.startswith("r13-type-") and not case.name.endswith("-struct")):
            continue  # run under limits above
        d = tmp_path / case.name
        d.mkdir()
        path = case.make(d, None)
        o = run_in_process(["report", "--json", str(path)])
        assert "internal error" not in o.err, (case.name, o.err)
        assert o.rc in (0, 2), (case.name, o.err)


# --- generated (hypothesis) --------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.text())
def test_printable_output_never_holds_an_unsafe_character(text):
    shown = printable(text)
    assert not has_unsafe(shown)
    assert "\n" not in shown and "\x1b" not in shown


_ODD = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
                 st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6),
                 st.lists(st.integers(min_value=-(2 ** 40), max_value=2 ** 40), max_size=4))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.tuples(_ODD, _ODD, _ODD, _ODD, _ODD), min_size=1, max_size=6))
def test_odd_event_values_drop_events_never_the_file(values, tmp_path_factory):
    """Any value in ts, dur, grid, block or registers: a load (bad events dropped with a warning)
    or a one-line TraceError, never another exception."""
    from collectors.readers.importers import convert

    evs = [_kernel_ev(1000, 10, 5)]
    for i, (ts, dur, grid, block, regs) in enumerate(values):
        ev = _kernel_ev(i + 1, 20 + i, 5)
        ev.update(ts=ts, dur=dur)
        ev["args"].update({"grid": grid, "block": block, "registers per thread": regs})
        evs.append(ev)
    path = tmp_path_factory.mktemp("odd") / "odd.json"
    path.write_text(json.dumps(_kineto_doc(evs), allow_nan=True))
    try:
        table, meta = convert(path)
    except TraceError as exc:
        assert "\n" not in str(exc)
        return
    assert table.num_rows >= 1  # the good kernel survives whatever its neighbours hold
