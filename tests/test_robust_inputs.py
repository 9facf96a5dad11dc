"""Issue 38, item 3: every input gets a result or one line. Numbers out of range drop their event
with a counted warning (compiled decoder, msgspec and exact paths alike); any valid JSON layout
loads; a token of any length is read in linear time."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bad_inputs.corpus import _kernel_ev, _kineto_doc
from bad_inputs.harness import ROOT

PATHS = {"compiled": {}, "python": {"ROOFTOP_COMPILED": "0"}}


def _rooftop(argv, env=None, timeout=120):
    p = subprocess.run([sys.executable, "-m", "rooftop", *argv], capture_output=True, text=True, errors="replace",
                       timeout=timeout, cwd=ROOT, env={**os.environ, **(env or {})})
    return p


def _text(events: list[str], tail: str = "") -> str:
    return '{"schemaVersion": 1, "traceEvents": [' + ",".join(events) + "]" + tail + "}"


def _ev(i, ts, dur) -> str:
    return json.dumps(_kernel_ev(i, 0, 0)).replace('"ts": 0', f'"ts": {ts}').replace('"dur": 0', f'"dur": {dur}')


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("value", ["1e999999999", "-1e999999999", "1" * 5000, "1e19", "123456789012345678901.5"])
def test_an_absurd_number_drops_its_event_with_a_counted_warning(tmp_path, path, value):
    good = [_ev(i, 10 + i, 5) for i in range(40)]
    f = tmp_path / "t.json"
    f.write_text(_text(good + [_ev(900, value, 5), _ev(901, 20, value)]))
    p = _rooftop(["report", str(f), "--json"], PATHS[path])
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["totals"]["kernels"] == 40
    warned = " ".join(doc["warnings"])
    assert "dropped" in warned and ("2 event(s)" in warned or "1 event(s)" in warned), warned
    assert "internal error" not in p.stderr


@pytest.mark.parametrize("n", [5, 70_000])
@pytest.mark.parametrize("tail", [
    ', "distributedInfo": {"backend": "nccl", "rank": 0, "nested": {"a": [1, {"b": 2}]}}, "traceName": "x"',
    ', "distributedInfo": {"a": {}}, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],'
    ' "traceName": "x"',
    ', "x": [{"a": 1}, {"b": 2}], "y": {"c": {"d": {}}}, "z": 1'])
def test_any_valid_layout_after_the_events_loads_whole(tmp_path, n, tail):
    text = _text([_ev(i, 10 + i, 5) for i in range(n)], tail)
    json.loads(text)  # valid JSON
    f = tmp_path / "t.json"
    f.write_text(text)
    for env in ({"ROOFTOP_WORKERS": "1"}, {"ROOFTOP_WORKERS": "2"}, {"ROOFTOP_COMPILED": "0"}):
        p = _rooftop(["report", str(f), "--json"], env)
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert doc["totals"]["kernels"] == n, env
        assert not any("malformed" in w or "cut" in w for w in doc["warnings"]), doc["warnings"]


def _read_time(tmp_path: Path, mb: int) -> float:
    from collectors.readers.kineto import read_kineto

    name = "k" * (mb << 20)
    f = tmp_path / f"long{mb}.json"
    f.write_text(_text([_ev(0, 1, 1), json.dumps(_kernel_ev(1, 2, 1, name=name)), _ev(2, 3, 1)]))
    del name
    t = time.perf_counter()
    rows, _ = read_kineto(f, workers=1)
    elapsed = time.perf_counter() - t
    assert (rows["kind"].astype(str) == "kernel").sum() == 3
    f.unlink()
    return elapsed


def test_a_long_token_is_read_in_linear_time(tmp_path):
    """A 64 MiB name once cost sixteen decodes of a growing buffer (quadratic: 512 MiB took 54 s):
    the buffer now doubles, so 8x the name costs about 8x, not 64x."""
    small = min(_read_time(tmp_path, 8) for _ in range(2))
    big = _read_time(tmp_path, 64)
    assert big < 20 * small, (small, big)


# --- `--model` configs -----------------------------------------------------------------------------

LLAMA = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, "torch_dtype": "bfloat16"}
CT = {"quant_method": "compressed-tensors",
      "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float"}}}}


def _config_text(**over) -> str:
    return json.dumps({**LLAMA, **over})


HOSTILE_CONFIGS = {
    "huge-int": _config_text().replace('"hidden_size": 4096', '"hidden_size": 1' + "0" * 200),
    "4301-digits": _config_text().replace('"vocab_size": 128256', '"vocab_size": ' + "9" * 4301),
    "deep-arrays": _config_text()[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "deep-objects": _config_text()[:-1] + ', "x": ' + '{"a":' * 50_000 + "1" + "}" * 50_000 + "}",
    "out-of-range-float": _config_text()[:-1] + ', "rope_theta": 1e999}',
    "nan": _config_text()[:-1] + ', "rope_theta": NaN}',
    "invalid-re": _config_text(quantization_config={**CT, "ignore": ["re:(unclosed"]}),
    "backreference-re": _config_text(quantization_config={**CT, "ignore": [r"re:(a)\1"]}),
    "catastrophic-re": _config_text(quantization_config={**CT, "ignore": ["re:^([a-z._0-9]+)+!"]}),
    "long-pattern": _config_text(quantization_config={**CT, "ignore": ["re:" + "a?" * 5000 + "a" * 5000]}),
    "sliding-window": _config_text(model_type="mistral", sliding_window=10**30),
}
OK_CONFIGS = {"catastrophic-re"}  # a valid pattern, run in linear time: the config is used


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory):
    from rooftop.trace import encode_meta, to_table
    import pyarrow.parquet as pq
    from bad_inputs.corpus import _meta, _row

    p = tmp_path_factory.mktemp("trace") / "t.parquet"
    pq.write_table(to_table([_row(i) for i in range(6)]).replace_schema_metadata(
        {b"rooftop": encode_meta(_meta())}), p)
    return p


def _one_line_error(p, path):
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 2 and len(lines) == 1, p.stderr[-2000:]
    assert lines[0].startswith("rooftop: error:") and "internal error" not in lines[0] and str(path) in lines[0]


@pytest.mark.parametrize("name", list(HOSTILE_CONFIGS))
def test_a_hostile_model_config_is_one_line_within_bounds(tmp_path, small_trace, name):
    cfg = tmp_path / "config.json"
    cfg.write_text(HOSTILE_CONFIGS[name])
    t = time.perf_counter()
    p = _rooftop(["report", str(small_trace), "--model", str(cfg)], timeout=60)
    assert time.perf_counter() - t < 30, name
    if name in OK_CONFIGS:
        assert p.returncode == 0, p.stderr
    else:
        _one_line_error(p, cfg)


def test_a_model_config_that_is_no_regular_file_is_refused_at_once(tmp_path, small_trace):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    for cfg in (fifo, zero, tmp_path):
        t = time.perf_counter()
        p = _rooftop(["report", str(small_trace), "--model", str(cfg) + ("/" if cfg == tmp_path else "")], timeout=30)
        assert time.perf_counter() - t < 20
        assert p.returncode == 2 and "internal error" not in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1


def test_a_model_config_over_the_size_budget_is_refused_before_it_is_read(tmp_path, small_trace):
    cfg = tmp_path / "config.json"
    text = _config_text()
    cfg.write_text(text[:-1] + ', "pad": "' + "x" * 5000 + '"}')
    p = _rooftop(["report", str(small_trace), "--model", str(cfg)], {"ROOFTOP_MAX_CONFIG_BYTES": "4096"})
    _one_line_error(p, cfg)
    assert "ROOFTOP_MAX_CONFIG_BYTES=4,096" in p.stderr
    with open(cfg, "wb") as fh:  # 1 GiB, sparse: refused by its size, never read
        fh.truncate(1 << 30)
    t = time.perf_counter()
    p = _rooftop(["report", str(small_trace), "--model", str(cfg)])
    _one_line_error(p, cfg)
    assert time.perf_counter() - t < 20


def test_re_patterns_keep_their_meaning_on_the_linear_engine(tmp_path):
    from rooftop.llm.config import load_spec

    for pattern, kept in (("re:.*lm_head", True), ("re:^model\\.layers\\.\\d+\\.self_attn", False)):
        cfg = tmp_path / "c.json"
        cfg.write_text(_config_text(quantization_config={**CT, "ignore": [pattern]}))
        spec = load_spec(str(cfg))
        assert ("lm_head" in spec.unquantized) is True
        if "self_attn" in pattern:
            assert "attn" in spec.unquantized
        assert spec.quantized is not None
