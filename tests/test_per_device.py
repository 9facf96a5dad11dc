"""One GPU at a time (rooftop/analysis/per_device.py): a trace of one process driving several GPUs gives
each device's busy/idle, MBU and steps, never one figure over the union of their timelines.

The real two-GPU Nsight Systems export (nsys-ai's h100_2gpu_1s) is checked against plain sqlite3
queries; hand-made traces check the definitions (span, busy as the union, idle share) per device.
"""
from __future__ import annotations

import json
from types import SimpleNamespace
import sqlite3

import pandas as pd
import pytest

from rooftop.analysis import analyze
from rooftop.analysis.per_device import device_table, headline, multi_device
from rooftop_cli import main
from rooftop.present.report import report_dict
from rooftop.trace import load_trace, write_trace

TWO_GPU = "GindaChen__nsys-ai__tests__fixtures__h100_2gpu_1s.sqlite"


def _k(name, start, dur, device, step=None, phase=None, kind="kernel", model_bytes=None):
    return {"kind": kind, "name": name, "start_ns": start, "dur_ns": dur, "device": device, "stream": 7,
            "step": step, "phase": phase, "model_bytes": model_bytes}


def _union(intervals) -> int:
    total, end = 0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def test_each_device_its_own_span_busy_and_idle(tmp_path):
    # device 0: [0,10] and [20,30] -> span 30, busy 20; device 1: [5,25] -> span 20, busy 20, no idle.
    # Over both: span 30, busy 25 (the union): idle 1/6, a figure of neither GPU.
    rows = [_k("a", 0, 10, 0, 0, "decode", model_bytes=1e3), _k("b", 20, 10, 0, 0, "decode", model_bytes=1e3),
            _k("c", 5, 20, 1, 0, "decode", model_bytes=4e3)]
    t = load_trace(write_trace(tmp_path / "t.parquet", rows, {"device": {"name": "NVIDIA H100 80GB HBM3"},
                                                              "steps": [{"phase": "decode", "index": 0}]}))
    a = analyze(t)
    d = a.devices.set_index("device")
    assert d["span_ns"].tolist() == [30, 20] and d["busy_ns"].tolist() == [20, 20]
    assert d["idle_frac"].tolist() == pytest.approx([1 / 3, 0.0]) and d["kernels"].tolist() == [2, 1]
    assert d["steps"].tolist() == [1, 1]
    assert d.loc[0, "tbps"] == pytest.approx(2e3 / 30e-9 / 1e12) and d.loc[1, "tbps"] == pytest.approx(4e3 / 20e-9 / 1e12)
    # the phase table is device 0's; the step table has a row per device
    ph = a.phases.set_index("phase").loc["decode"]
    assert (ph["span_ns"], ph["busy_ns"], ph["kernels"]) == (30, 20, 2)
    assert a.steps[["device", "span_ns"]].values.tolist() == [[0, 30], [1, 20]]
    assert "device 0's" in a.devices_note
    doc = report_dict(a)
    assert [r["device"] for r in doc["devices"]] == [0, 1]
    assert {"device", "kernels", "span_ns", "busy_ns", "idle_frac"} <= set(doc["devices"][0])


def test_one_device_has_no_device_table(tmp_path):
    t = load_trace(write_trace(tmp_path / "t.parquet", [_k("a", 0, 10, 0)], {}))
    a = analyze(t)
    assert a.devices is None and a.devices_note is None and "devices" not in report_dict(a)
    assert "device" not in a.steps.columns
    assert not multi_device(a.timed) and device_table(a.timed) is None


def test_headline_keeps_lowest_rank_then_device():
    f = pd.DataFrame({"rank": [1, 0, 0, 0], "device": [0, 3, 2, 2], "x": [1, 2, 3, 4]})
    assert headline(f)["x"].tolist() == [3, 4]


def _plain(path):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = []
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        if con.execute("SELECT count(*) FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]:
            rows += [(table, d, s, e) for d, s, e in con.execute(f"SELECT deviceId, start, end FROM {table}")]
    con.close()
    return rows


def test_two_gpu_nsys_export_per_device_against_sqlite(fixtures_dir, capsys):
    """The nsys-ai two-GPU export, read with sqlite3: per deviceId the kernel count, the span of its GPU
    rows and the union of their intervals are what `report --json` gives per device."""
    path = fixtures_dir / "traces" / TWO_GPU
    rows = _plain(path)
    want = {}
    for dev in sorted({d for _, d, _, _ in rows}):
        mine = [(s, e) for _, d, s, e in rows if d == dev]
        kernels = sum(1 for t, d, _, _ in rows if d == dev and t.endswith("KERNEL"))
        span = max(e for _, e in mine) - min(s for s, _ in mine)
        want[dev] = (kernels, span, _union(mine))
    assert sorted(want) == [0, 1] and [w[0] for w in want.values()] == [1721, 1721]
    assert main(["report", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    got = {r["device"]: (r["kernels"], r["span_ns"], r["busy_ns"]) for r in doc["devices"]}
    assert got == want
    # the phase table is device 0's own, not the union of both timelines
    ph = doc["phases"][0]
    assert (ph["kernels"], ph["span_ns"], ph["busy_ns"]) == want[0]
    union = [(s, e) for _, _, s, e in rows]
    merged_idle = 1 - _union(union) / (max(e for _, e in union) - min(s for s, _ in union))
    per_dev = [1 - w[2] / w[1] for w in want.values()]
    assert all(p > merged_idle for p in per_dev)  # each GPU idles more than the union says
    assert [r["idle_frac"] for r in doc["devices"]] == pytest.approx(per_dev)
    assert "2 devices (0, 1)" in doc["devices_note"]


def test_tui_steps_choose_the_device_as_they_choose_the_rank(tmp_path):
    """Steps (2) lists a row per device and step; Enter opens that step on that device: its kernels only."""
    import asyncio

    from tui.app import RooftopApp
    from tui.screens.steps import StepScreen

    rows = [_k("a", 0, 10, 0, 0, "decode"), _k("b", 20, 10, 0, 0, "decode"), _k("c", 5, 20, 1, 0, "decode"),
            _k("d", 100, 10, 0, 1, "decode"), _k("e", 100, 10, 1, 1, "decode")]
    path = write_trace(tmp_path / "two.parquet", rows, {"device": {"name": "NVIDIA H100 80GB HBM3"},
                                                         "steps": [{"phase": "decode", "index": i} for i in (0, 1)]})

    async def main():
        app = RooftopApp([str(path)])
        async with app.run_test(size=(140, 40)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            await pilot.press("2")
            await app.workers.wait_for_complete()
            await pilot.pause()
            view = app.screen.query_one("#steps-table").view
            listed = list(zip(view["device"], view["step"]))
            await pilot.press("down", "enter")
            await app.workers.wait_for_complete()
            await pilot.pause()
            s = app.screen
            got = listed, isinstance(s, StepScreen), s.device, sorted(s._kernels()["name"].astype(str))
            # a kernel opened from that step keeps the device: its launches are that GPU's only
            first = s._kernels().iloc[0]
            s.open_kernel(SimpleNamespace(row={"short_name": first["short_name"]}))
            await app.workers.wait_for_complete()
            await pilot.pause()
            d = app.screen
            return got, (d.device, d.scope, set(d.data.launches["device"]) if d.data else None)
    (listed, opened, device, names), (detail_device, scope, launched_on) = asyncio.run(main())
    assert sorted(listed) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert opened and device == listed[1][0]
    assert names == sorted(r["name"] for r in rows if r["device"] == device and r["step"] == listed[1][1])
    assert detail_device == device and f"device {device}" in scope and launched_on == {device}


def test_kernel_detail_of_one_device(tmp_path):
    """The same kernel on two GPUs: a device's detail counts that GPU's launches only."""
    rows = [_k("gemv", 0, 10, 0, 0, "decode"), _k("gemv", 20, 10, 0, 0, "decode"), _k("gemv", 5, 40, 1, 0, "decode")]
    a = analyze(load_trace(write_trace(tmp_path / "t.parquet", rows, {"device": {"name": "NVIDIA H100 80GB HBM3"},
                                                                      "steps": [{"phase": "decode", "index": 0}]})))
    every = dict((k, v) for k, v, _ in a.kernel_detail("gemv"))
    one = dict((k, v) for k, v, _ in a.kernel_detail("gemv", phase="decode", step=0, device=1))
    assert every["launches"] == "3" and one["launches"] == "1"
    assert set(a.launches("gemv", device=0)["dur_ns"]) == {10}
    assert a.scoped_groups(device=1)["count"].tolist() == [1]
