"""Issue 13 in the terminal UI: trace text and user-typed filter text are shown, never interpreted
(no markup, no `@click` actions, no bidi or invisible characters raw); exports are spreadsheet-safe."""
from __future__ import annotations

import asyncio
import csv

from rooftop.present.text import has_unsafe

from bad_inputs.corpus import MARKUP, robust_cases
from bad_inputs.harness import control_chars


def _screen_text(app) -> str:
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip) for strip in strips)


def test_hostile_text_is_shown_not_run(tmp_path, monkeypatch):
    from tui.app import RooftopApp

    case = next(c for c in robust_cases() if c.name == "r13-interpreted")
    path = case.make(tmp_path, None)
    monkeypatch.chdir(tmp_path)  # exports and any screenshot an action would write land here

    async def main():
        app = RooftopApp([str(path)])
        texts = []
        async with app.run_test(size=(160, 50)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            texts.append(_screen_text(app))
            for key in ("2", "4", "5", "3"):
                await pilot.press(key)
                await app.workers.wait_for_complete()
                await pilot.pause()
                texts.append(_screen_text(app))
            await pilot.press("e")  # the kernel table, names and all, to CSV
            await pilot.pause()
            # a filter typed by the user is text too (markup in it must not restyle the status line)
            await pilot.press("slash")
            await pilot.pause()
            for ch in "[b]x":
                await pilot.press(ch)
            await pilot.press("enter")
            await app.workers.wait_for_complete()
            await pilot.pause()
            texts.append(_screen_text(app))
            for x, y in ((5, 3), (20, 4), (40, 5), (60, 6)):  # clicks where the identity lines are drawn
                await pilot.click(offset=(x, y))
            await pilot.pause()
            notes = [n.message for n in app._notifications]
            return texts, notes, app.return_value

    texts, notes, code = asyncio.run(main())
    everything = "\n".join(texts + notes)
    assert code is None
    assert not control_chars(everything)
    raw = [line for line in everything.splitlines() if has_unsafe(line)]
    assert not raw, f"a bidi or zero-width character reached the screen raw: {raw[:3]!r}"
    assert "[@click=app.screenshot" in texts[0] or "[@click=app.screenshot" in everything, "markup was parsed"
    assert "filter: /[b]x/" in texts[-1], "the typed filter was not shown as typed"
    assert not list(tmp_path.glob("*.svg")), "a click ran an action named by the trace"
    exported = list(tmp_path.glob("rooftop-*.csv"))
    assert len(exported) == 1, notes
    with open(exported[0], newline="", encoding="utf-8") as fh:
        cells = [c for row in csv.reader(fh) for c in row]
    assert not any(c[:1] in ("=", "+", "-", "@", "\t", "\r") for c in cells if not _number(c)), cells
    assert not any(has_unsafe(c) for c in cells)
    assert any(c.startswith("'=HYPERLINK") for c in cells), cells  # the formula name is there, as text
    assert not list(tmp_path.glob(".*.tmp"))
    assert MARKUP  # the device name holds markup (see the case)


def _number(cell: str) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False
