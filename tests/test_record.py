"""collectors.capture.record (the Recorder) and collectors.capture.torch_profiler, on CPU.

The Recorder's rows come from the profiler's exported Kineto file through the Kineto importer; how
that importer attributes GPU work (launches, graphs, steps) is tested on fabricated Kineto files in
tests/test_steps.py and tests/test_kineto.py. The real-CUDA test is marked `gpu`.
"""
import pytest

torch = pytest.importorskip("torch")

from collectors.capture import record as record_mod  # noqa: E402
from collectors.capture.record import Recorder  # noqa: E402
from collectors.capture.torch_profiler import merge_steps  # noqa: E402
from collectors.readers.importers import import_any  # noqa: E402
from rooftop.llm.shapes import preset  # noqa: E402
from rooftop.trace import TraceError, load_trace, write_trace  # noqa: E402


def _work(rec, steps=2):
    a, w = torch.randn(4, 32), torch.randn(64, 32)
    with rec.step("prefill", 0, batch=1, context=4, new_tokens=4):
        with rec.layer(0), rec.range("mlp"):
            torch.nn.functional.linear(a, w)
    with rec.phase("decode"):
        for i in range(steps):
            with rec.step("decode", i, batch=1, context=5 + i, new_tokens=1):
                with rec.layer(1), rec.range("attn"):
                    torch.mm(a[:1], w.t())


def test_recorder_writes_paths_steps_and_meta(tmp_path):
    out = tmp_path / "r.parquet"
    with Recorder(out, model=preset("tiny"), workload={"batch": 1, "dtype": "fp32"}) as rec:
        _work(rec)
    t = load_trace(out)
    ev = t.events
    ops = ev[ev["kind"] == "op"]
    linear = ops[ops["name"] == "aten::linear"].iloc[0]
    assert linear["path"] == "prefill/step=0/layer=0/mlp"
    assert (linear["phase"], linear["step"], linear["layer"]) == ("prefill", 0, 0)
    assert linear["model_flops"] == 2 * 4 * 64 * 32
    mms = ops[ops["name"] == "aten::mm"]
    assert mms["path"].tolist() == ["decode/step=0/layer=1/attn", "decode/step=1/layer=1/attn"]
    assert mms["step"].tolist() == [0, 1] and set(mms["phase"]) == {"decode"}
    ranges = set(ev.loc[ev["kind"] == "range", "path"])
    assert {"prefill", "prefill/step=0", "decode", "decode/step=1", "decode/step=1/layer=1/attn"} <= ranges
    # One decode range, not one per step: step() reuses the open phase.
    assert (ev.loc[ev["kind"] == "range", "name"] == "decode").sum() == 1
    assert [s["phase"] for s in t.meta["steps"]] == ["prefill", "decode", "decode"]
    declared = {"phase": "decode", "index": 1, "batch": 1, "new_tokens": 1, "context": 6}
    assert {k: t.meta["steps"][2][k] for k in declared} == declared
    assert t.meta["steps"][2]["marker"] == "step=1"  # the importer found the step in the profiler's file
    assert t.meta["model"]["layers"] == 2 and t.meta["model"]["dtype"] == "fp32"
    assert t.meta["incomplete"] is False and t.meta["modeled"] is False
    assert t.meta["device"]["name"].startswith("CPU")
    assert t.meta["source"]["torch"] == torch.__version__


@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt()])
def test_interrupted_run_leaves_a_loadable_incomplete_trace(tmp_path, exc):
    out = tmp_path / "partial.parquet"
    with pytest.raises(type(exc)):
        with Recorder(out) as rec:
            _work(rec, steps=1)
            with rec.step("decode", 1):
                raise exc
    t = load_trace(out)
    assert t.meta["incomplete"] is True
    assert any(type(exc).__name__ in w for w in t.meta["warnings"])
    assert (t.events["name"] == "aten::mm").sum() == 1
    # The range that was open when the exception hit is closed and recorded.
    assert "decode/step=1" in set(t.events["path"])


def test_unwritable_path_fails_before_the_block_runs(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    ran = []
    with pytest.raises(TraceError) as info:
        with Recorder(blocker / "out.parquet"):
            ran.append(1)
    assert not ran
    assert "out.parquet" in str(info.value) and "\n" not in str(info.value)


def test_ranges_are_also_nvtx_ranges(tmp_path, monkeypatch):
    calls = []

    class FakeNvtx:
        def push_range(self, name):
            calls.append(("push", name))

        def pop_range(self):
            calls.append(("pop",))

    monkeypatch.setattr(record_mod, "_nvtx", FakeNvtx())
    with Recorder(tmp_path / "n.parquet") as rec:
        with rec.step("prefill", 0), rec.layer(3), rec.range("attn"):
            pass
    assert calls == [("push", "prefill"), ("push", "step=0"), ("push", "layer=3"), ("push", "attn"),
                     ("pop",), ("pop",), ("pop",), ("pop",)]


# --- one path: the profiler's own Kineto file, read by the Kineto importer --------------------

def test_rows_are_the_importers_rows_of_the_exported_file(tmp_path):
    """The Recorder's rows are what `rooftop import` makes of the profiler's Kineto JSON, row for row."""
    out, kept = tmp_path / "r.parquet", tmp_path / "kept.pt.trace.json"
    with Recorder(out, kineto=kept) as rec:
        _work(rec)
    rows, found = import_any(kept)
    imported = load_trace(write_trace(tmp_path / "i.parquet", rows, found)).events
    recorded = load_trace(out).events
    assert len(recorded) and recorded.equals(imported)
    # what only the Recorder knows is in the metadata, on top of what the file says
    t = load_trace(out)
    assert t.meta["source"]["tool"] == "rooftop.Recorder" and t.meta["source"]["kineto"]["tool"] == "kineto"
    assert t.meta["origin_ns"] == found["origin_ns"]


def test_merge_steps_keeps_windows_and_adds_declared_workload():
    found = [{"phase": "decode", "index": 0, "gpu_start_ns": 5, "window": "launches"},
             {"phase": "decode", "index": 1, "gpu_start_ns": 9, "window": "launches"}]
    declared = [{"phase": "decode", "index": 1, "batch": 4, "context": 130},
                {"phase": "decode", "index": 7, "batch": 4}]
    merged = merge_steps(found, declared)
    assert merged == [found[0], {**found[1], "batch": 4, "context": 130},
                      {"phase": "decode", "index": 7, "batch": 4}]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_recorder_on_cuda_records_kernels(tmp_path):
    out = tmp_path / "cuda.parquet"
    a = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(512, 512, device="cuda", dtype=torch.bfloat16)
    with Recorder(out, device="cuda") as rec:
        with rec.step("decode", 0), rec.layer(0), rec.range("mlp"):
            torch.mm(a, w)
    t = load_trace(out)
    k = t.timed()
    assert (k["kind"] == "kernel").any()
    gemm = k[k["op"] == "aten::mm"]
    assert set(gemm["path"]) == {"decode/step=0/layer=0/mlp"}
    assert gemm["model_flops"].sum() == pytest.approx(2 * 256 * 512 * 512)
    assert gemm["stream"].notna().all() and gemm["grid"].notna().all()
