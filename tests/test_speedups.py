"""Every accelerator's off switch (rooftop/speedups.py, docs/speed.md) really turns it off: one test
per switch, each watching the accelerator's own work (a module not loaded, a call not made, a thread
not used), with the switch off and, where the machine has the accelerator, on."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from rooftop import heap, speedups
from rooftop.trace import paired

ROOT = Path(__file__).resolve().parents[1]
ALL = [f"ROOFTOP_{name}" for name in speedups.SWITCHES] + ["ROOFTOP_WORKERS", speedups.UMBRELLA]


@pytest.fixture
def clean_env(monkeypatch):
    """No switch set by whoever runs the suite (the CI leg with every speedup off sets the umbrella)."""
    for var in ALL:
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_the_umbrella_turns_off_every_switch_its_own_variable_wins(clean_env):
    assert all(speedups.on(name) for name in speedups.SWITCHES)
    clean_env.setenv(speedups.UMBRELLA, "off")
    assert not any(speedups.on(name) for name in speedups.SWITCHES)
    clean_env.setenv("ROOFTOP_ADBC", "1")
    assert speedups.on("ADBC") and not speedups.on("SUMMARY")
    clean_env.delenv(speedups.UMBRELLA)
    clean_env.setenv("ROOFTOP_SUMMARY", "0")
    assert not speedups.on("SUMMARY") and speedups.on("THREADS")


def test_every_switch_is_in_docs_speed_md():
    text = (ROOT / "docs" / "speed.md").read_text()
    missing = [v for v in ALL if f"`{v}" not in text]
    assert not missing, f"docs/speed.md does not name {missing}"


def _decoders(env: dict) -> list[str]:
    """(compiled decoder loaded?, msgspec's typed path available?) in a fresh process under `env`."""
    code = ("from collectors.readers import _kineto_events as ke; "
            "print(ke._kineto_fast is not None, ke._typed() is not None)")
    base = {k: v for k, v in os.environ.items() if k not in ALL}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**base, **env}, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    return p.stdout.split()


def test_compiled_decoder_and_msgspec_switches():
    built = importlib.util.find_spec("collectors.readers._kineto_fast") is not None
    typed = importlib.util.find_spec("msgspec") is not None
    assert _decoders({}) == [str(built), str(typed)]
    assert _decoders({"ROOFTOP_SPEEDUPS": "0"}) == ["False", "False"]
    assert _decoders({"ROOFTOP_COMPILED": "0"}) == ["False", str(typed)]
    assert _decoders({"ROOFTOP_MSGSPEC": "0"}) == [str(built), "False"]
    assert _decoders({"ROOFTOP_SPEEDUPS": "0", "ROOFTOP_COMPILED": "1"}) == [str(built), "False"]


def test_compiled_switch_turns_off_the_nesting_pass(clean_env):
    import importlib.util

    from collectors.readers import nesting

    built = importlib.util.find_spec("collectors.readers._nesting_fast") is not None
    assert (nesting._compiled() is not None) == built
    clean_env.setenv("ROOFTOP_COMPILED", "0")
    assert nesting._compiled() is None  # NumPy's jumps find the parents


def test_workers_switch(clean_env):
    from collectors.readers._kineto_parallel import workers_for

    big = 1 << 30
    clean_env.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert workers_for(big, False) == 4
    clean_env.setenv(speedups.UMBRELLA, "0")
    assert workers_for(big, False) == 1
    clean_env.setenv("ROOFTOP_WORKERS", "2")  # its own variable wins over the umbrella
    assert workers_for(big, False) == 2


def test_heap_tuning_switch(clean_env):
    calls = []

    class LibC:
        def mallopt(self, *args):
            calls.append(("mallopt", args))

        def malloc_trim(self, *args):
            calls.append(("malloc_trim", args))

    import ctypes
    clean_env.setattr(ctypes, "CDLL", lambda name: LibC())
    clean_env.setattr(heap, "_applied", False)
    clean_env.setenv("ROOFTOP_HEAP_TUNING", "0")
    heap.map_from(heap.IMPORT_MAP_FROM)
    heap.trim()
    assert calls == [] and not heap._applied
    clean_env.delenv("ROOFTOP_HEAP_TUNING")
    heap.map_from(heap.IMPORT_MAP_FROM)
    heap.trim()
    assert [c[0] for c in calls] == ["mallopt", "mallopt", "malloc_trim"]


def test_threads_switch(clean_env):
    from rooftop.present import report

    def where():
        return threading.current_thread() is threading.main_thread()

    builders = {f"c{i}": where for i in range(4)}
    assert not all(paired.built(builders).values())  # built on the pool's threads
    big = SimpleNamespace(timed=range(report.TWO_THREADS_MIN_ROWS))
    import pandas as pd
    assert report.two_threads(big) == (int(pd.__version__.split(".")[0]) >= 3)
    clean_env.setenv("ROOFTOP_THREADS", "0")
    assert paired.built(builders) == {k: True for k in builders}  # one after the other, here
    assert not report.two_threads(big)


def test_summary_switch(clean_env, tmp_path):
    from rooftop.present import summary
    from rooftop_cli import main

    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import synth_trace
    finally:
        sys.path.remove(str(ROOT / "bench"))
    path = summary.write_summarized(tmp_path / "s.parquet", synth_trace.decode_frame(2, layers=2), synth_trace.meta(2))
    assert summary.load_stored(path) is not None
    clean_env.setenv("ROOFTOP_SUMMARY", "0")
    assert summary.load_stored(path) is None

    import rooftop.analysis
    analysed = []
    real = rooftop.analysis.analyze
    clean_env.setattr(rooftop.analysis, "analyze", lambda *a, **k: analysed.append(1) or real(*a, **k))
    assert main(["report", str(path)]) == 0
    assert analysed  # the report came from the rows


def test_adbc_switch(clean_env, tmp_path):
    import sqlite3

    from collectors.readers import _nsys_columns

    path = tmp_path / "e.sqlite"
    sqlite3.connect(path).close()
    if importlib.util.find_spec("adbc_driver_sqlite") is not None:
        con = _nsys_columns.open_fast(path)
        assert con is not None
        con.close()
    clean_env.setenv("ROOFTOP_ADBC", "0")
    assert _nsys_columns.open_fast(path) is None  # the sqlite3 path reads every table


def test_plain_cells_switch(clean_env):
    import asyncio

    from textual.app import App
    from textual.geometry import Region
    from textual_fastdatatable import ArrowBackend, DataTable

    from tui.widgets.plain_cells import PlainCellTable

    def painted(env: str | None) -> tuple[int, list[str]]:
        if env is None:
            clean_env.delenv("ROOFTOP_PLAIN_CELLS", raising=False)
        else:
            clean_env.setenv("ROOFTOP_PLAIN_CELLS", env)
        calls = []  # body lines the library painted
        real = DataTable._render_line
        clean_env.setattr(DataTable, "_render_line",
                          lambda self, y, *a: (y > 0 and calls.append(y)) or real(self, y, *a))
        backend = ArrowBackend.from_pydict({"name": [f"kernel {i}" for i in range(50)], "n": list(range(50))})

        class T(App):
            def compose(self):
                yield PlainCellTable(backend=backend, cursor_type="row", render_markup=False,
                                     max_column_content_width=40)

        lines = []

        async def main():
            async with T().run_test(size=(60, 12)) as pilot:
                await pilot.pause()
                table = pilot.app.query_one(PlainCellTable)
                strips = table.render_lines(Region(0, 0, table.size.width, table.size.height))
                lines.extend(strip.text for strip in strips[1:4])

        asyncio.run(main())
        return len(calls), lines

    on_calls, on_lines = painted(None)
    off_calls, off_lines = painted("0")
    assert on_calls == 0 and off_calls > 0  # (on: every body line is plain, painted here)
    assert off_lines == on_lines and "kernel 0" in off_lines[0]


def test_sort_ahead_switch(clean_env):
    from tui.widgets.table import FrameTable

    asked = []
    table = SimpleNamespace(
        PREFETCH_ORDERS=True, is_mounted=True, source=range(10), DERIVE_IN_WORKER_FROM=1, cols=["c"],
        _state=lambda: ("sort", "pattern", "source", "search"), _next_sort=lambda: "next",
        _reversed_sort=lambda: "reversed", _orders={}, _view_key=lambda state: state,
        _prefetch_worker=asked.append)
    FrameTable._prefetch_orders(table)
    assert len(asked) == 1 and len(asked[0]) == 2
    clean_env.setenv("ROOFTOP_SORT_AHEAD", "0")
    FrameTable._prefetch_orders(table)
    assert len(asked) == 1  # nothing computed ahead: a sort key computes its own order


def test_gc_freeze_switch(clean_env, tmp_path):
    import asyncio
    import gc
    import shutil

    import tui.app

    sample = tmp_path / "t.parquet"
    shutil.copy(ROOT / "sample_traces" / "llama3-8b_h100-sxm_b1_fused.modeled.parquet", sample)
    frozen = []
    clean_env.setattr(gc, "freeze", lambda: frozen.append(1))
    clean_env.setattr(tui.app, "FREEZE_GC_FROM", 0)  # (a sample's few rows count as big)

    async def load():
        app = tui.app.RooftopApp([str(sample)])
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            await app.workers.wait_for_complete()
            await pilot.pause()

    asyncio.run(load())
    assert frozen == [1]
    clean_env.setenv("ROOFTOP_GC_FREEZE", "0")
    frozen.clear()
    asyncio.run(load())
    assert frozen == []
