"""Issue 38, item 5: JWTs and HTTP credentials are redacted wherever they sit (inside a word, after
`=`/`:`/a no-break space/`%20`), in linear time; names that only look alike stay."""
from __future__ import annotations

import time

import pytest

from rooftop.trace.redact import REDACTED, redact_text

# RFC 7519 section 3.1's example header and payload (compact form), and an unsigned (alg none) one
JWT = ("eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFt"
       "cGxlLmNvbS9pc19yb290Ijp0cnVlfQ.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
UNSIGNED = "eyJhbGciOiJub25lIn0.e30."


@pytest.mark.parametrize("jwt", [JWT, UNSIGNED])
@pytest.mark.parametrize("wrap", ["{}", "gemm_{}", "x-{}", "kernel{}", "ab{}", "a.{}", "Bearer {}", "({})",
                                  "decode/{}/attn", "{}:tail"])
def test_a_jwt_is_redacted_wherever_it_sits(jwt, wrap):
    out = redact_text(wrap.format(jwt))
    assert jwt.split(".")[0] not in out and REDACTED in out, out


@pytest.mark.parametrize("text", ["Bearer abcdefgh1234", "bearer:abcdefgh1234", "Authorization: Bearer=abcdefgh1234",
                                  "Bearer\u00a0abcdefgh1234", "Bearer%20abcdefgh1234", "BEARER\tabcdefgh1234",
                                  "Basic dXNlcjpwYXNzd29yZA==", "Token%20abcdefgh1234",
                                  '"authorization": "Bearer abcdefgh1234"'])
def test_http_credentials_are_redacted(text):
    out = redact_text(text)
    assert "abcdefgh1234" not in out and "dXNlcjpwYXNzd29yZA" not in out, out


@pytest.mark.parametrize("text", ["sm90_xmma_gemm_bf16 eyJ", "eyJx.y.z", "Tokenizer basic block",
                                  "aten::bearer_fn", "eyJhbGciOiJIUzI1NiJ9 alone", "basic_block_8"])
def test_lookalikes_stay(text):
    assert redact_text(text) == text


@pytest.mark.parametrize("unit", ["eyJ", "-eyJ", "eyJaaaaaaaaa.", "eyJaaaaaaaaa.bb", "Bearer ", "Bearer%20", "Bearer:"])
def test_redaction_stays_linear(unit):
    def cost(n):
        t = time.perf_counter()
        redact_text(unit * n)
        return time.perf_counter() - t
    small, big = cost(20_000), cost(160_000)
    assert big < 30 * max(small, 1e-3), (unit, small, big)  # 8x the text: far from 64x


def test_a_jwt_inside_a_kernel_name_reaches_no_output(tmp_path):
    """import (the Parquet's every string), report text and JSON, the TUI's table text (the trace
    as loaded) and a CSV export: the JWT inside a name is gone from all of them."""
    import json

    import pyarrow.parquet as pq

    from bad_inputs.corpus import r38_cases
    from bad_inputs.harness import run_in_process
    from rooftop.present.text import write_csv
    from rooftop.trace import load_trace

    case = next(c for c in r38_cases() if c.name == "r38-jwt-name")
    src = case.make(tmp_path, None)
    JWT_IN_CORPUS = "eyJhbGciOiJIUzI1NiJ9"
    assert JWT_IN_CORPUS in src.read_text()
    out = tmp_path / "o.parquet"
    assert run_in_process(["import", str(src), "-o", str(out)]).rc == 0
    t = pq.read_table(out)
    texts = [json.dumps(t.schema.metadata[b"rooftop"].decode())]
    texts += [str(v) for c in t.column_names if "string" in str(t.column(c).type) for v in t.column(c).to_pylist()]
    for argv in (["report", str(out)], ["report", str(out), "--json"], ["report", str(src)]):
        texts.append(run_in_process(argv).out)
    trace = load_trace(out)
    texts += [str(v) for v in trace.events["name"].astype(str)]
    write_csv(tmp_path / "k.csv", trace.events[["name"]])
    texts.append((tmp_path / "k.csv").read_text())
    assert JWT_IN_CORPUS not in "\n".join(texts)
    assert any("gemm_[redacted]" in x for x in texts)
