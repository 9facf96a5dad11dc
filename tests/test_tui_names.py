"""Full names one key away (`i`), copied with `y` (OSC 52), and tables that never show two rows alike."""
from __future__ import annotations

from rooftop.trace import write_trace
from tui.screens.name import NameScreen
from tui.widgets.table_values import fit_unique

from test_tui_app import drive, text_of
from tui_helpers import _FLASH, _GEMM, _meta, small_trace

# Two instantiations that differ only near the end: cut at the end, both read the same.
_A = "void attn_kernel<Traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Mask::causal> >(Params)"
_B = "void attn_kernel<Traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Mask::sliding> >(Params)"


def test_fit_unique_keeps_distinct_names_distinct():
    cut = fit_unique([_A, _B, "short"], 32)
    assert len(cut[_A]) == len(cut[_B]) == 32 and cut[_A] != cut[_B]
    assert "short" not in cut  # fits: untouched
    # Names whose plain cut is already distinct keep their head (the readable part).
    plain = fit_unique(["a" * 40, "b" * 40], 10)
    assert plain == {"a" * 40: "a" * 9 + "…", "b" * 40: "b" * 9 + "…"}


def test_i_shows_the_full_name_and_y_copies_it(tmp_path):
    def popup(app):
        s = app.screen
        assert isinstance(s, NameScreen) and s.names == [_GEMM]
        assert _GEMM in text_of(s.query_one("#name-full")).replace("\n", "")

    def copied(app):
        assert app.clipboard == _GEMM

    def closed(app):
        assert not isinstance(app.screen, NameScreen)

    # Kernels, raw launches (each row carries its own full name), biggest first: a prefill GEMM.
    drive([small_trace(tmp_path)], steps=[(["3", "g", "i"], popup), (["y"], copied), (["escape"], closed)])


def test_grouped_row_lists_every_full_name_and_detail_has_it(tmp_path):
    path = tmp_path / "two.parquet"
    rows = [{"kind": "kernel", "name": n, "start_ns": i * 10_000, "dur_ns": 5_000 + 1_000 * (n == _A), "device": 0,
             "stream": 7, "path": "decode/step=0"} for i, n in enumerate([_A, _B, _A, _FLASH])]
    write_trace(path, rows, _meta(modeled=False))

    def popup(app):
        s = app.screen
        assert isinstance(s, NameScreen)
        return s.names

    # The two instantiations get short names of their own (rooftop.trace.names makes them unique), so the
    # biggest group (12 µs of A) is A alone and its popup lists A's whole name.
    assert drive([path], size=(80, 24), keys=["3", "i"], check=popup) == [_A]


def test_table_cut_never_makes_two_rows_alike():
    import pandas as pd

    from tui.widgets.table_values import Col, display_table

    frame = pd.DataFrame({"name": pd.Categorical([_A, _B, _A, "short"])})
    shown = display_table(frame, [Col("name", "kernel", "text")], fit={"name": 32}).column(0).to_pylist()
    assert shown[0] == shown[2] and len({shown[0], shown[1], shown[3]}) == 3 and max(map(len, shown)) == 32
