"""collectors.capture.record (the Recorder) and collectors.capture.torch_profiler (events -> rows), on CPU.

The GPU half of the conversion is tested on fabricated events with the attributes the profiler's
Kineto results have, since this machine has no GPU; the real-CUDA test is marked `gpu`.
"""
import pytest

torch = pytest.importorskip("torch")

from collectors.capture import record as record_mod  # noqa: E402
from collectors.capture.record import Recorder  # noqa: E402
from collectors.capture.torch_profiler import RawEvent, convert  # noqa: E402
from rooftop.models import preset  # noqa: E402
from rooftop.trace import TraceError, load_trace  # noqa: E402


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
    assert t.meta["steps"][2] == {"phase": "decode", "index": 1, "batch": 1, "new_tokens": 1, "context": 6}
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


# --- the GPU path, on fabricated Kineto events -------------------------------------------------

def _ev(name, kind, start, dur, **kw):
    return RawEvent(name=name, kind=kind, start_ns=start, dur_ns=dur, **kw)


def _gpu_session():
    T = 7  # CPU thread
    return [
        _ev("decode", "user_annotation", 1000, 9000, thread=T, correlation=1),
        _ev("step=0", "user_annotation", 1100, 8000, thread=T, correlation=2),
        _ev("layer=0", "user_annotation", 1200, 3000, thread=T, correlation=3),
        _ev("attn", "user_annotation", 1300, 2800, thread=T, correlation=4),
        _ev("aten::mm", "cpu_op", 1400, 500, thread=T, correlation=10,
            shapes=[[1, 4096], [4096, 4096]], dtypes=["c10::BFloat16", "c10::BFloat16"]),
        _ev("cudaLaunchKernel", "cuda_runtime", 1500, 100, thread=T, correlation=900, linked=10),
        _ev("cudaLaunchKernel", "cuda_runtime", 1700, 100, thread=T, correlation=901, linked=10),
        _ev("aten::add", "cpu_op", 2000, 300, thread=T, correlation=11, shapes=[[1, 4096], [1, 4096]]),
        _ev("cudaLaunchKernel", "cuda_runtime", 2100, 50, thread=T, correlation=902, linked=11),
        # A replayed CUDA graph under the step range (no op encloses it).
        _ev("cudaGraphLaunch", "cuda_runtime", 5000, 80, thread=T, correlation=903, linked=2),
        _ev("aten::copy_", "cpu_op", 6000, 200, thread=T, correlation=12),
        _ev("cudaMemcpyAsync", "cuda_runtime", 6050, 40, thread=T, correlation=904),
        # GPU activities (absolute ns; device 0, stream 7).
        _ev("gemv_splitk", "kernel", 3000, 300, correlation=900, linked=10, device=0, stream=7,
            metadata={"grid": [128, 1, 1], "block": [256, 1, 1], "registers per thread": 90,
                      "shared memory": 1024}),
        _ev("splitk_reduce", "kernel", 3300, 100, correlation=901, linked=10, device=0, stream=7),
        _ev("vectorized_elementwise_kernel", "kernel", 3500, 20, correlation=902, linked=11, device=0, stream=7),
        _ev("graph_kernel_a", "kernel", 5200, 40, correlation=903, linked=2, device=0, stream=7),
        _ev("graph_kernel_b", "kernel", 5240, 40, correlation=903, linked=2, device=0, stream=7),
        # No linked id: found through the runtime call with the same CUPTI correlation.
        _ev("Memcpy DtoD", "gpu_memcpy", 6500, 30, correlation=904, device=0, stream=7),
        _ev("decode", "gpu_user_annotation", 3000, 2300, device=0, stream=7),
        _ev("orphan", "kernel", 8000, 10, correlation=999, device=0, stream=7),
    ]


def test_gpu_kernels_are_attributed_and_costed():
    rows, warnings = convert(_gpu_session())
    by = {r["name"]: r for r in rows if r["kind"] != "range"}
    assert {r["kind"] for r in rows} == {"range", "kernel", "memcpy"}  # no op rows on GPU runs
    gemv = by["gemv_splitk"]
    assert gemv["path"] == "decode/step=0/layer=0/attn" and gemv["op"] == "aten::mm"
    assert (gemv["device"], gemv["stream"], gemv["correlation"]) == (0, 7, 900)
    assert gemv["grid"] == [128, 1, 1] and gemv["block"] == [256, 1, 1]
    assert gemv["registers"] == 90 and gemv["shared_mem"] == 1024
    assert gemv["start_ns"] == 2000 and gemv["dur_ns"] == 300  # origin: the first event (1000)
    # aten::mm [1x4096]@[4096x4096] bf16: 2*4096*4096 FLOPs split 300:100 by duration.
    total_f, total_b = 2.0 * 4096 * 4096, 2.0 * (4096 + 4096 * 4096 + 4096)
    assert gemv["model_flops"] == pytest.approx(0.75 * total_f)
    assert by["splitk_reduce"]["model_flops"] == pytest.approx(0.25 * total_f)
    assert gemv["model_bytes"] + by["splitk_reduce"]["model_bytes"] == pytest.approx(total_b)
    assert by["vectorized_elementwise_kernel"]["op"] == "aten::add"
    assert by["vectorized_elementwise_kernel"].get("model_flops") is None
    # Graph replay: attributed to the enclosing step range, op = the runtime call.
    for k in ("graph_kernel_a", "graph_kernel_b"):
        assert by[k]["path"] == "decode/step=0" and by[k]["op"] == "cudaGraphLaunch"
    assert by["Memcpy DtoD"]["path"] == "decode/step=0" and by["Memcpy DtoD"]["op"] == "aten::copy_"
    assert by["orphan"]["path"] is None
    assert warnings and "1 GPU activities" in warnings[0]
    assert [r["id"] for r in rows] == list(range(len(rows)))


def test_gpu_rows_load_as_a_trace(tmp_path):
    from rooftop.trace import write_trace
    rows, _ = convert(_gpu_session())
    write_trace(tmp_path / "g.parquet", rows, {"steps": []})
    t = load_trace(tmp_path / "g.parquet")
    timed = t.timed()
    assert set(timed["kind"]) == {"kernel", "memcpy"}
    assert timed["model_flops"].sum() == pytest.approx(2.0 * 4096 * 4096)
    assert timed.loc[timed["name"] == "gemv_splitk", "layer"].iloc[0] == 0


def test_convert_nests_by_time_per_thread():
    evs = [_ev("outer", "user_annotation", 0, 100, thread=1, correlation=1),
           _ev("aten::linear", "cpu_op", 10, 50, thread=1, correlation=2, shapes=[[2, 3], [4, 3], []],
               dtypes=["float", "float", ""]),
           _ev("aten::mm", "cpu_op", 20, 30, thread=1, correlation=3),
           _ev("aten::mul", "cpu_op", 10, 5, thread=2, correlation=4)]  # other thread: not nested
    rows, _ = convert(evs)
    ops = {r["name"]: r for r in rows if r["kind"] == "op"}
    assert set(ops) == {"aten::linear", "aten::mul"}  # mm is inside linear: not a separate op row
    assert ops["aten::linear"]["path"] == "outer" and ops["aten::linear"]["model_flops"] == 2 * 2 * 4 * 3
    assert ops["aten::mul"]["path"] is None


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
