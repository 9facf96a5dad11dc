"""Staged opening of a big rooftop trace: identity from the Parquet footer first, rows and analysis after.

The threshold (`tui.loader.PREVIEW_FROM`, 50k rows) is lowered to 0 here so the small test traces
take the big-trace path; the load is held on an Event so the in-between screen can be inspected.
"""
from __future__ import annotations

import asyncio
import threading

import pytest
from textual.worker import WorkerCancelled

import tui.loader as loader
from rooftop.analysis import analyze
from rooftop.trace import load_trace, write_trace
from tui.app import RooftopApp
from tui.screens.kernels import KernelsScreen
from tui.screens.overview import OverviewScreen
from tui.widgets.breadcrumb import Breadcrumb

from tui_helpers import _events, _meta, bad_file, multi_rank_run, small_trace

SMALL_ROWS = 85  # events in `small_trace`: 80 kernels + 5 step ranges (Parquet footer's num_rows)
IDENTITY_KEYS = ("label", "model", "workload", "device", "source", "modeled", "incomplete")


def text_of(widget) -> str:
    content = widget.render()
    return getattr(content, "plain", None) or str(content)


async def until(pilot, cond, limit_s: float = 10.0) -> None:
    for _ in range(int(limit_s / 0.01)):
        if cond():
            return
        await pilot.pause(0.01)
    raise AssertionError("condition never held")


@pytest.fixture
def big(monkeypatch):
    """Every rooftop Parquet trace previews; `release.set()` lets the held load go on."""
    monkeypatch.setattr(loader, "PREVIEW_FROM", 0)
    release = threading.Event()
    real = loader.open_analysis

    def held(path, *args, **kwargs):
        assert release.wait(10), "the test never released the load"
        return real(path, *args, **kwargs)
    monkeypatch.setattr(loader, "open_analysis", held)
    return release


def test_identity_paints_before_the_rows_then_the_rest_fills_in(tmp_path, big):
    path = small_trace(tmp_path)

    async def main():
        app = RooftopApp([str(path)])
        async with app.run_test(size=(100, 40)) as pilot:
            await until(pilot, lambda: isinstance(app.screen, OverviewScreen))
            s = app.screen
            await pilot.pause()
            before = {
                "identity": text_of(s.query_one("#identity")),
                "pending": text_of(s.query_one("#overview-pending")),
                "numbers": [w.id for w in s.query("#phases, #sources, #findings, #gap, #step-curve")],
                "crumbs": s.query_one(Breadcrumb).plain,
                "export": s.export_frame(),
            }
            await pilot.press("3")  # asked for while loading: opens once the rows are in
            before["mode"] = app.current_mode
            before["notes"] = [n.message for n in app._notifications]
            big.set()
            await until(pilot, lambda: isinstance(app.screen, KernelsScreen))
            await pilot.press("1")
            await until(pilot, lambda: bool(s.query("#findings")) and not s.query("#overview-pending"))
            after = {"identity": text_of(s.query_one("#identity")), "screen": s is app.screen,
                     "phases": [str(c) for col in s.query_one("#phases").table.columns for c in col._cells],
                     "expected_identity": OverviewScreen._identity_text(app.analyses[0].identity).plain}
        return before, after

    before, after = asyncio.run(main())
    assert "tiny" in before["identity"] and "NVIDIA H100 80GB HBM3" in before["identity"]
    assert "batch 1" in before["identity"] and "rooftop-test" in before["identity"]
    assert before["pending"] == f"loading {SMALL_ROWS} events …"
    assert before["numbers"] == []  # nothing not yet computed is on screen
    assert before["crumbs"] == "tiny ▸ Overview" and before["export"] is None
    assert before["mode"] == "overview" and any("Kernels opens when" in n for n in before["notes"])
    assert after["screen"] and after["identity"] == before["identity"] == after["expected_identity"]
    assert "prefill" in after["phases"] and "decode" in after["phases"] and "1.7%" in after["phases"]


def test_corrupt_rows_after_a_good_footer_exit_2_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(loader, "PREVIEW_FROM", 0)
    path = small_trace(tmp_path)
    data = bytearray(path.read_bytes())
    data[4:2000] = b"\xff" * 1996  # page headers gone, footer intact
    path.write_bytes(bytes(data))
    assert loader.preview(str(path)) is not None  # the footer still reads: the Overview is shown first

    async def main():
        app = RooftopApp([str(path)])
        async with app.run_test(size=(100, 40)) as pilot:
            try:
                await app.workers.wait_for_complete()
            except WorkerCancelled:
                pass
            await pilot.pause()
            return app.errors, [n.message for n in app._notifications], app.return_value, app._overview

    errors, notes, code, overview = asyncio.run(main())
    assert overview is not None and code == 2
    assert len(errors) == 1 and path.name in errors[0] and "corrupt Parquet" in errors[0]
    assert "\n" not in errors[0] and notes == errors


def test_preview_reads_only_big_rooftop_parquet(tmp_path, monkeypatch):
    small = small_trace(tmp_path)
    assert loader.preview(str(small)) is None  # below the threshold: opened whole, as before
    monkeypatch.setattr(loader, "PREVIEW_FROM", 0)
    assert loader.preview(str(bad_file(tmp_path))) is None  # the full load reports it
    assert loader.preview(str(tmp_path / "missing.parquet")) is None
    (tmp_path / "run.json").write_text("{}")
    assert loader.preview(str(tmp_path / "run.json")) is None  # other formats are imported whole
    p = loader.preview(str(small))
    assert p.rows == SMALL_ROWS and not p.shown.is_set()
    run = multi_rank_run(tmp_path)
    assert loader.preview(str(run)).rows == 2 * SMALL_ROWS  # every rank's file counted


def test_preview_identity_is_the_loaded_identity_secrets_out(tmp_path, monkeypatch):
    monkeypatch.setattr(loader, "PREVIEW_FROM", 0)
    token = "hf_" + "a1B2" * 6
    meta = _meta(modeled=True, label=f"tiny-{token}")
    meta["source"]["tool"] = f"tool --token {token}"
    path = tmp_path / "secret.parquet"
    write_trace(path, _events(counters=False, weird_names=False), meta)
    p = loader.preview(str(path))
    full = analyze(load_trace(path)).identity
    assert {k: p.identity[k] for k in IDENTITY_KEYS} == {k: full[k] for k in IDENTITY_KEYS}
    assert token not in repr(p.identity) and p.identity["modeled"] is True and p.trace.modeled
    assert p.identity["counters"] is None  # not known before the rows are read
