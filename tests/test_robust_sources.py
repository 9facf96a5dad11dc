"""Issue 13, the rest of the classes at every door: secrets from an `.ncu-rep` go through the same
scrub as every other source; every TUI export (the roofline's included) is spreadsheet-safe and
printable; a directory where a file is expected is named for what it is."""
from __future__ import annotations

import asyncio
import csv
import json

import pandas as pd
import pytest

from rooftop.present.text import has_unsafe

from bad_inputs.corpus import robust_cases
from bad_inputs.corpus import SECRET_VALUES, _row, secret_strings
from bad_inputs.harness import ROOT, check, run_in_process


def _case(name: str):
    return next(c for c in robust_cases() if c.name == name)


# --- secrets: the .ncu-rep reader's rows take the one scrub every import takes ----------------------

def test_ncu_rep_rows_and_metadata_are_scrubbed(tmp_path, monkeypatch):
    """`.ncu-rep` files are read by NVIDIA's native module; what it hands over (kernel names, NVTX
    paths, the device and process metadata) is scrubbed like any other source's."""
    import collectors.readers.ncu_rep as ncu_rep

    secs = secret_strings()
    frame = pd.DataFrame([_row(i, name=f"k_{s}", path=f"decode/step=0/{s}", op=None) for i, s in enumerate(secs)])
    meta = {"source": {"tool": "ncu", "file": "/home/alice/private/profile.ncu-rep", "cmd": " ".join(secs)},
            "device": {"name": "NVIDIA H100 80GB HBM3", "note": secs[0]}, "warnings": [], "modeled": False}
    monkeypatch.setattr(ncu_rep, "read_ncu_rep", lambda path: (frame.copy(), json.loads(json.dumps(meta))))
    src = tmp_path / "profile.ncu-rep"
    src.write_bytes(b"NVR\x00" + b"\x00" * 64)  # detected by its magic; the reader above replaces NVIDIA's
    out = tmp_path / "o.parquet"
    imported = run_in_process(["import", str(src), "-o", str(out)])
    assert imported.rc == 0, imported.err
    shown = run_in_process(["report", "--json", str(src)])
    assert shown.rc == 0, shown.err
    written = out.read_bytes().decode("utf-8", "replace")
    for value in SECRET_VALUES:
        assert value not in written and value not in shown.out and value not in imported.err, value
    assert "/home/alice" not in written and "profile.ncu-rep" in written


# --- nothing interpreted: every screen's export --------------------------------------------------

def _number(cell: str) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False


def test_every_tui_export_is_spreadsheet_safe_and_printable(tmp_path, monkeypatch):
    """Markup, bidi, zero-width characters and formulas in every text of the trace: the CSV of each
    screen (overview, steps, kernels, roofline, stalls, compare, timeline) runs nothing and hides nothing."""
    from tui.app import RooftopApp

    path = _case("r13-interpreted").make(tmp_path, None)
    monkeypatch.chdir(tmp_path)

    async def main():
        app = RooftopApp([str(path), str(path)])  # two traces: the compare screen too
        async with app.run_test(size=(160, 50)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            for key in ("1", "2", "3", "4", "5", "6", "7"):
                await pilot.press(key)
                await app.workers.wait_for_complete()
                await pilot.pause()
                await pilot.press("e")
                await pilot.pause()
            return [n.message for n in app._notifications]

    notes = asyncio.run(main())
    exported = {p.name.split("-")[1]: p for p in tmp_path.glob("rooftop-*.csv")}
    assert {"overview", "kernels", "roofline", "compare"} <= set(exported), (sorted(exported), notes)
    for name, p in exported.items():
        with open(p, newline="", encoding="utf-8") as fh:
            cells = [c for row in csv.reader(fh) for c in row]
        assert cells, name
        assert not any(c[:1] in ("=", "+", "-", "@", "\t", "\r") for c in cells if not _number(c)), (name, cells)
        assert not any(has_unsafe(c) for c in cells), name
    with open(exported["kernels"], newline="", encoding="utf-8") as fh:
        kernel_cells = [c for row in csv.reader(fh) for c in row]
    assert any(c.startswith("'=HYPERLINK") for c in kernel_cells)  # the name is kept, as text
    assert not list(tmp_path.glob(".*.tmp")) and not list(tmp_path.glob("*.svg"))


# --- special paths: a directory where a file is expected ------------------------------------------------

@pytest.mark.parametrize("layout", ["empty", "named-like-a-file.parquet", "named-like-a-file.json", "only-notes"])
def test_a_directory_without_traces_is_named_as_such(layout, tmp_path):
    d = tmp_path / layout
    d.mkdir()
    if layout == "only-notes":
        (d / "notes.txt").write_text("not a trace")
    good = ROOT / "sample_traces" / "tiny-cpu.parquet"
    for argv in (["report", str(d)], ["import", str(d), "-o", str(tmp_path / "o.parquet")], ["open", str(d)],
                 ["diff", str(good), str(d)], [str(d)]):
        o = run_in_process(argv)
        check(o, d, "error")
        assert "is a directory that holds no trace files" in o.err, (argv, o.err)
    assert not (tmp_path / "o.parquet").exists()


def test_a_file_where_a_directory_is_expected_and_back(tmp_path):
    """`-o` of a per-rank import onto a file; a trace path through a file used as a directory."""
    from bad_inputs.corpus import _kernel_ev, _kineto_doc

    src = tmp_path / "ranks"
    src.mkdir()
    for r in (0, 1):
        (src / f"rank{r}.json").write_text(json.dumps(_kineto_doc([_kernel_ev(1, 10, 5)])))
    blocker = tmp_path / "out.txt"
    blocker.write_text("keep me")
    o = run_in_process(["import", str(src), "-o", str(blocker)])
    assert o.rc == 2 and "exists and is not a directory" in o.err, o.err
    assert blocker.read_text() == "keep me"
    through = blocker / "t.parquet"
    o = run_in_process(["report", str(through)])
    check(o, through, "error")
