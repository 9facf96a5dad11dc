"""Ready for the first GPU (issue 42): every rule of the GPU collector path that a CPU can check.

Bounded counter filters and the budget checked before ncu starts, the README's examples within
it; the memory estimate and its one-line error; the model built on its device in its dtype;
no mask for flash under CUDA graphs, and the backend that ran recorded; fail-fast paths (no GPU,
no nvtx, restricted counters, nothing joined, a hung ncu whose process group is killed); the
parent's model freed before the ncu child; a missing demangler; the Recorder's GPU kernel rows
through the Kineto importer that real traces take.
"""
from __future__ import annotations

import argparse
import gc
import gzip
import os
import re
import subprocess
import sys
import time
import types
from pathlib import Path

import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from collectors.capture import collect, memory, ncu_run  # noqa: E402
from collectors.capture.backends import attention_backends, backend_of  # noqa: E402
from collectors.capture.ncu_run import (DEFAULT_BUDGET_S, EXIT_NO_COUNTERS, check_budget,  # noqa: E402
                                        counters_restricted, estimate_replay_seconds, parse_counter_steps,
                                        run_counters)
from collectors.capture.workloads import llama as llama_mod  # noqa: E402
from collectors.capture.workloads.llama import Llama  # noqa: E402
from collectors.readers.ncu import NcuError  # noqa: E402
from rooftop.llm.shapes import preset  # noqa: E402
from rooftop.trace import load_trace, write_trace  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _args(*argv):
    p = argparse.ArgumentParser()
    collect.add_arguments(p)
    return p.parse_args(list(argv))


# --- counters: bounded filters and the budget ------------------------------------------------------

def test_filters_name_one_layer_of_one_step():
    assert parse_counter_steps(None) == ["decode/step=0/layer=0/"]
    assert parse_counter_steps("decode:0/layer=0") == parse_counter_steps("decode/step=0/layer=0/") \
        == parse_counter_steps("decode/step=0/layer=0") == ["decode/step=0/layer=0/"]
    assert parse_counter_steps("prefill:0/layer=3,decode:1-2/layer=3") == [
        "prefill/step=0/layer=3/", "decode/step=1/layer=3/", "decode/step=2/layer=3/"]
    for bad in ("decode/layer=0", "decode:0/layer=x", "decode:0/layer=0/attn"):
        with pytest.raises(NcuError):
            parse_counter_steps(bad)


def _eager_llama_timeline(layers=32, per_layer=40, steps=3) -> pd.DataFrame:
    """Kernel paths of an eager Llama-3-8B run as the Recorder names them: `per_layer` kernels per
    layer (an eager bf16 layer launches ~35-40: norms, QKV, RoPE, cache writes, SDPA, MLP)."""
    paths = []
    for phase, n in (("prefill", 1), ("decode", steps)):
        for s in range(n):
            paths += [f"{phase}/step={s}/embed"]
            for layer in range(layers):
                half = per_layer // 2
                paths += [f"{phase}/step={s}/layer={layer}/attn"] * half
                paths += [f"{phase}/step={s}/layer={layer}/mlp"] * (per_layer - half)
            paths += [f"{phase}/step={s}/head"] * 3
    return pd.DataFrame({"kind": "kernel", "path": paths})


def test_a_whole_decode_step_is_refused_before_ncu_starts():
    ev = _eager_llama_timeline()
    n, est, why = check_budget(ev, parse_counter_steps("decode:0"), DEFAULT_BUDGET_S)
    assert n == 32 * 40 + 4 and est == estimate_replay_seconds(n) > DEFAULT_BUDGET_S
    assert "over the budget" in why and "decode/step=0/layer=0/: 40 kernel(s)" in why
    n1, est1, ok = check_budget(ev, parse_counter_steps(None), DEFAULT_BUDGET_S)
    assert n1 == 40 and ok is None and est1 <= DEFAULT_BUDGET_S
    n0, _, none = check_budget(ev, parse_counter_steps("decode:7"), DEFAULT_BUDGET_S)
    assert n0 == 0 and "ncu would profile nothing" in none


def test_readme_and_script_counter_examples_are_within_budget():
    ev = _eager_llama_timeline()
    text = (ROOT / "README.md").read_text() + (ROOT / "scripts" / "record_gpu_samples.sh").read_text()
    specs = [m.rstrip(":,") for m in re.findall(r"--counter-steps[ =]([\w:,/=-]+)", text)]
    assert specs, "the README and the script show --counter-steps"
    for spec in specs:
        n, est, why = check_budget(ev, parse_counter_steps(spec), DEFAULT_BUDGET_S)
        assert why is None and est <= DEFAULT_BUDGET_S, (spec, n, est)
    # and on the modeled sample of the same model (its own kernel count per layer)
    sample = load_trace(ROOT / "sample_traces" / "llama3-8b_h100-sxm_b1_fused.modeled.parquet").events
    for spec in specs:
        assert check_budget(sample, parse_counter_steps(spec), DEFAULT_BUDGET_S)[2] is None


def _timeline(path: Path, paths=("decode/step=0/layer=0/attn",) * 3) -> Path:
    rows = [{"id": i, "kind": "kernel", "name": "void cutlass::Kernel<cutlass::gemm::kernel::Gemm<X>>(Params)",
             "path": p, "start_ns": 1000 * i, "dur_ns": 900} for i, p in enumerate(paths)]
    write_trace(path, rows, {"source": {"tool": "rooftop collect"}, "device": {"name": "NVIDIA A100"}})
    return path


def _fake_ncu(tmp_path: Path, body: str) -> str:
    exe = tmp_path / "bin" / "ncu"
    exe.parent.mkdir(exist_ok=True)
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(0o755)
    return str(exe)


def _ncu_args(**kw):
    base = dict(preset="tiny", batch=1, prompt_len=16, gen_len=4, dtype="bf16", attn="flash", cuda_graphs=False,
                device="cuda", counter_steps=None, output="run.parquet")
    base.update(kw)
    return types.SimpleNamespace(**base)


def test_over_budget_never_starts_ncu(tmp_path, capsys):
    trace = _timeline(tmp_path / "run.parquet", ("decode/step=0/layer=0/attn",) * 400)
    marker = tmp_path / "ncu-ran"
    ncu = _fake_ncu(tmp_path, f'touch "{marker}"')
    assert run_counters(_ncu_args(counter_budget=60), trace, ncu=ncu, check_permission=False) == EXIT_NO_COUNTERS
    err = capsys.readouterr().err
    assert "about 400 s" in err and "budget of 60 s" in err and not marker.exists()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return not re.search(r"State:\s+Z", state)  # a zombie is dead (only not reaped yet)


def test_a_hung_ncu_is_stopped_with_its_process_group(tmp_path, capsys):
    trace = _timeline(tmp_path / "run.parquet")
    before = trace.read_bytes()
    pidfile = tmp_path / "child.pid"
    # "ncu" starts the workload (a child that never ends) and waits for it
    ncu = _fake_ncu(tmp_path, f'sleep 300 &\necho $! > "{pidfile}"\nwait')
    t0 = time.monotonic()
    rc = run_counters(_ncu_args(counter_timeout=2), trace, ncu=ncu, check_permission=False)
    assert rc == EXIT_NO_COUNTERS and time.monotonic() - t0 < 60
    assert "ran past 2 s" in capsys.readouterr().err
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)
    assert trace.read_bytes() == before


def test_nothing_joined_exits_non_zero_naming_the_first_unmatched_range(tmp_path, capsys, fixtures_dir):
    pytest.importorskip("ncu_report")
    trace = _timeline(tmp_path / "run.parquet")
    before = trace.read_bytes()
    rep = fixtures_dir / "ncu" / "panjd123__cutlass__report.ncu-rep"  # its kernels sit in `Non-fused-GEMM`...
    ncu = _fake_ncu(tmp_path, 'while [ "$#" -gt 0 ]; do if [ "$1" = "--export" ]; then out="$2"; fi; shift; done\n'
                    f'cp "{rep}" "$out"')
    assert run_counters(_ncu_args(), trace, ncu=ncu, check_permission=False) == EXIT_NO_COUNTERS
    err = capsys.readouterr().err
    assert "none of the 3 profiled kernel(s) joined" in err and "first unmatched range 'Non-fused-GEMM'" in err
    assert trace.read_bytes() == before


def test_restricted_counters_fail_before_the_run(tmp_path):
    params = tmp_path / "params"
    status = tmp_path / "status"
    params.write_text("ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\n")
    status.write_text("Name:\tpython\nCapEff:\t0000000000000000\n")
    assert counters_restricted(params, status, euid=1000)
    assert not counters_restricted(params, status, euid=0)                  # root
    status.write_text("CapEff:\t0000004000000000\n")                         # CAP_PERFMON (bit 38)
    assert not counters_restricted(params, status, euid=1000)
    params.write_text("RmProfilingAdminOnly: 0\n")
    assert not counters_restricted(params, status, euid=1000)
    assert not counters_restricted(tmp_path / "absent", status, euid=1000)  # no driver file: ncu says


def test_no_gpu_and_no_nvtx_fail_fast(monkeypatch):
    cpu_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: False))
    with pytest.raises(SystemExit, match="needs a CUDA GPU.*torch sees none"):
        collect._resolve(_args("--counters"), cpu_torch)
    gpu_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: True))
    from collectors.capture import record
    monkeypatch.setattr(record, "_nvtx", None)
    with pytest.raises(SystemExit, match="needs the `nvtx` package"):
        collect._resolve(_args("--counters"), gpu_torch)
    with pytest.raises(SystemExit, match="needs the `nvtx` package"):
        collect._resolve(_args("--device", "cpu", "--counters-child"), cpu_torch)
    assert collect._resolve(_args("--device", "cpu"), cpu_torch) == ("cpu", "fp32")  # no counters: fine


# --- memory ---------------------------------------------------------------------------------------

def test_memory_estimate_by_hand_and_the_one_line_error():
    cfg = preset("llama3-8b")
    p = memory.plan(cfg, 64, 2048, 16, "bf16", "math")
    assert p.weights == cfg.params() * 2
    assert p.kv_cache == 2 * 32 * 64 * 8 * 2064 * 128 * 2          # 17.3 GB
    assert p.scores == 2 * 64 * 32 * 2048 * 2048 * 4                 # scores + probabilities, fp32
    free = 79e9                                                       # an H100 80GB after the context
    msg = memory.check(cfg, 64, 2048, 16, "bf16", "math", free, "NVIDIA H100 80GB HBM3")
    assert msg and "\n" not in msg and "needs about" in msg and "79.0 GB free on NVIDIA H100" in msg
    b = int(re.search(r"--batch (\d+)", msg).group(1))
    assert memory.fits(cfg, b, 2048, 16, "bf16", "math", free) and not memory.fits(cfg, 2 * b, 2048, 16, "bf16", "math", free)
    assert "--attn flash" in msg and memory.check(cfg, 1, 2048, 16, "bf16", "flash", free) is None
    assert "smaller --preset" in memory.check(cfg, 1, 16, 0, "bf16", "flash", 1e9)


def test_collect_checks_memory_before_building_the_model(monkeypatch, capsys):
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(mem_get_info=lambda: (20e9, 80e9),
                                                            get_device_name=lambda: "NVIDIA H100 PCIe"))
    msg = collect._check_memory(preset("llama3-8b"), _args("--batch", "64", "--prompt-len", "2048", "--attn", "math"),
                                "cuda", "bf16", fake)
    assert msg.startswith("batch 64 x prompt 2048") and "20.0 GB free on NVIDIA H100 PCIe" in msg
    assert collect._check_memory(preset("tiny"), _args(), "cpu", "fp32", fake) is None


def test_out_of_memory_in_the_run_is_one_line(monkeypatch, capsys, tmp_path):
    def oom(*a, **kw):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 32.00 GiB")
    monkeypatch.setattr(collect, "_record", oom)
    rc = collect.run(_args("--device", "cpu", "--prompt-len", "4", "--gen-len", "1", "-o", str(tmp_path / "x.parquet")))
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0 and "out of GPU memory" in err and "--batch" in err


# --- the model on its device, in its dtype -----------------------------------------------------------

def test_the_8b_model_is_built_on_its_device_in_its_dtype():
    # on the meta device nothing is allocated: built on the CPU in fp32 first (32 GB), this would not
    # finish in seconds
    t0 = time.monotonic()
    m = Llama(preset("llama3-8b"), batch=1, max_len=32, dtype="bf16", device="meta")
    assert time.monotonic() - t0 < 30
    assert {p.dtype for p in m.parameters()} == {torch.bfloat16}
    assert {p.device.type for p in m.parameters()} == {"meta"}
    assert sum(p.numel() for p in m.parameters()) == preset("llama3-8b").params()


# --- attention backends under CUDA graphs, and the one that ran ------------------------------------

@pytest.mark.parametrize("attn,masked", [("flash", False), ("efficient", True), ("math", True), ("auto", True)])
def test_graph_decode_passes_no_mask_to_flash(monkeypatch, attn, masked):
    seen = []
    real = llama_mod.F.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, **kw):
        seen.append(attn_mask is not None)
        return real(q, k, v, attn_mask=attn_mask, **kw)
    monkeypatch.setattr(llama_mod.F, "scaled_dot_product_attention", spy)
    cfg = preset("tiny")
    m = Llama(cfg, batch=1, max_len=12, dtype="fp32", device="cpu", attn=attn)
    m.forward(torch.tensor([[3]]), torch.tensor([8]), static=True)   # the graphed step's forward
    assert seen and set(seen) == {masked}


def test_graphed_flash_decode_context_is_the_whole_cache(monkeypatch):
    class FakeGraph:
        def __init__(self, model):
            self.model = model

        def step(self, tokens, position):
            return self.model.forward(tokens, torch.tensor([position]), static=True)

    steps = []

    class Rec:
        def range(self, name):
            import contextlib
            return contextlib.nullcontext()

        layer = range

        def step(self, phase, i, **kw):
            steps.append((phase, kw["context"]))
            import contextlib
            return contextlib.nullcontext()

        def phase(self, name):
            import contextlib
            return contextlib.nullcontext()

    cfg = preset("tiny")
    for attn, ctx in (("flash", 8 + 2), ("math", None)):
        steps.clear()
        m = Llama(cfg, batch=1, max_len=8 + 2, dtype="fp32", device="cpu", attn=attn)
        collect._generate(m, torch.randint(0, cfg.vocab, (1, 8)), 2, Rec(), FakeGraph(m))
        decode = [c for p, c in steps if p == "decode"]
        assert decode == ([ctx, ctx] if ctx else [9, 10])


def test_backend_names_from_the_sdpa_kernels():
    assert backend_of("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64>>(Flash_fwd_params)") == "flash"
    assert backend_of("fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<>::Params)") \
        == "efficient"
    assert backend_of("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128") == "cudnn"
    assert backend_of("void (anonymous namespace)::softmax_warp_forward<c10::BFloat16>(...)") == "math"
    rows = pd.DataFrame({"kind": "kernel", "phase": ["prefill", "prefill", "decode", "decode"],
                         "path": ["prefill/step=0/layer=0/attn"] * 2 + ["decode/step=0/layer=0/attn"] * 2,
                         "name": ["void pytorch_flash::flash_fwd_kernel<>()", "ampere_bf16_gemm",
                                  "fmha_cutlassF_bf16_aligned_64x64_rf_sm80()", "softmax_warp_forward<>"]})
    assert attention_backends(rows) == {"prefill": "flash", "decode": "efficient"}


def test_the_trace_records_the_backend_that_ran_cpu(tmp_path):
    # on a CPU run the rows are the top-level ops: SDPA's backend (a child op) is not among them, so
    # the record says unknown rather than repeating what was asked for
    out = tmp_path / "cpu.parquet"
    assert collect.run(_args("--device", "cpu", "--preset", "tiny", "--prompt-len", "8", "--gen-len", "2",
                             "--warmup", "0", "--attn", "math", "-o", str(out))) == 0
    w = load_trace(out).meta["workload"]
    assert w["attn"] == "math" and w["attn_ran"] == {"prefill": "unknown", "decode": "unknown"}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("attn,graphs,ran", [("flash", False, "flash"), ("math", False, "math"),
                                             ("flash", True, "flash"), ("efficient", True, "efficient")])
def test_the_trace_records_the_backend_that_ran_cuda(tmp_path, attn, graphs, ran):
    out = tmp_path / f"{attn}{graphs}.parquet"
    argv = ["--device", "cuda", "--preset", "tiny", "--prompt-len", "64", "--gen-len", "3", "--dtype", "bf16",
            "--attn", attn, "-o", str(out)] + (["--cuda-graphs"] if graphs else [])
    assert collect.run(_args(*argv)) == 0
    w = load_trace(out).meta["workload"]
    assert w["attn_ran"]["prefill"] == ran and w["attn_ran"]["decode"] == ran


# --- the parent frees its model before the ncu child ------------------------------------------------

def test_parent_model_is_gone_when_the_ncu_child_starts(tmp_path, monkeypatch):
    alive = []

    def fake_counters(args):
        gc.collect()
        alive.append(sum(isinstance(o, Llama) for o in gc.get_objects()))
        return 0
    monkeypatch.setattr(collect, "_counters", fake_counters)
    monkeypatch.setattr(collect, "_resolve", lambda args, torch: ("cpu", "fp32"))  # the GPU checks: above
    out = tmp_path / "p.parquet"
    assert collect.run(_args("--device", "cpu", "--prompt-len", "4", "--gen-len", "1", "--warmup", "0",
                             "--counters", "-o", str(out))) == 0
    assert alive == [0]


# --- a missing demangler breaks nothing --------------------------------------------------------------

def test_commands_run_without_pycxxfilt():
    code = ("import sys; sys.modules['pycxxfilt'] = None\n"  # `import pycxxfilt` now raises ImportError
            "from rooftop_cli import main\n"
            "from rooftop.trace.names import demangle\n"
            "assert demangle('_ZN7cutlass6KernelEv') == '_ZN7cutlass6KernelEv'\n"
            "sys.exit(main(['report', 'sample_traces/tiny-cpu.parquet']))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "decode" in proc.stdout


# --- the Recorder's GPU kernel rows take the real traces' importer -----------------------------------

def test_recorder_gpu_kernel_rows_go_through_the_kineto_importer(tmp_path, fixtures_dir):
    """A real GPU Kineto trace (nvllm, rank 0) exported by a stand-in profiler: the Recorder's rows
    are exactly `rooftop import`'s of the same file (kernels, streams, grids, correlation)."""
    from collectors.capture.record import Recorder
    from collectors.readers.importers import import_any

    src = fixtures_dir / "traces" / ("Navi-AI-Lab__nvllm__benchmarks__nvllm__traces__cute_paged_attn__2026-04-13-nsys__"
                                     "rank0.1776116491109655086.pt.trace.json.gz")

    class Prof:  # what Recorder.__exit__ asks of torch.profiler.profile
        def __exit__(self, *exc):
            return False

        def export_chrome_trace(self, path):
            Path(path).write_bytes(gzip.decompress(src.read_bytes()))

    out = tmp_path / "rec.parquet"
    rec = Recorder(out, workload={"attn": "auto"})
    rec._prof = Prof()
    rec.__exit__(None, None, None)
    recorded = load_trace(out)
    rows, meta = import_any(src)
    imported = load_trace(write_trace(tmp_path / "imp.parquet", rows, meta))
    k = recorded.events[recorded.events["kind"] == "kernel"]
    assert len(k) > 100 and k["stream"].notna().all() and k["grid"].notna().any()
    assert recorded.events.equals(imported.events)
    assert "attn_ran" in recorded.meta["workload"]


# --- the recording script -------------------------------------------------------------------------------

def test_script_stops_at_once_without_a_gpu(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the script would record")
    out = tmp_path / "out"
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "record_gpu_samples.sh"), str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT),
                               "WORK": str(tmp_path / "work")})
    assert proc.returncode == 1 and "torch sees no CUDA GPU" in proc.stderr
    assert not list(out.glob("*"))  # nothing half-recorded


def test_script_fits_its_time_budget():
    text = (ROOT / "scripts" / "record_gpu_samples.sh").read_text()
    assert int(re.search(r"BUDGET=\$\{BUDGET:-(\d+)\}", text).group(1)) <= 480  # 8 minutes
    # every long step runs under `timeout`, and the big Kineto files go to WORK, not OUT
    assert "--kineto \"$WORK/" in text and "timeout $limit $PY -m rooftop collect" in text
    assert re.search(r"pytest -q -m gpu .*\n\s+tests/test_collect.py tests/test_record.py tests/test_collect_ready.py", text)
