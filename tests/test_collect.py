"""collectors.capture.collect: the real collector on CPU with the tiny workload."""
import argparse
import sys

import pytest

torch = pytest.importorskip("torch")

from collectors.capture import collect  # noqa: E402
from collectors.capture.workloads.llama import Llama, attention_backend  # noqa: E402
from rooftop.llm.shapes import preset  # noqa: E402
from rooftop.trace import TraceError, load_trace  # noqa: E402

B, S, N = 2, 16, 3


def _args(*argv):
    p = argparse.ArgumentParser()
    collect.add_arguments(p)
    return p.parse_args(list(argv))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("collect") / "tiny.parquet"
    rc = collect.run(_args("--device", "cpu", "--preset", "tiny", "--batch", str(B), "--prompt-len", str(S),
                           "--gen-len", str(N), "--warmup", "0", "--kineto", str(out.with_suffix(".json")),
                           "-o", str(out)))
    assert rc == 0
    return load_trace(out)


def test_collect_and_export_then_import_give_identical_rows(run, tmp_path):
    """One path from profiler to Parquet: the collector's rows are `rooftop import` of the
    profiler's exported Kineto file, not a second conversion."""
    from collectors.readers.importers import import_any
    from rooftop.trace import write_trace

    kineto = run.path.replace(".parquet", ".json")
    rows, meta = import_any(kineto)
    imported = load_trace(write_trace(tmp_path / "imported.parquet", rows, meta))
    assert len(run.events) > 100 and run.events.equals(imported.events)
    # what the file says about steps is the collector's too; the collector adds the workload
    assert [(s["phase"], s["index"]) for s in meta["steps"]] == [(s["phase"], s["index"]) for s in run.meta["steps"]]
    assert "batch" not in meta["steps"][0] and run.meta["steps"][0]["batch"] == B


def test_prefill_and_decode_steps(run):
    ev = run.events
    ops = ev[ev["kind"] == "op"]
    assert sorted(ops["phase"].dropna().unique()) == ["decode", "prefill"]
    assert ops["phase"].notna().all() and ops["step"].notna().all()  # every op belongs to a step
    assert sorted(ops.loc[ops["phase"] == "decode", "step"].unique()) == list(range(N))
    assert set(ops.loc[ops["phase"] == "prefill", "step"]) == {0}
    assert {"prefill/step=0/layer=0/attn", "prefill/step=0/layer=1/mlp",
            f"decode/step={N - 1}/layer=1/attn", "decode/step=0/head"} <= set(ops["path"])
    declared = [{"phase": "prefill", "index": 0, "batch": B, "new_tokens": B * S, "context": S}] + [
        {"phase": "decode", "index": i, "batch": B, "new_tokens": B, "context": S + i + 1} for i in range(N)]
    assert [{k: s[k] for k in d} for s, d in zip(run.meta["steps"], declared)] == declared
    assert len(run.meta["steps"]) == N + 1 and all(s["source"] == "recorder" for s in run.meta["steps"])
    w = run.meta["workload"]
    assert (w["batch"], w["prompt_len"], w["gen_len"], w["dtype"], w["attn"]) == (B, S, N, "fp32", "auto")
    assert run.meta["model"]["name"] == "tiny" and run.meta["source"]["tool"] == "rooftop collect"
    assert run.meta["device"]["name"].startswith("CPU (")


def test_gemm_flops_match_torch_flop_counter(run):
    from torch.utils.flop_counter import FlopCounterMode

    cfg = preset("tiny")
    model = Llama(cfg, batch=B, max_len=S + N, dtype="fp32", device="cpu")
    prompt = torch.randint(0, cfg.vocab, (B, S))
    counter = FlopCounterMode(display=False)
    with counter:
        collect._generate(model, prompt, N, None, None)
    counts = counter.get_flop_counts()["Global"]
    gemm_ref = sum(v for k, v in counts.items() if str(k).split(".")[-1] in ("mm", "addmm", "bmm", "baddbmm"))
    ops = run.events[run.events["kind"] == "op"]
    ours = ops.loc[ops["category"] == "gemm", "model_flops"].sum()
    assert gemm_ref > 0
    assert ours == pytest.approx(gemm_ref, rel=0.01)


def test_sdpa_flops_by_formula(run):
    cfg = preset("tiny")
    H, D = cfg.heads, cfg.d
    ops = run.events[(run.events["kind"] == "op") & (run.events["name"] == "aten::scaled_dot_product_attention")]
    pre = ops[ops["phase"] == "prefill"]
    assert len(pre) == cfg.layers
    assert (pre["model_flops"] == 4 * B * H * S * S * D / 2).all()  # causal prefill: halved
    for i in range(N):
        dec = ops[(ops["phase"] == "decode") & (ops["step"] == i)]
        assert (dec["model_flops"] == 4 * B * H * 1 * (S + i + 1) * D).all()
        # Bytes: Q and O at H heads, K and V at kv_heads over the context, fp32.
        kv = 2 * B * cfg.kv_heads * (S + i + 1) * D
        assert (dec["model_bytes"] == 4 * (2 * B * H * D + kv)).all()


def test_unknown_costs_are_null_not_zero(run):
    ops = run.events[run.events["kind"] == "op"]
    assert ops.loc[ops["name"] == "aten::silu", "model_flops"].isna().all()


@pytest.mark.parametrize("argv", [["--device", "cpu", "--cuda-graphs"], ["--device", "cpu", "--attn", "cudnn"],
                                  ["--device", "cpu", "--batch", "0"]])
def test_bad_options_exit_2(argv, tmp_path, capsys):
    assert collect.run(_args(*argv, "-o", str(tmp_path / "x.parquet"))) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rooftop: error: ") and "\n" not in err
    assert not (tmp_path / "x.parquet").exists()


def test_unwritable_output_fails_before_running(tmp_path, capsys):
    blocker = tmp_path / "f"
    blocker.write_text("")
    with pytest.raises(TraceError, match="cannot write"):   # the CLI turns it into one line, exit 2
        collect.run(_args("--device", "cpu", "-o", str(blocker / "x.parquet")))


def test_cached_calibration_goes_into_the_trace(tmp_path, monkeypatch):
    from collectors.capture import calibrate, record

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    name = record.device_meta("cpu")["name"]
    calibrate.save({"device": name, "bw": 1.5e11, "flops": 2.0e12, "dtype": "bf16"})
    out = tmp_path / "cal.parquet"
    assert collect.run(_args("--device", "cpu", "--prompt-len", "4", "--gen-len", "1", "--warmup", "0",
                             "-o", str(out))) == 0
    dev = load_trace(out).meta["device"]
    assert dev["peaks"]["measured"] == {"flops": 2.0e12, "bw": 1.5e11, "dtype": "bf16"}


def test_math_backend_runs_on_cpu_with_repeated_kv():
    cfg = preset("tiny")
    model = Llama(cfg, batch=1, max_len=9, dtype="fp32", device="cpu", attn="math")
    ref = Llama(cfg, batch=1, max_len=9, dtype="fp32", device="cpu", attn="auto")
    tokens = torch.randint(0, cfg.vocab, (1, 8))
    with attention_backend("math"):
        a = model.prefill(tokens)
    b = ref.prefill(tokens)
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)  # same seed, same weights, same answer


def test_static_decode_matches_eager():
    # The CUDA-graph path attends over the whole cache with a mask; it must compute the same thing.
    cfg = preset("tiny")
    eager = Llama(cfg, batch=1, max_len=12, dtype="fp32", device="cpu")
    static = Llama(cfg, batch=1, max_len=12, dtype="fp32", device="cpu")
    tokens = torch.randint(0, cfg.vocab, (1, 8))
    eager.prefill(tokens)
    static.prefill(tokens)
    nxt = torch.tensor([[5]])
    a = eager.decode(nxt, 8)
    b = static.forward(nxt, torch.tensor([8]), static=True)
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("graphs", [False, True])
def test_collect_on_cuda(tmp_path, graphs):
    out = tmp_path / "gpu.parquet"
    argv = ["--device", "cuda", "--prompt-len", "64", "--gen-len", "3", "-o", str(out)]
    assert collect.run(_args(*argv, *(["--cuda-graphs"] if graphs else []))) == 0
    k = load_trace(out).timed()
    assert (k["kind"] == "kernel").any()
    assert set(k.loc[k["phase"] == "decode", "step"].dropna()) == {0, 1, 2}
    assert k.loc[k["phase"] == "prefill", "model_flops"].sum() > 0


def test_counters_child_runs_without_profiler_or_file(tmp_path, monkeypatch):
    # The ncu re-run (collectors/capture/ncu_run.py child_command) needs the NVTX ranges, nothing else.
    from collectors.capture import record

    pushed = []

    class FakeNvtx:
        def push_range(self, name):
            pushed.append(name)

        def pop_range(self):
            pass

    monkeypatch.setattr(record, "_nvtx", FakeNvtx())
    out = tmp_path / "child.parquet"
    argv = ["--device", "cpu", "--prompt-len", "4", "--gen-len", "2", "--warmup", "0", "--no-cuda-graphs",
            "--counters-child", "-o", str(out)]
    assert collect.run(_args(*argv)) == 0
    assert not out.exists()
    assert pushed[:4] == ["prefill", "step=0", "embed", "layer=0"]
    assert pushed.count("decode") == 1 and "step=1" in pushed
