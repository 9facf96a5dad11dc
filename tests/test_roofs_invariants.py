"""One invariants test over every report the suite can produce (issue 33, item 8): the shipped
sample traces, every real capture in ../shared/fixtures, and synthetic traces built for the rules
(fp32 CUDA-core GEMMs, int8 tensor work, a split mix, thin coverage, a range-profiler trace).

On each: no peak above the device's dense datasheet peak, no utilization above 1, no rate stated
where its coverage says unknown (unknown is never a number, never 0), ">=" on every rate whose
coverage is below full in the report text and the TUI's phase table alike, and a phase verdict that
agrees with the time-weighted verdicts of its kernel groups.
"""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from rooftop.analysis import analyze
from rooftop.analysis.bounds import BOUNDS
from rooftop.analysis.physics import violations
from rooftop.hardware.gpus import PHYSICS_SLACK
from rooftop.present.format import FULL_COVERAGE, fmt_bounded, fmt_tera
from rooftop.present.render import render_report
from rooftop.present.report import report_dict
from rooftop.trace import load_trace, write_trace

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("ROOFTOP_FIXTURES") or ROOT.parent / "shared" / "fixtures")
SAMPLES = sorted((ROOT / "sample_traces").glob("*.parquet"))
CAPTURES = sorted(p for sub in ("traces", "ncu") for p in (FIXTURES / sub).glob("*") if p.is_file())
H100 = "NVIDIA H100 80GB HBM3"


def k(name, start, dur, path="prefill/step=0", **kw):
    return dict(kind="kernel", name=name, start_ns=start, dur_ns=dur, path=path, device=0, stream=7, **kw)


def _synthetic(tmp: Path, which: str):
    meta = {"device": {"name": H100}, "workload": {"batch": 1}}
    if which == "fp32-gemm":
        f = 0.21 * 67e12 * 88e-6
        rows = [k("ampere_sgemm_128x64_tn", 0, 88_000, model_flops=f, model_bytes=f / 118),
                k("vectorized_elementwise_kernel<bf16>", 88_000, 12_000, model_flops=1e6, model_bytes=2e7)]
    elif which == "int8":
        rows = [k("cutlass_kernel", 0, 10_000, counters=True, dtype="int8", int_ops=1e10, dram_read=1e6, dram_write=1e6),
                k("int8_gemm_i8", 20_000, 10_000, path="decode/step=0", model_bytes=2e6)]
    elif which == "split":
        rows = [k("ampere_sgemm_128x64_tn", 0, 50_000, model_flops=0.5 * 67e12 * 50e-6, model_bytes=1e6),
                k("vectorized_elementwise_kernel<bf16>", 50_000, 50_000, model_flops=1e6, model_bytes=1.3e8)]
    elif which == "thin":
        rows = [k("gemv_bf16", i * 10_000, 5_000, path=f"decode/step={i}", **({"model_bytes": 1e7} if i < 2 else {}))
                for i in range(3)]
    elif which == "range-profiler":
        from collectors.open import open_trace

        ev = [{"ph": "X", "cat": "cuda_profiler_range", "name": f"ampere_sgemm_{i}", "pid": 0, "tid": 0,
               "ts": 100.0 + 50 * i, "dur": 50.0, "args": {"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 1e6}}
              for i in range(4)]
        path = tmp / "range.json.gz"
        with gzip.open(path, "wt") as fh:
            json.dump({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-40GB",
                                                                  "computeMajor": 8, "computeMinor": 0, "numSms": 108,
                                                                  "totalGlobalMem": 42505273344}], "traceEvents": ev}, fh)
        return open_trace(path)
    else:
        raise ValueError(which)
    return load_trace(write_trace(tmp / f"{which}.parquet", rows, meta))


SYNTHETIC = ("fp32-gemm", "int8", "split", "thin", "range-profiler")
CASES = ([pytest.param(("sample", p), id=p.name) for p in SAMPLES]
         + [pytest.param(("capture", p), id=p.name[:60]) for p in CAPTURES]
         + [pytest.param(("synthetic", s), id=s) for s in SYNTHETIC])


def _trace(case, tmp_path):
    kind, what = case
    if kind == "sample":
        return load_trace(what)
    if kind == "capture":
        from collectors.open import open_trace

        return open_trace(what)
    return _synthetic(tmp_path, what)


def _phase_cells(a) -> list[dict]:
    """The TUI overview's phase table cells, by header."""
    from rooftop.present.overview import OverviewData
    from tui.screens.overview import PhaseTable

    a.phases
    table = PhaseTable(OverviewData.of_analysis(a).phases)  # what the Overview renders (the document's records)
    table.style_of = lambda name: ""
    table.update = lambda renderable: None
    table.on_mount()
    cols = {c.header: list(c.cells) for c in table.table.columns}
    return [{h: cells[i] for h, cells in cols.items()} for i in range(len(a.phases))]


@pytest.mark.parametrize("case", CASES)
def test_every_report_respects_physics_and_says_unknown(case, tmp_path):
    a = analyze(_trace(case, tmp_path))
    # 1. peaks and utilizations within physics; no number stated where coverage says unknown
    assert violations(a) == []
    doc = report_dict(a)
    text = render_report(doc)
    tui = _phase_cells(a) if len(a.phases) else []
    for i, ph in enumerate(doc["phases"]):
        for util, rate, status, cov in (("mbu", "tbps", "mbu_status", "bytes_coverage"),
                                        ("mfu", "tflops", "mfu_status", "flops_coverage")):
            c = ph.get(cov)
            # 2. unknown is never 0 (nor any number): below the minimum coverage the value is null
            if ph.get(status) == "unknown":
                assert ph.get(util) is None and ph.get(rate) is None, (ph["phase"], util)
            # 3. ">=" wherever coverage is below full, the same cell in the report and the TUI
            if ph.get(util) is not None:
                cell = fmt_bounded(ph[util], ph.get(status), None, c)
                assert cell.startswith(">=") == (c is not None and c < FULL_COVERAGE or ph.get(status) == "lower bound")
                assert tui[i][util.upper()] == cell
                assert cell in text
            if ph.get(rate) is not None:
                unit = "TFLOP/s" if rate == "tflops" else "TB/s"
                cell = fmt_bounded(ph[rate], ph.get(status), lambda v: fmt_tera(v, unit), c)
                assert tui[i][unit] == cell and cell in text
        # 4. the phase verdict agrees with the time-weighted verdicts of its kernel groups
        verdict = ph.get("bound")
        if verdict in BOUNDS:
            groups = a.groups(phase=ph["phase"])
            judged = groups[groups["bound"].isin(BOUNDS)]
            share = judged.groupby("bound")["time_ns"].sum()
            assert len(share) and share.idxmax() == verdict, (ph["phase"], verdict, share.to_dict())
        mix = ph.get("bound_mix")
        if mix is not None:
            shares = [mix[b]["time_share"] or 0.0 for b in BOUNDS]
            assert sum(shares) == pytest.approx(1.0) or verdict is None
            assert verdict == mix["verdict"]
            for b in BOUNDS:  # a judged kernel's share of its own peak is never above physics
                p = mix[b]["peak_share"]
                assert p is None or p <= PHYSICS_SLACK
    # every group rate above its roof is said to be so, never shown as evidence
    g = a.groups()
    if len(g) and "pct_of_roof" in g and (pd.to_numeric(g["pct_of_roof"], errors="coerce") > 1.05).any():
        assert _above_roof_said(a)


def _above_roof_said(a) -> bool:
    return any(f.id == "above-roof" for f in a.findings)


def test_the_cases_cover_samples_captures_and_synthetic():
    assert len(SAMPLES) >= 5 and len(SYNTHETIC) == 5
    if FIXTURES.is_dir():
        assert len(CAPTURES) >= 10
