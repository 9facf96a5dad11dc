"""Issue 40: names cut to a table's width keep what tells them apart (rooftop.present.apart)."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from rooftop.present.apart import MAX_NAMES, fit_apart
from tui.widgets.table_values import fit_unique

# cuBLAS kernels that differ in the tile size only; Blackwell FMHA kernels that differ in one word
SM90_128 = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
SM90_64 = SM90_128.replace("tilesize128x64x64", "tilesize64x64x64")
FMHA_STATIC = "fmhaSm100aKernel_QkvE4m3OBfloat16HQk128HV128SeparateQkvCausalP64VarSeqQ128Kv128StaticSwapsAbForGen"
FMHA_PERSIST = FMHA_STATIC.replace("Static", "Persistent")


def test_the_tile_size_and_the_differing_word_stay_whole():
    for width in (24, 32, 40):
        cut = fit_apart([SM90_128, SM90_64, FMHA_STATIC, FMHA_PERSIST, "short"], width)
        assert "128" in cut[SM90_128] and "tilesize64" in cut[SM90_64] or "_64x" in cut[SM90_64]
        assert "8x64" not in cut[SM90_128].replace("128x64", "")  # never a token cut in two
        assert "Static" in cut[FMHA_STATIC] and "Persistent" in cut[FMHA_PERSIST]
        assert all(len(v) <= width for v in cut.values()) and "short" not in cut
        assert cut[SM90_128].startswith("sm90") and cut[FMHA_STATIC].startswith("fmha")
        assert len(set(cut.values())) == len(cut)


def test_names_apart_at_the_head_keep_their_head():
    cut = fit_apart(["a" * 40, "b" * 40], 10)
    assert cut == {"a" * 40: "a" * 9 + "…", "b" * 40: "b" * 9 + "…"}


def test_many_names_fall_back_to_the_head_cut():
    names = [f"kernel_{i:05d}_" + "x" * 40 for i in range(MAX_NAMES + 1)]
    cut = fit_apart(names, 20)
    assert cut[names[0]] == names[0][:19] + "…"


_word = st.sampled_from(["sm90", "xmma", "gemm", "bf16", "tilesize128x64", "tilesize64x64", "Kernel", "<", ">",
                         "::", "_", "Static", "Persistent", "128", "64", "void", " "])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_word, min_size=3, max_size=17, unique=True).map("".join), min_size=1, max_size=12,
                unique=True),
       st.integers(min_value=16, max_value=60))
def test_every_cut_fits_and_no_two_rows_read_alike(names, width):
    """(Names of distinct words, at the table's widths, 16 and up: a name that only repeats one word
    more than another, `ab` x 9 beside `ab` x 10, has no stretch that tells them apart.)"""
    cut = fit_unique(names, width)
    shown = [cut.get(n, n) for n in names]
    assert all(len(s) <= width for s, n in zip(shown, names) if len(n) > width)
    assert len(set(shown)) == len(shown)
