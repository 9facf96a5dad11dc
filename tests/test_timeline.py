"""The timeline core (rooftop.analysis.lanes): lanes, rasters, gaps, host activity, launch-to-start,
on a hand-built trace whose answers are worked out below."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rooftop.analysis import lanes as tl

# GPU: stream 7 runs A [0,10) gemm, B [15,20) norm, C [40,50) attention; stream 8 runs D [18,30), a copy.
# Busy (any stream): [0,10) [15,30) [40,50) -> gaps [10,15) (5 ns) and [30,40) (10 ns, the largest).
# Host thread 99: launch A at -3, memcpy for D at 16, launch B at 12, a sync [21,38), launch C at 38.
GPU = pd.DataFrame({
    "kind": ["kernel", "kernel", "memcpy", "kernel"], "name": ["A", "B", "D", "C"],
    "start_ns": [0, 15, 18, 40], "dur_ns": [10, 5, 12, 10], "device": [0, 0, 0, 0], "stream": [7, 7, 8, 7],
    "correlation": [1, 2, 4, 3], "category": ["gemm", "norm", "memory", "attention"],
})
HOST = pd.DataFrame({
    "kind": "runtime",
    "name": ["cudaLaunchKernel", "cudaLaunchKernel", "cudaMemcpyAsync", "cudaStreamSynchronize", "cudaLaunchKernel",
             "cudaGetDevice"],
    "start_ns": [-3, 12, 16, 21, 38, 500], "dur_ns": [2, 2, 1, 17, 1, 1], "correlation": [1, 2, 4, 10, 3, 11],
    "thread": pd.array([99, 99, 99, 99, 99, 5], dtype="Int64"),
    "op": ["aten::mm", "aten::rms_norm", "aten::copy_", "aten::item", None, None],
})


def _events() -> pd.DataFrame:
    return pd.concat([GPU.assign(thread=pd.array([None] * 4, dtype="Int64")), HOST], ignore_index=True)


def test_gaps_are_the_idle_stretches_of_all_streams():
    g = tl.gaps(GPU)
    assert g[["start_ns", "end_ns", "dur_ns"]].values.tolist() == [[10, 15, 5], [30, 40, 10]]
    assert g["after"].tolist() == [1, 3]  # B (position 1) ends the first, C (position 3) the second
    assert tl.by_size(g).tolist() == [1, 0]
    t = tl.build(GPU)
    assert t.gaps.order.tolist() == [1, 0] and int(t.gaps.dur(t.gaps.order[0])) == 10
    assert int(t.gaps.next_row(1)) == 3 and len(t.gaps.union) == 4  # two streams: a union lane of all rows


def test_raster_busy_fraction_and_category_per_column():
    lanes = tl.gpu_lanes(GPU)
    assert [ln.label for ln in lanes] == ["stream 7", "stream 8"]
    frac, code = lanes[0].raster(0, 50, 5)
    assert frac.tolist() == [1.0, 0.5, 0.0, 0.0, 1.0]
    assert [tl.CODES[c] if c >= 0 else None for c in code] == ["gemm", "norm", None, None, "attention"]
    frac, code = lanes[1].raster(0, 50, 5)
    assert frac.tolist() == [0.0, 0.2, 1.0, 0.0, 0.0]
    assert tl.CODES[code[1]] == "memory" and tl.CODES[code[2]] == "memory" and code[0] == -1


def test_busy_counts_overlapping_rows_once():
    rows = pd.DataFrame({"start_ns": [0, 10], "dur_ns": [100, 10], "category": ["gemm", "norm"],
                         "device": 0, "stream": 1})
    lane = tl.gpu_lanes(rows)[0]
    assert lane.busy_until(np.array([5, 15, 50, 100, 200])).tolist() == [5, 15, 50, 100, 100]
    assert lane.at(50) == 0 and lane.at(15) == 1 and lane.at(150) == -1


def test_visible_rows_by_binary_search():
    lane = tl.gpu_lanes(GPU)[0]  # A [0,10) B [15,20) C [40,50)
    assert lane.visible(12, 16) == (1, 2)
    assert lane.visible(21, 39) == (2, 2)  # nothing
    assert lane.visible(-5, 100) == (0, 3)


def test_host_lane_is_the_launching_thread_and_says_what_it_did_in_a_gap():
    t = tl.build(GPU, _events())
    assert [ln.label for ln in t.lanes] == ["stream 7", "stream 8", "host 99"]  # thread 5 launched nothing
    assert t.t0 == -3 and t.t1 == 50
    host = t.host_lanes[0]
    act = tl.host_during(host, t.host, 30, 40)
    # the sync covers [30,38) = 8 ns, the launch of C [38,39) 1 ns: 9 ns in calls, 1 ns outside
    assert act.in_calls_ns == 9 and act.outside_calls_ns == 1 and act.total_calls == 2
    top = act.calls[0]
    assert (top.name, top.category, top.overlap_ns, top.op) == ("cudaStreamSynchronize", "sync", 8, "aten::item")
    assert act.calls[1].category == "launch"


def test_launch_to_start_by_correlation():
    d = tl.launch_to_start(GPU, HOST)
    assert d.tolist() == [3, 3, 2, 2]  # A 0-(-3), B 15-12, D 18-16, C 40-38
    unknown = tl.launch_to_start(GPU.assign(correlation=[1, 2, 77, None]), HOST)
    assert unknown[:2].tolist() == [3, 3] and np.isnan(unknown[2:]).all()
    assert tl.launch_of(HOST, 3) == 4 and tl.launch_of(HOST, 1234) is None


def test_timeline_launch_to_start_of_a_few_rows_reads_scalars_alike():
    """The selected block's launch-to-start (a few positions, read as scalars) equals the same rows
    through the frame path (nine or more positions), unknown correlation included."""
    gpu = GPU.assign(correlation=pd.array([1, 2, None, 3], dtype="Int64"))
    t = tl.build(gpu, HOST)
    few = [3, 0, 2, 1]
    many = few + few + [0]
    assert np.array_equal(t.launch_to_start(few), t.launch_to_start(many)[:4], equal_nan=True)
    assert np.isnan(t.launch_to_start(few)).sum() == 1
    assert np.array_equal(t.launch_to_start(2), t.launch_to_start(many)[2:3], equal_nan=True)


@pytest.mark.parametrize("name,cat", [("cudaLaunchKernel", "launch"), ("cuLaunchKernelEx", "launch"),
                                      ("cudaGraphLaunch", "launch"), ("cudaLaunchKernel_v7000", "launch"),
                                      ("cudaStreamSynchronize", "sync"), ("cudaDeviceSynchronize", "sync"),
                                      ("cudaMemcpyAsync_v3020", "copy"), ("cudaEventRecord", "call"),
                                      (None, "call")])
def test_host_categories(name, cat):
    assert tl.host_category(name) == cat


def test_a_trace_without_runtime_rows_has_no_host_lane():
    t = tl.build(GPU, GPU)  # modeled traces, old files: no runtime rows, no thread column
    assert [ln.host for ln in t.lanes] == [False, False] and t.host.empty
    assert t.gaps.frame()["dur_ns"].tolist() == [5, 10]


def test_raster_cost_does_not_grow_with_rows():
    """The raster answers from prefix sums: a 1M-row lane at full zoom-out agrees with a direct sum."""
    n = 1_000_000
    rng = np.random.default_rng(0)
    dur = rng.integers(1, 50, n)
    start = np.cumsum(dur + rng.integers(0, 20, n)) - dur
    rows = pd.DataFrame({"start_ns": start, "dur_ns": dur, "category": "gemm", "device": 0, "stream": 0})
    lane = tl.gpu_lanes(rows)[0]
    t1 = int(start[-1] + dur[-1])
    frac, _ = lane.raster(0, t1, 80)
    assert abs(frac.mean() * t1 - dur.sum()) / dur.sum() < 1e-3


def test_one_sorted_stream_is_drawn_from_the_frames_own_columns():
    """The memory claim behind the 1M-kernel budget: no copy of start times, no positions array,
    and the gaps use the same lane (two int32 per gap)."""
    rows = GPU[GPU["stream"] == 7].reset_index(drop=True)  # A, B, C in time order
    t = tl.build(rows)
    lane = t.lanes[0]
    assert lane.row is None and np.shares_memory(lane.start, rows["start_ns"].to_numpy())
    assert t.gaps.union is lane and t.gaps.after.dtype == np.int32
    assert t.gaps.frame()[["start_ns", "end_ns"]].values.tolist() == [[10, 15], [20, 40]]


def test_ruler_ticks_sit_on_round_offsets_and_never_read_alike():
    from tui.widgets.timeline_canvas import ruler_ticks

    # the whole run: round offsets from the origin, in the unit of each
    assert ruler_ticks(0, 774e6, 67, 0) == [(0, "0"), (17, "+200 ms"), (34, "+400 ms"), (51, "+600 ms")]
    assert [lab for _, lab in ruler_ticks(0, 1.2e6, 67, 0)] == ["0", "+500 µs", "+1.0 ms"]  # 0.5 ms apart
    # zoomed to 23.5 µs deep in a step: the labels keep the decimals their spacing needs
    deep = [lab for _, lab in ruler_ticks(49.6e6 - 5e3, 49.6e6 + 18.5e3, 67, 0)]
    assert deep == ["+49.60 ms", "+49.61 ms"]
    # before the origin, and never past the canvas
    ticks = ruler_ticks(-40e6, 40e6, 120, 0)
    assert ("-20 ms" in [lab for _, lab in ticks]) and all(c + len(lab) <= 120 for c, lab in ticks)


def test_runtime_rows_of_the_whole_run_are_not_copied():
    """`host.runtime_rows` over a window holding every call gives the calls as they are, sharing the
    host frame's arrays (a 1M-call frame is not copied); a narrower window gives only its calls."""
    from rooftop.analysis.host import runtime_rows

    calls = pd.DataFrame({"start_ns": np.array([10, 20, 30], dtype=np.int64), "dur_ns": np.array([5, 5, 5], dtype=np.int64),
                          "name": pd.Categorical(["cudaLaunchKernel"] * 3), "correlation": pd.array([1, 2, 3], dtype="Int64"),
                          "thread": pd.array([7, 7, 7], dtype="Int64"), "op": pd.Categorical([None, "aten::mm", None])})
    whole = runtime_rows(calls, 0, 100)
    assert whole.equals(calls)
    assert np.shares_memory(whole["start_ns"].to_numpy(), calls["start_ns"].to_numpy())
    part = runtime_rows(calls, 18, 26)
    assert part["correlation"].tolist() == [2] and part.index.tolist() == [0]
