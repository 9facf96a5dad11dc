"""Issue 38, item 3: an nsys SQLite export bounds what it can make SQLite do. Generated columns,
views and virtual tables under nsys's names are refused; every query runs under a progress-handler
budget (ROOFTOP_MAX_SQL_WORK), so a small file cannot keep `report` busy."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time

import pytest

from bad_inputs.harness import ROOT


def _db(path, strings_sql: str, extra: str = ""):
    c = sqlite3.connect(path)
    c.execute(strings_sql)
    c.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT, streamId INT,"
              " correlationId INT, shortName INT, demangledName INT)")
    c.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,?,?,?,?,?)",
                  [(i * 10, i * 10 + 5, 0, 7, i, 1, 1) for i in range(100)])
    if extra:
        c.execute(extra)
    c.commit()
    c.close()
    return path


def _report(path, env=None):
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "rooftop", "report", str(path)], capture_output=True, text=True,
                       cwd=ROOT, timeout=60, env={**os.environ, **(env or {})})
    return p, time.perf_counter() - t


# A 0.3 MB export whose StringIds.value is computed, on every read, by an expression of its choosing
SLOW = ("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, raw TEXT, value TEXT GENERATED ALWAYS AS"
        " (replace(replace(replace(replace(raw, 'a', 'aaaa'), 'a', 'aaaa'), 'a', 'aaaa'), 'a', 'aaaa')) {})")


@pytest.mark.parametrize("how", ["VIRTUAL", "STORED"])
def test_a_generated_column_is_refused_at_once(tmp_path, how):
    p = _db(tmp_path / "g.sqlite", SLOW.format(how) if how == "VIRTUAL" else
            "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, raw TEXT, value TEXT GENERATED ALWAYS AS (raw || 'x') STORED)")
    out, elapsed = _report(p)
    assert out.returncode == 2 and elapsed < 30
    assert "generated column" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_a_view_under_an_nsys_name_is_refused(tmp_path):
    p = _db(tmp_path / "v.sqlite", "CREATE TABLE S (id INTEGER PRIMARY KEY, value TEXT)",
            "CREATE VIEW StringIds AS SELECT id, value FROM S")
    out, _ = _report(p)
    assert out.returncode == 2 and "is a view" in out.stderr, out.stderr


def test_another_tools_views_are_left_alone(tmp_path):
    p = _db(tmp_path / "o.sqlite", "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)",
            "CREATE VIEW EXTRAP_FORMAT AS SELECT 1")
    out, _ = _report(p)
    assert out.returncode == 0, out.stderr


def test_every_query_runs_under_the_work_budget(tmp_path, monkeypatch):
    from collectors.readers.nsys import guard_connection

    p = _db(tmp_path / "w.sqlite", "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    monkeypatch.setenv("ROOFTOP_MAX_SQL_WORK", "1")
    con = sqlite3.connect(p)
    guard_connection(con, p)
    t = time.perf_counter()
    with pytest.raises(sqlite3.OperationalError, match="interrupted"):
        con.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c").fetchone()
    assert time.perf_counter() - t < 5
    monkeypatch.delenv("ROOFTOP_MAX_SQL_WORK")
    con = sqlite3.connect(p)
    guard_connection(con, p)  # the default: an honest read is far below it
    assert con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0] == 100


def test_the_real_exports_stay_within_the_budget(fixtures_dir):
    for f in sorted(fixtures_dir.glob("traces/*.sqlite")):
        out, _ = _report(f)
        assert out.returncode == 0, (f.name, out.stderr)
