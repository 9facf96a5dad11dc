"""A directory opens as one run only when it is one; otherwise the TUI lists its traces to choose
from and `rooftop report` names them in a one-line error."""
from __future__ import annotations

import asyncio

import pytest

from rooftop.trace import NotOneRun, load_trace, run_files, write_trace
from tui.app import RooftopApp
from tui.screens.chooser import ChooserScreen
from tui.screens.overview import OverviewScreen

from tui_helpers import _events, _meta, multi_rank_run, second_trace, small_trace


def side_by_side_ranks(tmp_path, same_run=True, ranks=(0, 1)):
    """Two files next to each other whose metadata carry their rank (and, or not, the same run)."""
    run = tmp_path / "flat"
    for i, r in enumerate(ranks):
        meta = _meta(modeled=False, label="tiny" if same_run or i == 0 else "other")
        meta["rank"] = r
        write_trace(run / f"part{i}.parquet", _events(counters=False, weird_names=False), meta)
    return run


def test_rank_folders_and_same_run_files_are_one_run(tmp_path):
    assert [r for r, _ in run_files(multi_rank_run(tmp_path))] == [0, 1]
    flat = side_by_side_ranks(tmp_path)
    assert [r for r, _ in run_files(flat)] == [0, 1]
    assert load_trace(flat).ranks == [0, 1]


@pytest.mark.parametrize("why,make,names", [
    ("their metadata name different runs", lambda d: side_by_side_ranks(d, same_run=False), "part0.parquet, part1.parquet"),
    ("rank 3 appears twice", lambda d: side_by_side_ranks(d, ranks=(3, 3)), "(part0.parquet and part1.parquet)"),
])
def test_other_directories_are_not_one_run(tmp_path, why, make, names):
    d = make(tmp_path)
    with pytest.raises(NotOneRun) as err:
        load_trace(d)
    assert err.value.why == why and names in str(err.value)


def test_report_on_a_directory_of_traces_names_them(tmp_path, capsys):
    from rooftop_cli import main

    d = tmp_path / "mixed"
    small_trace(d)
    second_trace(d)
    assert main(["report", str(d)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds 2 traces that are not one multi-rank run" in err
    assert "second.parquet, small.parquet" in err


def test_tui_lists_the_traces_and_opens_the_chosen_one(tmp_path):
    d = tmp_path / "mixed"
    small_trace(d)
    second_trace(d)

    async def main():
        app = RooftopApp([str(d)])
        async with app.run_test(size=(80, 24)) as pilot:
            for _ in range(300):
                await pilot.pause(0.01)
                if isinstance(app.screen, ChooserScreen):
                    break
            screen = app.screen
            assert isinstance(screen, ChooserScreen) and [f.name for f in screen.files] == ["second.parquet", "small.parquet"]
            await pilot.press("down", "enter")
            for _ in range(300):
                await pilot.pause(0.01)
                await app.workers.wait_for_complete()
                if isinstance(app.screen, OverviewScreen):
                    break
            assert isinstance(app.screen, OverviewScreen) and app.analyses[0].trace.label == "small.parquet"
    asyncio.run(main())


def test_a_directory_of_other_traces_is_one_run_only_with_distinct_ranks(tmp_path):
    from rooftop.trace import check_run_directory

    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for name in ("a.pt.trace.json", "b.json.gz", "notes.txt"):
        (mixed / name).write_text("{}")
    with pytest.raises(NotOneRun) as err:
        check_run_directory(mixed)
    assert [f.name for f in err.value.files] == ["a.pt.trace.json", "b.json.gz"]  # the notes are not a trace
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for name in ("job_rank0.json", "job_rank1.json"):
        (ranks / name).write_text("{}")
    check_run_directory(ranks)  # one run: the importer reads it as ranks 0 and 1
