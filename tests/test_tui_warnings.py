"""Warnings in sight (count on the Overview, the list on `w`) and an import's progress, cancelled by Esc."""
from __future__ import annotations

import asyncio
import threading
import time

from rooftop.trace import write_trace
import collectors.open as opening
from tui.app import LoadingScreen, RooftopApp, progress_line
from tui.screens.warnings import WarningsScreen

from test_tui_app import drive, text_of
from tui_helpers import _events, _meta


def warned_trace(tmp_path):
    """`small_trace` whose importer dropped rows, on a GPU rooftop has no peaks for: two warnings."""
    meta = _meta(modeled=False)
    meta["warnings"] = ["12 events dropped: no timestamp"]
    meta["device"] = {"name": "Mystery GPU 9000"}
    path = tmp_path / "warned.parquet"
    write_trace(path, _events(counters=False, weird_names=False), meta)
    return path


def test_overview_counts_warnings_and_w_lists_them(tmp_path):
    def overview(app):
        # the count, then what the file lost said before any number (issue 40)
        assert text_of(app.screen.query_one("#warnings-count")) == "▲ 2 warnings (w: list)\n  the file: 12 events dropped: no timestamp"
        assert app.screen.query_one("#warnings-count").has_class("has-warnings")

    def listed(app):
        s = app.screen
        assert isinstance(s, WarningsScreen) and [w for w, _ in s.items] == ["import", "device"]
        text = text_of(s.query_one("#warnings-list"))
        assert "! import   12 events dropped: no timestamp" in text
        assert "no peaks:" in text and "MBU, MFU and the roofline are unknown" in text

    def back(app):
        assert not isinstance(app.screen, WarningsScreen)

    drive([warned_trace(tmp_path)], steps=[([], overview), (["w"], listed), (["escape"], back)])


def test_no_warnings_says_so(tmp_path):
    from tui_helpers import small_trace

    def check(app):
        assert text_of(app.screen.query_one("#warnings-count")) == "no warnings (w: list)"

    drive([small_trace(tmp_path)], [], check=check)


def test_progress_line():
    assert (progress_line("/x/t.json.gz", 412_000_000, 1_200_000_000, 3.14)
            == "importing t.json.gz: 412 MB of 1.2 GB (34%) · 3.1 s · Esc cancels")
    # nsys reads SQLite tables, not a byte stream: its progress is in stages, and says so
    assert (progress_line("/x/run.sqlite", 1, 4, 0.7, "stages")
            == "importing run.sqlite: stage 1 of 4 (25%) · 0.7 s · Esc cancels")
    # once the file is read, the stage the import is in
    assert (progress_line("/x/t.json", 9, 9, 7.25, stage="joining kernels to launches and ranges")
            == "importing t.json: joining kernels to launches and ranges · 7.2 s · Esc cancels")


def test_import_stage_is_shown_its_clock_runs_and_esc_stops_it_at_the_next(tmp_path, monkeypatch):
    """After the read, the loading screen names the stage (the join, deriving names: seconds each
    at 1M kernels), its elapsed time goes on between reports, and Esc stops the import at the next
    stage, not at its end."""
    pressed, reached = threading.Event(), []

    def staged_import(path, progress=None, **how):
        progress(1_000_000_000, 1_000_000_000)
        progress.stage("joining kernels to launches and ranges")
        pressed.wait(10)  # a long stage, until the test has pressed Esc
        reached.append("deriving")
        progress.stage("deriving names, steps and layers")  # where the cancel is heard
        reached.append("after")
        raise AssertionError("the import was not cancelled")

    monkeypatch.setattr(opening, "open_trace", staged_import)

    async def main():
        app = RooftopApp([str(tmp_path / "big.pt.trace.json")])
        async with app.run_test(size=(80, 24)) as pilot:
            line = ""
            for _ in range(500):
                await pilot.pause(0.01)
                if isinstance(app.screen, LoadingScreen):
                    line = text_of(app.screen.query_one("#loading-progress"))
                    if "joining" in line:
                        break
            assert line.startswith("importing big.pt.trace.json: joining kernels to launches and ranges · ")

            def clock(text):
                return float(text.split(" · ")[1].removesuffix(" s"))
            later = line
            for _ in range(40):  # the clock goes on without a report (once a second)
                await pilot.pause(0.1)
                later = text_of(app.screen.query_one("#loading-progress"))
                if clock(later) >= clock(line) + 0.5:
                    break
            assert "joining" in later and clock(later) >= clock(line) + 0.5
            await pilot.press("escape")
            pressed.set()
            for _ in range(300):
                await pilot.pause(0.01)
                if app.return_value is not None:
                    break
            return app, app.return_value

    app, code = asyncio.run(main())
    assert code == 1 and app.errors == [f"{tmp_path / 'big.pt.trace.json'}: import cancelled"]
    assert reached == ["deriving"]


def test_import_shows_progress_and_esc_cancels(tmp_path, monkeypatch):
    calls = []

    def slow_import(path, progress=None, **how):  # stands in for a Kineto import of 1 GB, 1 MB per 10 ms
        for i in range(1, 1001):
            calls.append(i)
            progress(i * 1_000_000, 1_000_000_000)
            time.sleep(0.01)
        raise AssertionError("the import was not cancelled")

    monkeypatch.setattr(opening, "open_trace", slow_import)

    async def main():
        app = RooftopApp([str(tmp_path / "big.pt.trace.json")])
        async with app.run_test(size=(80, 24)) as pilot:
            for _ in range(500):
                await pilot.pause(0.01)
                if isinstance(app.screen, LoadingScreen) and "importing" in text_of(app.screen.query_one("#loading-progress")):
                    break
            line = text_of(app.screen.query_one("#loading-progress"))
            assert line.startswith("importing big.pt.trace.json: ") and "MB of 1 GB (" in line and "Esc cancels" in line
            await pilot.press("escape")
            for _ in range(200):
                await pilot.pause(0.01)
                if app.return_value is not None:
                    break
            return app, app.return_value  # what `run_app` returns as the exit status

    app, code = asyncio.run(main())
    assert code == 1 and app.errors == [f"{tmp_path / 'big.pt.trace.json'}: import cancelled"]
    assert len(calls) < 1000  # stopped at a chunk boundary, long before the end
