"""The column registry (rooftop/present/columns.py) is the one declaration of each analysis table's
columns: `report --json` keys, the TUI's headers and docs/definitions.md all follow it. Also the one
`is_unknown` and the one ridge."""
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rooftop.present import columns
from rooftop.hardware import gpus as devices
from rooftop.analysis import analyze
from rooftop.present.columns import GAP, GAP_STEPS, GROUPS, PHASES, RANK_STEPS, STEPS, Column
from rooftop.present.format import fmt_value, is_unknown
from rooftop.trace import load_trace
from rooftop.present.report import GAP_KEYS, GROUP_KEYS, PHASE_KEYS, STEP_KEYS, report_dict
from test_model_cost import graph_trace, llama  # noqa: F401  (llama is a fixture)

ROOT = Path(__file__).resolve().parents[1]

# `report --json` keys as they were published before the registry existed: a change here breaks users.
JSON_PHASE_KEYS = ('phase', 'steps', 'kernels', 'span_ns', 'busy_ns', 'idle_ns', 'idle_frac', 'flops', 'bytes',
                   'bytes_source', 'bytes_coverage', 'flops_source', 'tflops', 'tbps', 'mfu', 'mbu', 'model_mbu',
                   'tokens', 'tokens_per_s', 'ai', 'bound', 'mbu_datasheet', 'mbu_measured', 'mfu_datasheet',
                   'mfu_measured', 'model_steps', 'model_bytes', 'model_bytes_per_step', 'model_flops',
                   'model_mbu_busy', 'model_mfu', 'model_mfu_busy', 'model_reason', 'flops_coverage', 'ai_coverage',
                   'mbu_status', 'mfu_status', 'model_bound', 'bound_mix')
JSON_STEP_KEYS = ('rank', 'phase', 'step', 'kernels', 'start_ns', 'span_ns', 'busy_ns', 'idle_ns', 'idle_frac',
                  'flops', 'bytes', 'bytes_source', 'tflops', 'tbps', 'mfu', 'mbu', 'model_mbu', 'batch',
                  'new_tokens', 'context', 'tokens_per_s', 'bound', 'model_bytes', 'model_weight_bytes',
                  'model_kv_read_bytes', 'model_kv_write_bytes', 'model_flops', 'experts_touched', 'model_mbu_busy',
                  'model_mfu', 'model_mfu_busy', 'model_ideal_ns', 'model_reason', 'workload_source', 'flops_source',
                  'bytes_coverage', 'flops_coverage', 'ai', 'ai_coverage', 'mbu_status', 'mfu_status', 'bound_mix',
                  'phase_source', 'phase_reason', 'model_bound', 'device')
JSON_GAP_KEYS = ('phase', 'measured_ns', 'ideal_ns', 'slow_kernels_ns', 'extra_bytes_ns', 'launch_gaps_ns',
                 'unmodeled_ns', 'ideal_frac', 'basis',
                 # new keys (issue 33: host copies, edge idle, why no basis; the phase's coverage)
                 'copies_ns', 'edge_idle_ns', 'basis_reason', 'kernel_coverage')
JSON_GAP_STEP_KEYS = ('phase', 'step', 'measured_ns', 'ideal_ns', 'slow_kernels_ns', 'extra_bytes_ns',
                      'launch_gaps_ns', 'unmodeled_ns', 'ideal_frac', 'basis', 'kernel_coverage',
                      'copies_ns', 'edge_idle_ns', 'basis_reason')
JSON_GROUP_KEYS = ('key', 'category', 'phase', 'count', 'time_ns', 'time_share', 'mean_ns', 'flops', 'bytes',
                   'bytes_source', 'ai', 'tflops', 'tbps', 'pct_of_roof', 'bound', 'dtype', 'peak_flops',
                   'flops_source', 'flops_coverage', 'bytes_coverage', 'ai_coverage', 'bound_mix')
JSON_RANK_STEP_KEYS = ("phase", "step", "ranks", "min_ns", "median_ns", "max_ns", "straggler", "spread")


def test_report_keys_come_from_the_registry_unchanged():
    assert (PHASE_KEYS, STEP_KEYS, GAP_KEYS, GROUP_KEYS) == (JSON_PHASE_KEYS, JSON_STEP_KEYS, JSON_GAP_KEYS,
                                                             JSON_GROUP_KEYS)
    assert GAP_STEPS.keys == JSON_GAP_STEP_KEYS and RANK_STEPS.keys == JSON_RANK_STEP_KEYS
    assert columns.RANK_PHASES.keys == ("rank",) + JSON_PHASE_KEYS


def test_registry_declares_only_columns_the_analysis_computes(tmp_path, llama):  # noqa: F811
    t = graph_trace(tmp_path, [{"phase": "decode", "index": i, "batch": 1, "new_tokens": 1, "context": 2048}
                               for i in range(3)])
    a = analyze(t, model=llama)
    for table, frame in ((PHASES, a.phases), (STEPS.pick(*[k for k in STEPS.keys if k not in ("rank", "device")]), a.steps),
                         (GAP, a.gap), (GAP_STEPS, a.gap_steps), (GROUPS, a.groups("short_name"))):
        assert len(frame), table
        missing = [c.key for c in table if c.key not in frame.columns]
        assert not missing, missing
    # a trace whose kernels are costed has roofline points
    pts = analyze(load_trace(ROOT / "sample_traces" / "llama3-8b_h100-sxm_b1_fused.modeled.parquet")).roofline()
    assert len(pts) and tuple(pts.columns) == columns.ROOFLINE.keys
    # the JSON records carry the registry's keys in its order
    doc = report_dict(a)
    assert tuple(doc["phases"][0]) == JSON_PHASE_KEYS
    assert tuple(doc["gap_steps"][0]) == JSON_GAP_STEP_KEYS
    assert tuple(doc["categories"][0]) == JSON_GROUP_KEYS
    # one rank on one GPU: no rank or device column
    assert tuple(doc["steps"][0]) == tuple(k for k in JSON_STEP_KEYS if k not in ("rank", "device"))


def test_every_column_is_documented():
    text = (ROOT / "docs" / "definitions.md").read_text(encoding="utf-8")
    assert columns.markdown() in text, "docs/definitions.md: paste rooftop.present.columns.markdown() under Columns"
    for table in columns.TABLES:
        for c in table:
            assert c.meaning and c.label, (table.name, c.key)


def test_headers_and_formats():
    assert STEPS["span_ns"].header == "span µs" and PHASES["span_ns"].label == "time"  # one key, two tables
    assert STEPS["mfu"].header == "MFU %" and GROUPS["pct_of_roof"].header == "% roof"
    assert GROUPS["time_share"].header == "time %" and STEPS["tflops"].header == "TFLOP/s"
    assert PHASES["tokens_per_s"].words == "tokens/s" and PHASES["mfu"].words == "MFU"
    assert PHASES["mfu"].format(0.1234) == "12.3%" and GAP["measured_ns"].format(1_500_000) == "1.5 ms"
    assert GROUPS["peak_flops"].format(989.4e12) == "989 TFLOP/s" and PHASES["bytes"].format(2.5e9) == "2.5 GB"
    assert PHASES["bound"].format(None) == "—" and PHASES["tflops"].format(float("nan")) == "—"
    assert PHASES["bound"].format("memory") == "memory"
    with pytest.raises(ValueError):
        Column("x", "x", "", "colour", "no such kind")
    with pytest.raises(KeyError):
        PHASES["no_such_column"]


def test_is_unknown():
    for v in (None, float("nan"), np.nan, np.float32("nan"), pd.NA, pd.NaT):
        assert is_unknown(v), v
    for v in (0, 0.0, -1, 1.5, np.int64(0), "", "memory", np.array([1.0, np.nan]), [1]):
        assert not is_unknown(v), v
    assert fmt_value(pd.NA, "pct") == fmt_value("abc", "num") == "—"


def test_one_ridge():
    h100 = devices.by_key("h100-sxm")
    assert devices.ridge_point(989.4e12, 3.35e12) == pytest.approx(295.343, abs=1e-3)  # 989.4 / 3.35
    assert h100.ridge() == pytest.approx(989.4e12 / 3.35e12)
    p = devices.Peaks(flops=989.4e12, bw=3.35e12, source="datasheet")
    assert p.ridge == h100.ridge()
    for flops, bw in ((None, 3e12), (1e15, None), (0, 3e12), (1e15, 0), (float("nan"), 3e12), (1e15, float("inf"))):
        assert devices.ridge_point(flops, bw) is None
    arr = devices.ridge_point(np.array([1e15, np.nan, 0.0]), 2e12)  # per-group peaks: int8 has none
    assert arr[0] == 500 and math.isnan(arr[1]) and math.isnan(arr[2])
    from tui.widgets.roofline_plot import ridge

    assert ridge({"flops": 989.4e12, "bw": 3.35e12}) == p.ridge and ridge({"flops": None, "bw": 1}) is None


def test_core_helpers_the_tui_reads_instead_of_filtering(tmp_path):
    """first_rank, group_point and group_stalls: what the Timeline and the kernel detail used to
    derive by hand from the rows."""
    from rooftop.trace import write_trace
    from test_analysis import k

    for r, dur in ((1, 1000), (3, 3000)):  # ranks 1 and 3: the lowest is not 0
        rows = [k("gemv", 0, dur, "decode/step=0", model_bytes=3.35e6, model_flops=1e6),
                k("gemv", 5000, dur, "decode/step=1", model_bytes=3.35e6, model_flops=1e6)]
        write_trace(tmp_path / "run" / f"rank={r}" / "trace.parquet", rows, {"device": {"name": "NVIDIA H100 80GB HBM3"}})
    a = analyze(load_trace(tmp_path / "run"))
    assert a.first_rank == 1
    p = a.group_point("gemv", rank=3)
    assert len(p) == 1 and p["achieved_flops"].iloc[0] == pytest.approx(2e6 / 6000e-9)  # 2 MFLOP in 6 µs
    assert p["ai"].iloc[0] == pytest.approx(1e6 / 3.35e6)
    whole = a.group_point("gemv")
    assert list(whole["phase"]) == ["decode"] and whole["time_ns"].iloc[0] == 8000  # both ranks' 4 launches
    assert a.group_point("no such kernel").empty
    assert a.group_stalls("gemv") is None  # no counters: no stalls, not zeros
