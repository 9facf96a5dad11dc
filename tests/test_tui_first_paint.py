"""The Overview's first paint from a trace's stored summary: the same screen as when its numbers are
computed, and painted before pandas or pyarrow (or numpy) is imported.

A trace of any size with a current stored summary paints it before its rows are read. Without one,
the threshold (`tui.loader.PREVIEW_FROM`, 50k rows) is lowered to 0 where a test needs the small
test traces to take the big-trace path (identity first, numbers computed behind it).
"""
from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import tui.loader as loader
from rooftop.present import summary
from tui.app import RooftopApp
from tui.screens.overview import OverviewScreen

from rooftop.trace import write_trace
from tui_helpers import _events, _meta, calibrated_trace, comm_trace, small_trace

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_traces" / "llama3-8b_h100-sxm_b1_fused.modeled.parquet"
HEAVY = ("pandas", "pyarrow", "numpy")
# Every widget of the Overview that holds a number, a badge or a line about the trace (the step
# curve is left out: from a summary it is parsed after the first paint, and plotted the same way).
SHOWN = ("breadcrumb", "modeled-badge", "identity", "warnings-count", "phases", "model-level", "ceilings",
         "sources", "findings", "gap", "comm")


@pytest.fixture(autouse=True)
def summary_on(monkeypatch):
    """On even in the run with every speedup off (.ci/run): this file is about
    the first paint from a stored summary."""
    monkeypatch.setenv("ROOFTOP_SUMMARY", "1")


def _painted(screen: OverviewScreen) -> dict[str, list[str]]:
    """Each widget's lines as painted on screen (the text of its strips)."""
    out = {}
    for wid in SHOWN:
        for w in screen.query(f"#{wid}"):
            out[wid] = [strip.text.rstrip() for strip in w.render_lines(w.region.reset_offset)]
    return out


async def _until(pilot, cond, limit_s: float = 20.0) -> None:
    for _ in range(int(limit_s / 0.01)):
        if cond():
            return
        await pilot.pause(0.01)
    raise AssertionError("condition never held")


def _overview_text(path: Path, hold_rows: bool) -> tuple[dict, bool]:
    """The Overview of `path` as painted, and whether it came from the stored summary. `hold_rows`:
    the rows never load (the screen must be complete from the summary alone)."""
    release = threading.Event()
    real = loader.open_analysis

    def held(*args, **kwargs):
        assert release.wait(20), "the test never released the load"
        return real(*args, **kwargs)

    async def main():
        loader.open_analysis = held if hold_rows else real
        app = RooftopApp([str(path)])
        try:
            async with app.run_test(size=(130, 60)) as pilot:
                await _until(pilot, lambda: isinstance(app.screen, OverviewScreen) and app.screen.query("#findings")
                             and (hold_rows or not app.screen.query("#overview-pending")))
                await pilot.pause()
                s = app.screen
                out = _painted(s), s.stored is not None and not app.analyses
                release.set()
                return out
        finally:
            loader.open_analysis = real
            release.set()

    return asyncio.run(main())


def _cases(tmp_path: Path) -> list[tuple[Path, bool]]:
    """(trace written without a summary, whether it is modeled): plain; counters, modeled and names
    that need escaping; calibrated (both ceilings); with the file's own warnings; with communication;
    a committed sample (a whole Llama decode)."""
    sample = tmp_path / SAMPLE.name
    shutil.copy(SAMPLE, sample)
    warned = write_trace(tmp_path / "warned.parquet", _events(counters=False, weird_names=False),
                         {**_meta(modeled=False), "warnings": ["the profiler dropped 3 events", "clock skew [b]x[/b]"]})
    return [(small_trace(tmp_path, name="plain.parquet"), False),
            (small_trace(tmp_path, counters=True, modeled=True, weird_names=True, name="odd.parquet"), True),
            (calibrated_trace(tmp_path), False), (warned, False), (comm_trace(tmp_path), False), (sample, True)]


@pytest.fixture
def preview_all(monkeypatch):
    monkeypatch.setattr(loader, "PREVIEW_FROM", 0)


def test_the_overview_from_the_summary_is_the_computed_one(tmp_path, preview_all):
    for path, modeled in _cases(tmp_path):
        assert summary.load_stored(path) is None  # written without a summary: computed
        computed, from_summary = _overview_text(path, hold_rows=False)
        assert not from_summary
        summary.refresh(path)
        stored, from_summary = _overview_text(path, hold_rows=True)
        assert from_summary, path
        assert stored == computed, path
        # not vacuous: the numbers, the badge and the warnings line are there
        assert any(ch.isdigit() for line in stored["phases"][1:] for ch in line), path
        assert stored["warnings-count"][0].strip().startswith(("▲", "no warnings")), path
        assert ("modeled-badge" in stored) == modeled and ("MODELED" in stored["breadcrumb"][0]) == modeled, path
        assert ("ceilings" in stored) == (path.name == "calibrated.parquet"), path
        if path.name == "warned.parquet":
            assert stored["warnings-count"][0].strip().startswith("▲ 2 warnings"), stored["warnings-count"]
        assert ("comm" in stored) == (path.name == "comm.parquet"), path


CHILD = r"""
import asyncio, json, re, sys, time
t0 = time.perf_counter()
sys.path.insert(0, {tests!r})
import tui.app
import tui.loader as loader
from tui.screens.overview import OverviewScreen

HEAVY = {heavy!r}
at_import = sorted(m for m in HEAVY if m in sys.modules)


def number_shown(app):
    s = app.screen
    if not isinstance(s, OverviewScreen) or not s.query("#phases"):
        return False
    t = s.query_one("#phases")
    return bool(t.region.area) and any(re.search(r"\d", x.text) for x in t.render_lines(t.region.reset_offset))


async def main():
    app = tui.app.RooftopApp([{path!r}])
    seen = {{}}
    display = app._display

    screens = []

    def timed(screen, renderable):
        out = display(screen, renderable)
        if not seen and renderable is not None:
            screens.append(type(screen).__name__)
        if not seen and renderable is not None and number_shown(app):
            seen["screens"] = screens
            seen["heavy"] = sorted(m for m in HEAVY if m in sys.modules)
            seen["stored"] = app.screen.stored is not None
            seen["torch"] = "torch" in sys.modules
        return out

    app._display = timed
    async with app.run_test(size=(100, 40)) as pilot:
        while not seen:
            await pilot.pause(0.01)
        while not app.analyses:  # then the rows load, with pandas, behind the painted Overview
            await pilot.pause(0.01)
        seen["after_load"] = sorted(m for m in HEAVY if m in sys.modules)
        seen["torch"] = seen["torch"] or "torch" in sys.modules
    print(json.dumps({{"at_import": at_import, **seen}}))


asyncio.run(main())
"""


def test_the_first_number_from_a_summary_imports_no_pandas(tmp_path):
    path = small_trace(tmp_path)
    summary.refresh(path)
    code = CHILD.format(tests=str(ROOT / "tests"), heavy=HEAVY, path=str(path))
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["at_import"] == []  # importing the app imports none of them
    assert got["stored"] and got["heavy"] == []  # the phase table's first number: still none
    assert got["screens"] == ["OverviewScreen"]  # the first frame (no loading screen painted before it)
    assert got["after_load"] == ["numpy", "pandas", "pyarrow"]  # the load imports them after (not vacuous)
    assert not got["torch"]


def test_a_report_from_a_summary_imports_no_pandas(tmp_path):
    path = small_trace(tmp_path)
    summary.refresh(path)
    code = (f"from rooftop_cli import main; main(['report', {str(path)!r}]); main(['report', '--json', {str(path)!r}])"
            "\nimport sys; print(' '.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    mods = set(out.stdout.split())
    assert "rooftop.present.summary" in mods and "rooftop.present.render" in mods  # served from the summary
    assert not {"pandas", "pyarrow", "torch", "textual"} & mods
