"""Scale: results on a large trace equal results computed on its pieces (not timing).

- A ~50k-kernel decode trace: per-step tables of the whole equal those of each half loaded on its
  own; phase and kernel-group totals of the whole are the sums over the halves.
- A multi-rank directory: per-rank phase tables equal each rank file analysed alone; the straggler
  is the rank with the longest step; DuckDB over `rank=*/` gives the per-rank totals of pandas.
- The Kineto importer on N replicated blocks gives N x the kernels and N x their summed duration.
"""
from __future__ import annotations

import gzip
import json
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

from bench import make_kineto, synth_trace
from rooftop.analysis import analyze
from rooftop.trace.steps import parse_paths
from rooftop.trace import load_trace, write_trace

STEPS, LAYERS = 170, 32  # 170 x 32 x 9 = 48,960 kernels
STEP_COLS = ["kernels", "start_ns", "end_ns", "span_ns", "busy_ns", "idle_ns", "kernel_ns", "flops", "bytes", "mbu"]


def _jittered(steps: int, seed: int) -> pd.DataFrame:
    """The synthetic decode loop with per-kernel durations varied, so sums are not trivially equal."""
    f = synth_trace.decode_frame(steps, LAYERS)
    rng = np.random.default_rng(seed)
    f["dur_ns"] = (f["dur_ns"] * rng.uniform(0.5, 1.5, len(f))).astype("int64")
    return f


@pytest.fixture(scope="module")
def pieces(tmp_path_factory):
    d = tmp_path_factory.mktemp("scale")
    whole = _jittered(STEPS, 1)
    half = STEPS // 2
    a, b = whole[whole["step"] < half], whole[whole["step"] >= half]
    meta = synth_trace.meta(STEPS)
    meta_a = {**meta, "steps": meta["steps"][:half]}
    meta_b = {**meta, "steps": meta["steps"][half:]}
    return (analyze(load_trace(write_trace(d / "whole.parquet", whole, meta))),
            analyze(load_trace(write_trace(d / "a.parquet", a, meta_a))),
            analyze(load_trace(write_trace(d / "b.parquet", b, meta_b))))


def test_trace_is_large_and_many_steps(pieces):
    whole, a, b = pieces
    assert len(whole.timed) == STEPS * LAYERS * 9 == len(a.timed) + len(b.timed)
    assert len(whole.steps) == STEPS and len(a.steps) + len(b.steps) == STEPS


def test_step_results_of_whole_equal_those_of_each_half(pieces):
    whole, a, b = pieces
    got = whole.steps.set_index(["phase", "step"])[STEP_COLS]
    want = pd.concat([a.steps, b.steps]).set_index(["phase", "step"])[STEP_COLS]
    pd.testing.assert_frame_equal(got.sort_index(), want.sort_index(), check_dtype=False)
    # span is the definition: last kernel end - first kernel start of the step (hand check on one step)
    rows = whole.timed[whole.timed["step"] == 7]
    assert got.loc[("decode", 7), "span_ns"] == (rows["start_ns"] + rows["dur_ns"]).max() - rows["start_ns"].min()


def test_phase_totals_of_whole_are_sums_over_halves(pieces):
    whole, a, b = pieces
    w = whole.phases.set_index("phase").loc["decode"]
    pa_, pb = a.phases.set_index("phase").loc["decode"], b.phases.set_index("phase").loc["decode"]
    for col in ("steps", "kernels", "span_ns", "busy_ns", "kernel_ns", "idle_ns"):
        assert w[col] == pa_[col] + pb[col], col
    for col in ("flops", "bytes", "tokens"):
        assert w[col] == pytest.approx(pa_[col] + pb[col], rel=1e-12), col
    # MBU of the whole = all bytes / all span / peak, from the halves' own numbers
    peak = whole.peaks.bw
    assert w["mbu"] == pytest.approx((pa_["bytes"] + pb["bytes"]) / ((pa_["span_ns"] + pb["span_ns"]) / 1e9) / peak)


def test_group_totals_of_whole_are_sums_over_halves(pieces):
    whole, a, b = pieces
    g = whole.groups().set_index("key")
    ga, gb = a.groups().set_index("key"), b.groups().set_index("key")
    assert set(g.index) == set(ga.index) == set(gb.index)
    for col in ("count", "time_ns"):
        assert (g[col] == ga[col] + gb[col].reindex(ga.index)).reindex(g.index).all(), col
    for col in ("flops", "bytes"):
        known = g[col].notna()
        np.testing.assert_allclose(g.loc[known, col], (ga[col] + gb[col]).reindex(g.index)[known], rtol=1e-12)
    assert g["time_share"].sum() == pytest.approx(1.0)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """Two ranks of 20 steps with different jitter, written hive style (`rank=N/trace.parquet`)."""
    d = tmp_path_factory.mktemp("ranks")
    frames = {r: _jittered(20, 10 + r) for r in (0, 1)}
    for r, f in frames.items():
        write_trace(d / f"rank={r}" / "trace.parquet", f, synth_trace.meta(20))
    return d, frames


def test_multi_rank_tables_equal_each_rank_alone(ranks):
    d, frames = ranks
    run = analyze(load_trace(d))
    assert run.trace.ranks == [0, 1]
    per_rank = run.rank_phases.set_index(["rank", "phase"])
    for r in (0, 1):
        alone = analyze(load_trace(d / f"rank={r}" / "trace.parquet")).phases.set_index("phase")
        for col in ("steps", "kernels", "span_ns", "busy_ns"):
            assert per_rank.loc[(r, "decode"), col] == alone.loc["decode", col], (r, col)
    # straggler per step: the rank whose step span is longest, computed here from the raw rows
    spans = {r: f.assign(end=f["start_ns"] + f["dur_ns"]).groupby("step").agg(lo=("start_ns", "min"), hi=("end", "max"))
             for r, f in frames.items()}
    span = pd.DataFrame({r: s["hi"] - s["lo"] for r, s in spans.items()})
    rs = run.rank_steps.set_index("step")
    assert (rs["straggler"] == span.idxmax(axis=1).reindex(rs.index)).all()
    assert np.allclose(rs["max_ns"] - rs["min_ns"], (span.max(axis=1) - span.min(axis=1)).reindex(rs.index))


def test_duckdb_over_rank_directory_matches_load_trace(ranks):
    duckdb = pytest.importorskip("duckdb")
    d, _ = ranks
    sql = (f"SELECT rank, count(*) AS kernels, sum(dur_ns) AS dur, sum(model_bytes) AS bytes "
           f"FROM read_parquet('{d}/rank=*/*.parquet', hive_partitioning = true) "
           f"WHERE kind = 'kernel' GROUP BY rank ORDER BY rank")
    got = duckdb.sql(sql).df()
    ev = load_trace(d).events
    ev = ev[ev["kind"] == "kernel"]
    want = ev.groupby("rank").agg(kernels=("dur_ns", "size"), dur=("dur_ns", "sum"), bytes=("model_bytes", "sum"))
    assert got["rank"].astype(int).tolist() == [0, 1]
    assert got["kernels"].tolist() == want["kernels"].tolist()
    assert got["dur"].astype("int64").tolist() == want["dur"].astype("int64").tolist()
    np.testing.assert_allclose(got["bytes"].astype(float), want["bytes"].astype(float), rtol=1e-12)


# --- Kineto import of replicated blocks -----------------------------------------------------------

def _plain_kernels(path) -> tuple[int, int]:
    """Independent reader: kernel count and summed duration (ns, exact decimals) via json."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as fh:
        doc = json.load(fh, parse_float=Decimal)
    k = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"]
    return len(k), sum(int(Decimal(str(e["dur"])) * 1000) for e in k)


@pytest.mark.parametrize("copies", [1, 7])
def test_kineto_replicated_synthetic_blocks_scale_exactly(tmp_path, copies):
    from collectors.readers.kineto import read_kineto

    block = make_kineto.synthetic_block(layers=2)
    one = make_kineto.write_trace(block, 1, tmp_path / "one.json")
    many = make_kineto.write_trace(block, copies, tmp_path / "many.json.gz", gz=True)
    k1, d1 = _plain_kernels(one)
    assert (k1, d1) == (block.kernels, block.kernel_dur_ns) == (18, block.kernel_dur_ns)
    rows, _ = read_kineto(many)
    kern = rows[rows["kind"] == "kernel"]
    assert len(kern) == copies * k1
    assert int(kern["dur_ns"].sum()) == copies * d1
    # every copy is its own step, with its own correlation ids, and keeps its ops and paths
    steps = parse_paths(kern["path"])["step"]
    assert sorted(steps.dropna().astype(int).unique()) == list(range(copies))
    assert kern["correlation"].nunique() == copies * k1
    assert kern["op"].notna().all()
    assert kern["path"].str.contains(r"decode/step=\d+/layer=\d/(?:attn|mlp)$").all()


def test_kineto_replicated_seed_trace_scales_exactly(tmp_path, fixtures_dir):
    from collectors.readers.kineto import read_kineto

    seed = fixtures_dir / "traces" / make_kineto.SEED_NAME
    k1, d1 = _plain_kernels(seed)
    block = make_kineto.seed_block(seed)
    path = make_kineto.write_trace(block, 3, tmp_path / "seed3.json")
    assert _plain_kernels(path) == (3 * k1, 3 * d1)  # the generator itself, checked independently
    rows, _ = read_kineto(path)
    kern = rows[rows["kind"] == "kernel"]
    assert len(kern) == 3 * k1 and int(kern["dur_ns"].sum()) == 3 * d1
    assert kern["correlation"].nunique() == 3 * kern["correlation"].iloc[: k1].nunique()
