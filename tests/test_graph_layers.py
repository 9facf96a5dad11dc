"""Layers of CUDA-graph replays from their structure (rooftop.analysis.graphs), on hand-built
replays whose layers are known by construction, then on the vLLM piecewise-graph capture."""
from __future__ import annotations

import numpy as np
import pandas as pd

from rooftop.analysis import graphs


def _rows(names, corr, layer=None, step=0):
    n = len(names)
    return pd.DataFrame({"kind": "kernel", "name": names, "start_ns": np.arange(n) * 10, "dur_ns": 5,
                         "correlation": corr, "device": 0, "stream": 7, "phase": "decode", "step": step,
                         "layer": pd.array(layer if layer is not None else [None] * n, dtype="Int32")})


def test_piecewise_replays_are_layers_in_step_order():
    # prep (eager), replay 10, attention (eager), replay 11, attention, replay 12, sampling (eager)
    names = ["prep", "a", "b", "attn", "a", "b", "attn", "a", "b", "sample"]
    corr = [1, 10, 10, 2, 11, 11, 3, 12, 12, 4]
    layer, source = graphs.replay_layers(_rows(names, corr))
    got = [None if np.isnan(x) else int(x) for x in layer]
    assert got == [None, 0, 0, 0, 1, 1, 1, 2, 2, None]
    assert source[1] == graphs.PIECEWISE and source[0] is None and source[9] is None
    assert graphs.replays(_rows(names, corr)).tolist() == [False, True, True, False, True, True, False, True, True, False]


def test_a_whole_model_graph_repeats_once_per_layer():
    body = ["norm", "qkv", "attn", "mlp"] * 4
    names = ["embed"] + body + ["lm_head", "sample"]
    layer, source = graphs.replay_layers(_rows(names, [7] * len(names)))
    got = [None if np.isnan(x) else int(x) for x in layer]
    assert got == [None] + [i // 4 for i in range(16)] + [None, None]
    assert set(source[1:17]) == {graphs.WHOLE}
    assert graphs.period(pd.factorize(np.array(["x", "y", "z", "w", "v"]))[0]) is None


def test_layers_the_trace_names_are_kept():
    names = ["a", "b", "a", "b"]
    rows = _rows(names, [10, 10, 11, 11], layer=[5, None, None, None])
    layer, source = graphs.replay_layers(rows)
    assert layer[0] == 5 and source[0] == "trace" and layer[2] == 1
    out = graphs.with_layers(rows)
    assert out["layer"].tolist() == [5, 0, 1, 1] and out["layer_source"].tolist()[1] == graphs.PIECEWISE
    eager = _rows(names, [1, 2, 3, 4])
    assert graphs.with_layers(eager) is eager  # no replay: the same frame, no layer invented


def test_vllm_piecewise_capture_has_every_layer_on_most_decode_kernels(fixtures_dir):
    from collectors.open import open_trace
    from rooftop.analysis import Analysis
    path = fixtures_dir / "traces" / ("Navi-AI-Lab__nvllm__benchmarks__nvllm__traces__cute_paged_attn__2026-04-13-nsys__"
                                      "rank0.1776116491109655086.pt.trace.json.gz")
    a = Analysis(open_trace(str(path), None))
    d = a.timed[a.timed["phase"] == "decode"]
    # 65 cudaGraphLaunch per decode step (the trace's own count): 65 pieces, each a layer
    assert d["layer"].notna().mean() > 0.8
    per_step = d.groupby("step")["layer"].nunique()
    assert (per_step == 65).all()
    assert set(d["layer_source"].dropna()) == {graphs.PIECEWISE}
    lay = a.layers
    assert len(lay) == 65 and (lay["steps"] == per_step.size).all()
