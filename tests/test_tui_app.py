"""The app shell and the Overview/Steps screens, driven with Pilot on small traces built here."""
from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from textual.app import App

from tui.app import RooftopApp, RooftopCommands, run_app
from tui.screens.help import HelpScreen
from tui.screens.kernels import KernelsScreen
from tui.screens.overview import OverviewScreen
from tui.screens.steps import StepScreen, StepsScreen
from tui.widgets.breadcrumb import Breadcrumb

from tui_helpers import bad_file, second_trace, small_trace

ROOT = Path(__file__).resolve().parent.parent


def drive(paths, keys=(), size=(100, 40), check=None, setup=None, steps=None):
    """Open the app on `paths`, wait for loading, press `keys`, then run `check(app)` inside.

    `steps` = [(keys, check), ...] runs several checks in one session (each app start costs ~1 s).
    """
    steps = steps if steps is not None else [(keys, check)]

    async def main():
        app = RooftopApp([str(p) for p in paths])
        results = []
        async with app.run_test(size=size) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            if setup:
                setup(app)
            for step_keys, step_check in steps:
                for k in step_keys:
                    await pilot.press(k)
                    if len(k) > 1 or not k.isalnum():  # text typed into a box needs no settling
                        await pilot.pause()
                await app.workers.wait_for_complete()
                await pilot.pause()
                results.append(step_check(app) if step_check else app)
        return results
    results = asyncio.run(main())
    return results if len(steps) > 1 else results[0]


def text_of(widget) -> str:
    content = widget.render()
    return getattr(content, "plain", None) or str(content)


def crumbs(app) -> str:
    return app.screen.query_one(Breadcrumb).plain


def test_overview_shows_identity_phases_sources_findings(tmp_path):
    def check(app):
        s = app.screen
        assert isinstance(s, OverviewScreen)
        ident = text_of(s.query_one("#identity"))
        assert "tiny" in ident and "NVIDIA H100 80GB HBM3" in ident and "batch 1" in ident and "rooftop-test" in ident
        phases = s.query_one("#phases")
        table = phases.table
        cells = [str(c) for col in table.columns for c in col._cells]
        assert "prefill" in cells and "decode" in cells and "memory" in cells and "compute" in cells
        assert "1.7%" in cells  # decode MFU, computed by the analysis from the trace
        src = text_of(s.query_one("#sources"))
        assert src.startswith("bytes: model (no counters) · peaks: datasheet")
        assert "989 TFLOP/s bf16, 3.35 TB/s" in src
        findings = text_of(s.query_one("#findings"))
        assert "decode" in findings and len(findings.splitlines()) == len(app.analyses[0].findings)
        plot = s.query_one("#step-curve")
        assert list(plot.series["step"]) == [0, 1, 2, 3]  # the decode steps, in order
        assert not s.query("#modeled-badge")
        assert crumbs(app) == "tiny ▸ Overview"
    drive([small_trace(tmp_path)], check=check)


def test_modeled_trace_is_badged_on_every_screen(tmp_path):
    def check(app):
        assert text_of(app.screen.query_one("#modeled-badge")) == "MODELED (analytic, not measured)"
        assert "MODELED (analytic, not measured)" in app.screen.query_one(Breadcrumb).render().plain
    got = drive([small_trace(tmp_path, modeled=True)], steps=[
        ([], check), (["3"], lambda app: "MODELED" in app.screen.query_one(Breadcrumb).render().plain)])
    assert got[1]


def test_number_keys_switch_screens_and_compare_needs_two(tmp_path):
    p = small_trace(tmp_path)
    kind = lambda app: (type(app.screen).__name__, app.current_mode)  # noqa: E731

    def one(app):  # one trace: 6 explains instead of switching
        assert any("Compare needs two traces" in n.message for n in app._notifications)
        return kind(app)
    got = drive([p], steps=[(["2"], kind), (["3"], kind), (["1"], kind), (["4"], kind), (["5"], kind), (["6"], one)])
    assert got[:3] == [("StepsScreen", "steps"), ("KernelsScreen", "kernels"), ("OverviewScreen", "overview")]
    assert got[3] == ("RooflineScreen", "roofline")
    assert got[4] == ("StallsScreen", "stalls")
    assert got[5] == got[4]
    two = drive([p, second_trace(tmp_path)], ["6"], check=lambda app: (app.current_mode, len(app.analyses)))
    assert two == ("compare", 2)


def test_steps_table_drill_down_tree_and_back(tmp_path):
    def check(app):
        s = app.screen
        assert isinstance(s, StepScreen) and (s.phase, s.step) == ("decode", 0)
        tree = s.query_one("#range-tree")
        labels = []
        def walk(node):
            labels.append(node.label.plain)
            for c in node.children:
                walk(c)
        walk(tree.root)
        assert labels[0] == "decode step 0"
        assert any(l.startswith("attn") for l in labels) and any(l.startswith("layer=1") for l in labels)
        kernels = s.query_one("#step-kernels")
        # The cursor sits on the third node (down twice from the root): kernels under that range only.
        node = tree.cursor_node
        expect = app.analyses[0].kernels(phase="decode", step=0, path_prefix=node.data)
        assert len(kernels.view) == len(expect) > 0
        assert crumbs(app).startswith("tiny ▸ Steps ▸ decode step 0")

    def steps(app):
        table = app.screen.query_one("#steps-table")
        assert list(table.view["phase"]) == ["prefill"] + ["decode"] * 4
        assert list(table.view["step"]) == [0, 0, 1, 2, 3]
    kind = lambda app: type(app.screen)  # noqa: E731
    got = drive([small_trace(tmp_path)], steps=[
        (["2"], steps), (["down", "enter", "down", "down"], check), (["escape"], kind),
        (["enter"], kind), (["backspace"], kind), (["escape"], kind)])
    assert got[2:] == [StepsScreen, StepScreen, StepsScreen, StepsScreen]  # Esc on a top screen stays


def test_step_kernels_follow_the_selected_range(tmp_path):
    def check(app):
        s = app.screen
        tree = s.query_one("#range-tree")
        path = tree.cursor_node.data
        assert path is not None and path.endswith("attn")
        view = s.query_one("#step-kernels").view
        assert set(view["short_name"]) == {"flash_fwd_kernel<>", view["short_name"].iloc[0]}
        assert len(view) == 2  # the QKV GEMM and the flash kernel
        assert crumbs(app).endswith("▸ layer=0/attn")
    # root, decode, step=0, layer=0, attn
    drive([small_trace(tmp_path)], ["2", "down", "enter", "down", "down", "down", "down"], check=check)


def test_bad_file_alone_exits_2_with_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(RooftopApp, "run", lambda self, **kw: App.run(self, headless=True))
    code = run_app([str(bad_file(tmp_path))])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("rooftop: error: ") and "bad.parquet" in err[0]


def test_bad_file_beside_a_good_one_is_a_notification(tmp_path):
    def check(app):
        assert isinstance(app.screen, OverviewScreen) and len(app.analyses) == 1
        msgs = [n.message for n in app._notifications]
        assert any("bad.parquet" in m for m in msgs)
    drive([small_trace(tmp_path), bad_file(tmp_path)], check=check)


def test_help_lists_every_key_from_bindings_and_follows_remaps(tmp_path):
    def check(app):
        assert isinstance(app.screen, HelpScreen)
        from tui.screens.help import binding_rows
        rows = binding_rows(app, app.screen.under)
        described = {d: k for _, k, d in rows}
        for d in ("Filter", "Sort", "Reverse", "Next match", "Prev match", "Raw/grouped", "By category",
                  "Back", "Overview", "Steps", "Kernels", "Roofline", "Stalls", "Help", "Export CSV", "Quit"):
            assert d in described, d
        assert described["Sort"] == "o"  # remapped through the keymap
    drive([small_trace(tmp_path)], ["3", "question_mark"], check=check,
          setup=lambda app: app.set_keymap({"kernels.sort": "o"}))
    assert drive([small_trace(tmp_path)], ["question_mark", "escape"], check=lambda a: type(a.screen)) is OverviewScreen


def test_every_binding_has_an_id():
    from tui.screens.kernels import FilterInput
    for cls in (RooftopApp, KernelsScreen, StepsScreen, HelpScreen, FilterInput, OverviewScreen):
        for b in cls.BINDINGS:
            assert b.id, (cls.__name__, b.key)


def test_export_writes_the_current_table(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    def check(app):
        files = sorted(tmp_path.glob("rooftop-kernels-*.csv"))
        assert len(files) == 2  # two exports in the same second do not overwrite each other
        frame = pd.read_csv(files[0])
        groups = app.analyses[0].groups()
        assert len(frame) == len(groups) and "time µs" in frame.columns
        assert frame["time µs"].iloc[0] == pytest.approx(groups["time_ns"].max() / 1e3, abs=0.1)
        assert any("Wrote" in n.message for n in app._notifications)
    drive([small_trace(tmp_path / "t")], ["3", "e", "e"], check=check)


def test_palette_has_screens_and_actions(tmp_path):
    def check(app):
        names = [name for name, _, _ in RooftopCommands(app.screen)._commands()]
        assert "Go to Kernels (3)" in names and "Export table to CSV (e)" in names
        assert not any("Compare" in n for n in names)
        return type(app.screen)
    assert drive([small_trace(tmp_path)], ["ctrl+p", *"kernels", "enter"], check=check) is KernelsScreen


def test_opening_a_trace_never_imports_torch(tmp_path):
    p = small_trace(tmp_path, counters=True)
    code = f"""
import asyncio, sys
from tui.app import RooftopApp
async def main():
    app = RooftopApp([{str(p)!r}])
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete(); await pilot.pause()
        for k in "2345":
            await pilot.press(k); await pilot.pause()
        assert app.analyses, "trace did not load"
asyncio.run(main())
assert 'torch' not in sys.modules, 'torch was imported'
print('ok')
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"


def test_key_line_at_80_columns_keeps_what_matters(tmp_path):
    """Footer of Textual cut `e E…` at 80 columns: the key line keeps help and quit, and this screen's keys."""
    def line(app):
        bar = app.screen.query_one("#keybar")
        text = bar.render().plain
        assert len(text) <= 80 and text.rstrip().endswith("q Quit") and "? Help" in text
        return text
    got = drive([small_trace(tmp_path)], size=(80, 24), steps=[([], line), (["3"], line), (["enter"], line)])
    assert "1-5,7 screens" in got[0] and "e Export CSV" in got[0] and "Back" not in got[0]  # nothing to go back to
    assert got[1].startswith(" g Raw/grouped  c By category  p By phase  s Sort  / Filter")
    assert got[2].startswith(" esc ⌫ Back")  # a drill-down can go back


def test_mixed_phase_groups_read_in_words():
    from tui.widgets.phase import phase_label, phase_labels

    assert phase_label("prefill+", ["prefill", "decode"]) == "prefill (+decode)"
    assert phase_label("decode+", ["prefill", "decode"]) == "decode (+prefill)"
    assert phase_label("decode+", ["prefill", "decode", "warmup"]) == "decode (+other)"
    assert phase_label("decode") == "decode" and phase_label(None) is None
    out = phase_labels(pd.Series(["decode+", None, "prefill"], dtype=object))
    assert out.tolist()[0] == "decode (+prefill)" and out.isna().tolist() == [False, True, False]


def test_trace_without_peaks_opens_with_unknowns_and_the_reason(tmp_path):
    """A CPU capture has no roofs: bound and MBU are unknown (—), and the sources line says why."""
    from rooftop.trace import write_trace

    import tui_helpers as th
    meta = th._meta(modeled=False)
    meta["device"] = {"name": "cpu"}
    path = tmp_path / "cpu.parquet"
    write_trace(path, th._events(counters=False, weird_names=False), meta)

    def check(app):
        s = app.screen
        assert isinstance(s, OverviewScreen)
        rows = [[str(c) for c in col._cells] for col in s.query_one("#phases").table.columns]
        mbu, bound = rows[6], rows[7]
        assert mbu == ["—", "—"] and bound == ["—", "—"]
        assert "peaks: unknown (" in text_of(s.query_one("#sources"))
    drive([path], size=(80, 24), check=check)


def test_big_trace_overview_paints_in_stages(tmp_path, monkeypatch):
    """Above `WARM_ALL_BELOW` rows the loader computes only the identity: the Overview paints it with
    a placeholder, then its worker adds the phase table and the rest, as a small trace shows at once.

    The first stage is read when the worker is about to start (after the first paint, before any
    result can land), and the last once the worker has finished: states, not delays, so a slow
    machine cannot mix the stages up."""
    import tui.loader

    monkeypatch.setattr(tui.loader, "WARM_ALL_BELOW", 0)
    seen = {}
    start_rest = OverviewScreen._start_rest

    def record_first_stage(screen):
        seen["first"] = [w.id for w in screen.query("#overview-body > *")]
        seen["pending"] = text_of(screen.query_one("#overview-pending"))
        start_rest(screen)

    monkeypatch.setattr(OverviewScreen, "_start_rest", record_first_stage)

    async def main():
        app = RooftopApp([str(small_trace(tmp_path))])
        async with app.run_test(size=(100, 40)) as pilot:
            while not isinstance(app.screen, OverviewScreen):
                await pilot.pause(0.01)
            s = app.screen
            while "first" not in seen or not s.query("#findings"):  # the worker starts after the first paint
                await app.workers.wait_for_complete()
                await pilot.pause(0.01)
            await app.workers.wait_for_complete()  # it prefetches the Kernels groups after posting the rest
            await pilot.pause()
            seen["last"] = [w.id for w in s.query("#overview-body > *")]
            seen["findings"] = text_of(s.query_one("#findings"))
            seen["phases"] = [str(c) for col in s.query_one("#phases").table.columns for c in col._cells]
            seen["cached"] = ("short_name", None) in app.analyses[0]._groups  # prefetched for Kernels
    asyncio.run(asyncio.wait_for(main(), 120))
    assert seen["first"] == ["identity", "warnings-count", "overview-pending"] and seen["pending"].startswith("computing")
    assert "overview-pending" not in seen["last"]
    assert [i for i in seen["last"] if i] == ["identity", "warnings-count", "phases", "sources", "findings", "gap", "step-curve"]
    assert "decode" in seen["findings"] and "1.7%" in seen["phases"] and seen["cached"]


def test_the_key_line_names_every_screen_key():
    """The number keys collapse into runs, gaps kept: the Timeline's 7 is on the key line with one
    trace (no Compare), `1-7` with two (issue 40: it was found only through `?`)."""
    from tui.widgets.keybar import _digit_run
    assert _digit_run(list("123457")) == "1-5,7"
    assert _digit_run(list("1234567")) == "1-7"
    assert _digit_run(list("1235")) == "1-3,5" and _digit_run(list("12")) == "1,2"
    assert _digit_run(["1", "x"]) is None
