"""join_counters: counter rows onto timeline kernels by NVTX path and launch order."""
from __future__ import annotations

import pandas as pd

from collectors.readers.ncu import join_counters
from rooftop.trace import to_table

P0 = "decode/step=0/layer=0/attn"
P1 = "decode/step=0/layer=0/mlp"


def timeline():
    # Timeline order within a path is start_ns, not row order: rows 1 and 0 are swapped on purpose.
    return pd.DataFrame([
        {"id": 10, "kind": "kernel", "name": "void gemv<128>(float*)", "path": P0, "start_ns": 200, "dur_ns": 50},
        {"id": 11, "kind": "kernel", "name": "void rms_norm_kernel<float>(float*)", "path": P0, "start_ns": 100, "dur_ns": 40},
        {"id": 12, "kind": "kernel", "name": "flash_fwd_kernel", "path": P0, "start_ns": 300, "dur_ns": 90},
        {"id": 13, "kind": "range", "name": "attn", "path": P0, "start_ns": 90, "dur_ns": 400},
        {"id": 14, "kind": "kernel", "name": "void gemv<256>(float*)", "path": P1, "start_ns": 500, "dur_ns": 70},
        {"id": 15, "kind": "kernel", "name": "silu_kernel", "path": P1, "start_ns": 600, "dur_ns": 10},
        {"id": 16, "kind": "kernel", "name": "void gemv<256>(float*)", "path": P1, "start_ns": 700, "dur_ns": 60},
        {"id": 17, "kind": "kernel", "name": "sampling_kernel", "path": "decode/step=5", "start_ns": 900, "dur_ns": 5,
         "grid": [1, 1, 1]},
    ])


def counters():
    rows = [
        # P0: same three kernels, ncu names are full demangled names with different template args.
        {"id": 0, "name": "void rms_norm_kernel<float>(float*)", "path": P0, "dram_read": 1.0, "stall_wait": 0.5},
        {"id": 1, "name": "void gemv<64>(float*)", "path": P0, "dram_read": 2.0, "flops": 8.0},
        {"id": 2, "name": "flash_fwd_kernel", "path": P0, "dram_read": 3.0, "grid": [4, 2, 1], "registers": 96},
        # P1: second kernel differs (mismatch), and one extra kernel the timeline does not have.
        {"id": 3, "name": "void gemv<256>(float*)", "path": P1, "dram_read": 4.0},
        {"id": 4, "name": "gelu_kernel", "path": P1, "dram_read": 5.0},
        {"id": 5, "name": "void gemv<256>(float*)", "path": P1, "dram_read": 6.0},
        {"id": 6, "name": "copy_kernel", "path": P1, "dram_read": 7.0},
        # a path the timeline never saw
        {"id": 7, "name": "warmup_kernel", "path": "warmup", "dram_read": 8.0},
    ]
    c = pd.DataFrame(rows)
    c["counters"] = True
    return c


def test_join_by_path_and_launch_order():
    out, report = join_counters(timeline(), counters())
    by_id = out.set_index("id")
    # P0: k-th by launch (start) order: rms_norm (100) <- id 0, gemv (200) <- id 1, flash (300) <- id 2
    assert by_id.loc[11, "dram_read"] == 1.0 and by_id.loc[11, "stall_wait"] == 0.5
    assert by_id.loc[10, "dram_read"] == 2.0 and by_id.loc[10, "flops"] == 8.0  # gemv<128> ~ gemv<64>
    assert by_id.loc[12, "dram_read"] == 3.0 and by_id.loc[12, "grid"] == [4, 2, 1]
    assert by_id.loc[12, "registers"] == 96
    # P1: gemv, [silu vs gelu: mismatch, unjoined], gemv; the extra copy_kernel is unmatched.
    assert by_id.loc[14, "dram_read"] == 4.0
    assert pd.isna(by_id.loc[15, "dram_read"]) and by_id.loc[15, "counters"] is not True
    assert by_id.loc[16, "dram_read"] == 6.0
    # untouched rows
    assert pd.isna(by_id.loc[17, "dram_read"]) and by_id.loc[17, "grid"] == [1, 1, 1]
    assert pd.isna(by_id.loc[13, "dram_read"])
    assert by_id["counters"].eq(True).sum() == 5
    assert set(by_id.index[by_id["counters"].eq(True)]) == {10, 11, 12, 14, 16}

    assert report["paths"][P0] == {"timeline": 3, "counters": 3, "matched": 3, "mismatched": 0,
                                   "unmatched_counters": 0, "unmatched_timeline": 0}
    assert report["paths"][P1] == {"timeline": 3, "counters": 4, "matched": 2, "mismatched": 1,
                                   "unmatched_counters": 2, "unmatched_timeline": 1}
    assert report["paths"]["warmup"]["unmatched_counters"] == 1
    assert report["matched"] == 5 and report["mismatched"] == 1
    assert report["unmatched_counters"] == 3      # gelu, copy, warmup
    assert report["unmatched_timeline"] == 7 - 5  # silu and sampling_kernel
    to_table(out)  # the joined frame still conforms to the trace schema


def test_extra_kernel_in_the_middle_does_not_shift_the_rest():
    t = pd.DataFrame([{"id": i, "kind": "kernel", "name": n, "path": "p", "start_ns": i, "dur_ns": 1}
                      for i, n in enumerate(["a_kernel", "b_kernel", "c_kernel"])])
    c = pd.DataFrame([{"id": i, "name": n, "path": "p", "dram_read": float(i)}
                      for i, n in enumerate(["a_kernel", "memset_kernel", "b_kernel", "c_kernel"])])
    out, report = join_counters(t, c)
    assert out["dram_read"].tolist() == [0.0, 2.0, 3.0]
    assert report["paths"]["p"]["matched"] == 3 and report["paths"]["p"]["mismatched"] == 0


def test_timeline_values_are_kept_and_nothing_is_forced():
    t = pd.DataFrame([{"id": 0, "kind": "kernel", "name": "k", "path": "p", "start_ns": 0, "dur_ns": 7,
                       "registers": 32}])
    c = pd.DataFrame([{"id": 0, "name": "k", "path": "p", "dur_ns": 999, "registers": 64, "sm_pct": 50.0}])
    out, _ = join_counters(t, c)
    assert out["dur_ns"].iloc[0] == 7 and out["registers"].iloc[0] == 32 and out["sm_pct"].iloc[0] == 50.0
    out, report = join_counters(t, c.iloc[0:0])
    assert report["matched"] == 0 and out["sm_pct"].isna().all()
    c2 = c.assign(name="other")
    out, report = join_counters(t, c2)
    assert report["mismatched"] == 1 and out["sm_pct"].isna().all()
