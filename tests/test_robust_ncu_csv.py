"""ncu CSV is streamed (issue 13, bounded work): the line, skipped-lines and row budgets stop a file
of junk early, in bounded memory, with one line naming the budget; a genuine export reads the same
whatever its line endings, encoding or noise between the rows."""
from __future__ import annotations

import csv
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors.readers.ncu import NcuError
from collectors.readers.ncu_csv import LINE_VALUES, read_ncu_csv
from rooftop import limits

from bad_inputs.harness import check, run_in_process, run_limited

HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Section Name",'
        '"Metric Name","Metric Unit","Metric Value"\n')


def _rec(i: int, name: str = "k", metric: str = "gpu__time_duration.sum", unit: str = "usecond",
         value: str = "1.5") -> str:
    return f'"{i}","1","app","host","{name}","1","7","S","{metric}","{unit}","{value}"\n'


GOOD = HEAD + _rec(0)


def _budget_error(o, path, budget: str) -> None:
    check(o, path, "error")
    assert budget in o.err, o.err


# --- junk stops early, in bounded memory ------------------------------------------------------------

def test_a_2gb_file_of_junk_fails_fast_in_bounded_memory(tmp_path):
    """A header, a row, then 2 GB of NUL bytes (a sparse file: no disk used): the first line past
    the line budget ends the read. Reading the whole file would need 2 GB (the old reader did)."""
    path = tmp_path / "junk.csv"
    with open(path, "wb") as fh:
        fh.write((GOOD + "x\n" * 4096).encode())  # past the 4 KiB binary sniff
        fh.truncate(2 << 30)
    o = run_limited(["report", str(path)], tmp_path, timeout=60, mem_gb=3.0)
    _budget_error(o, path, "ROOFTOP_MAX_TEXT")
    assert "line 4,099" in o.err
    assert o.seconds < 30, o.seconds
    assert o.peak_mb is not None and o.peak_mb < 600, f"peak {o.peak_mb:.0f} MB for a 2 GB file"


@pytest.mark.parametrize("shape", ["endless-line", "junk-lines", "long-preamble", "prof-lines"])
def test_junk_of_every_shape_stops_at_a_budget(shape, tmp_path):
    path = tmp_path / f"{shape}.csv"
    if shape == "endless-line":  # 24 MB without a newline: past the line budget at 1 MiB
        data, budget = GOOD + "x" * (24 << 20), "ROOFTOP_MAX_TEXT"
    elif shape == "junk-lines":  # 2.5 M lines that are no CSV record, after a valid start
        data, budget = GOOD + "junk line\n" * 2_500_000, "ROOFTOP_MAX_SKIPPED_LINES"
    elif shape == "long-preamble":  # no header ever comes
        data, budget = "==PROF== Connected to process 1\n" + "app output\n" * 2_500_000, "ROOFTOP_MAX_SKIPPED_LINES"
    else:  # `==` lines are skipped cheaply, but they are counted too
        data, budget = GOOD + "==PROF== x\n" * 2_500_000, "ROOFTOP_MAX_SKIPPED_LINES"
    path.write_text(data)
    o = run_limited(["report", str(path)], tmp_path, timeout=60)
    _budget_error(o, path, budget)
    assert o.seconds < 30, o.seconds
    assert o.peak_mb is not None and o.peak_mb < 600, o.peak_mb


def test_the_row_budget_stops_reading_early(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text(HEAD + "".join(_rec(i) for i in range(200_000)))
    o = run_limited(["report", str(path)], tmp_path, env={"ROOFTOP_MAX_ROWS": "1000"}, timeout=60)
    _budget_error(o, path, "ROOFTOP_MAX_ROWS=1,000")
    assert "more than 1,000 CSV records" in o.err
    assert o.seconds < 20, o.seconds  # all 200,000 kernels take about a minute


def test_unreadable_lines_under_the_budget_are_a_warning(tmp_path, monkeypatch):
    path = tmp_path / "some-junk.csv"
    path.write_text(HEAD + _rec(0) + "junk\nmore junk\n" + _rec(1, "k2") + "==PROF== done\n")
    monkeypatch.setenv(limits.MAX_SKIPPED_LINES_ENV, "3")
    frame, meta = read_ncu_csv(path)
    assert list(frame["name"]) == ["k", "k2"]
    assert any("2 unreadable CSV line(s) skipped, e.g. 'junk'" in w for w in meta["warnings"]), meta["warnings"]
    monkeypatch.setenv(limits.MAX_SKIPPED_LINES_ENV, "2")  # 2 junk + 1 `==` line: one too many
    with pytest.raises(NcuError, match="3 lines that are not ncu CSV rows exceeds the budget ROOFTOP_MAX_SKIPPED_LINES=2"):
        read_ncu_csv(path)


def test_a_long_name_within_the_line_budget_loads_and_is_cut_by_the_text_budget(tmp_path, monkeypatch):
    monkeypatch.setenv(limits.MAX_TEXT_ENV, "1000")
    path = tmp_path / "long.csv"
    path.write_text(HEAD + _rec(0, "n" * (LINE_VALUES * 1000 - 200)))
    o = run_in_process(["report", "--json", str(path)])
    assert o.rc == 0, o.err
    assert "1 text value(s) longer than 1,000 characters cut (budget ROOFTOP_MAX_TEXT)" in json.dumps(json.loads(o.out))
    path.write_text(HEAD + _rec(0, "n" * (LINE_VALUES * 1000 + 1)))
    _budget_error(run_in_process(["report", str(path)]), path, "ROOFTOP_MAX_TEXT=1,000")


def test_an_unclosed_quote_cannot_swallow_the_file(tmp_path, monkeypatch):
    """A quote never closed makes the rest of the file one field: it stops at the line budget."""
    monkeypatch.setenv(limits.MAX_TEXT_ENV, "1000")
    path = tmp_path / "quote.csv"
    path.write_text(GOOD + '"1","1","app","host","never closed\n' + "filler line\n" * 5000)
    try:
        frame, meta = read_ncu_csv(path)
    except NcuError as exc:
        assert "\n" not in str(exc)
    else:
        assert list(frame["name"]) == ["k"] and any("unreadable" in w for w in meta["warnings"])
    assert csv.field_size_limit() != LINE_VALUES * 1000  # the process-wide csv limit is restored


# --- a genuine export reads the same however it is laid out ----------------------------------------

_NAME = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters='"'),
                min_size=1, max_size=20)
_METRIC = st.sampled_from([("gpu__time_duration.sum", "usecond"), ("dram__bytes_read.sum", "Mbyte"),
                           ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%")])
_VALUE = st.sampled_from(["1.5", "2", "1,073,741,824", "n/a", "0.25"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.integers(0, 5), _NAME, _METRIC, _VALUE), min_size=1, max_size=12),
       newline=st.sampled_from(["\n", "\r\n", "\r"]), noise=st.lists(st.sampled_from(["", "==PROF== x", "==WARNING== y"]),
                                                                     max_size=12),
       encoding=st.sampled_from(["utf-8", "utf-8-sig", "utf-16"]), data=st.data())
def test_layout_does_not_change_what_is_read(rows, newline, noise, encoding, data, tmp_path_factory):
    lines = [_rec(i, name, metric, unit, value).rstrip("\n") for i, name, (metric, unit), value in rows]
    plain = tmp_path_factory.mktemp("plain") / "m.csv"
    plain.write_text(HEAD + "\n".join(lines) + "\n", encoding="utf-8")
    noisy_lines = [HEAD.rstrip("\n")]
    for line in lines:
        if noise and data.draw(st.booleans()):
            noisy_lines.append(noise.pop())
        noisy_lines.append(line)
    noisy = tmp_path_factory.mktemp("noisy") / "m.csv"  # the same name: the metadata holds it
    noisy.write_bytes(newline.join(["==PROF== Connected"] + noisy_lines + noise).encode(encoding))
    want, want_meta = read_ncu_csv(plain)
    got, got_meta = read_ncu_csv(noisy)
    assert got.to_json() == want.to_json()
    assert got_meta == want_meta
