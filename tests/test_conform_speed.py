"""The conforming step's fast paths (`rooftop.trace.to_table`) give what the plain paths give:
names without brackets skip the bracket scanner, ASCII names match lowered patterns, derived text
columns stay categoricals, Kineto launch shapes arrive as Arrow lists."""
from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from rooftop.trace import names as nm
from rooftop.trace.names import categories
from rooftop.trace.names import cxx

TOKENS = ["step=12", "ProfilerStep#3", "cudaLaunchKernel", "flash", "FLASH", "Attn", "gemm", "GEMV", "nccl",
          "mm_", "_MM_", "fp8", "CVT_", "rms", "Norm", "copy", "Copy_", "topk", "sort", " ", "  ", "::", ":", "_",
          "=", "#", "-", "->", "<", ">", "(", ")", "{", "}", ",", "operator", "operator()", "void ", "int ",
          "ſ", "K", "é", "Ä", "\u212a", "0", "42", "ampere_h16", "Sm90", "vllm::", "at::native::"]


def _random_names(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(TOKENS) for _ in range(rng.randint(1, 6))) for _ in range(n)]


def _case_insensitive_category(name: str, op: str | None = None) -> str:
    """`category_of` with the case-insensitive patterns only (the reference for the lowered ones)."""
    for text, from_op in ((name, False), (op, True)):
        if not text:
            continue
        own = categories._own_name(text[:categories.SCAN_CHARS])
        for cat, rx in categories._CATEGORY_RE:
            if rx.search(own):
                if cat == "attention" and from_op and name:
                    break
                return cat
    return "other"


@pytest.mark.parametrize("seed", range(3))
def test_name_fast_paths_agree_with_the_bracket_scanner(seed):
    names = _random_names(3000, seed) + ["a->b", "x > y", "operator new", "f operator<", "A  B", "void", " x y"]
    for n in names:
        # what the bracket scanner gives where the fast paths skip it
        assert cxx._components(n) == [p for p in cxx._top_level_parts(n) if p and p not in cxx._ANONYMOUS], n
        if cxx._no_structure(n):
            assert cxx._last_top_level_space(n) == n.rfind(" "), n
        if "<" not in n and ">" not in n:
            assert cxx._strip_templates(n) == n


@pytest.mark.parametrize("seed", range(3))
def test_lowered_patterns_match_as_the_case_insensitive_ones(seed):
    names = _random_names(3000, seed)
    ops = _random_names(3000, seed + 10)
    for n, op in zip(names, ops):
        assert nm.category_of(n) == _case_insensitive_category(n), n
        assert nm.category_of("", op) == _case_insensitive_category("", op), op
    # the fast path is taken where it means the same: ASCII, with upper case
    assert nm.category_of("FLASH_FWD_KERNEL") == "attention" and nm.category_of("SM90_XMMA_GEMM") == "gemm"


def test_derived_text_columns_are_categoricals_of_the_same_values():
    names = pd.Series(_random_names(2000, 7) + [None, ""], dtype=object).astype("category")
    ops = pd.Series((_random_names(40, 8) * 60)[:len(names)], dtype=object)
    kinds = pd.Series(["kernel", "memcpy", None, "range"] * (len(names) // 4) + ["kernel"] * (len(names) % 4))
    cats = nm.categorize(names, ops, kinds)
    assert isinstance(cats.dtype, pd.CategoricalDtype) and cats.index.equals(names.index)
    want = [nm.category_of(n if isinstance(n, str) else None, o, k) for n, o, k in zip(names, ops, kinds)]
    assert cats.astype(object).tolist() == want
    shorts = nm.short_names(names)
    assert isinstance(shorts.dtype, pd.CategoricalDtype)
    mapping = nm.unique_short_names([n for n in names if isinstance(n, str)])
    assert [None if pd.isna(s) else s for s in shorts.astype(object)] == [mapping.get(n) for n in names]


def test_parse_paths_phase_is_a_categorical_and_fills_like_objects():
    from rooftop.trace.steps import parse_path, parse_paths
    from rooftop.trace.build import _fill_text

    paths = pd.Series(["decode/step=3/a", None, "prefill/step=1", "x/y", "decode/step=3/a", "sglang forward_extend"],
                      dtype=object).astype("category")
    parsed = parse_paths(paths)
    assert [None if pd.isna(p) else p for p in parsed["phase"].astype(object)] == \
        [parse_path(p)[0] if isinstance(p, str) else None for p in paths]
    cur = pd.Series(["run", None, None, "decode", None, None], dtype=object).astype("category")
    want = cur.astype(object).where(cur.notna(), parsed["phase"].astype(object))
    got = _fill_text(cur, parsed["phase"])
    assert isinstance(got.dtype, pd.CategoricalDtype)
    assert [None if pd.isna(v) else v for v in got.astype(object)] == [None if pd.isna(v) else v for v in want]
    # no category on one side, and no value at all: still the same
    empty = pd.Series([None] * 6, dtype=object).astype("category")
    assert _fill_text(empty, empty).isna().all()
    assert _fill_text(empty, parsed["phase"]).astype(object).equals(parsed["phase"].astype(object))


def test_kineto_shapes_arrive_as_arrow_lists_and_conform_as_object_lists_do():
    """The Kineto join hands launch shapes over as Arrow fixed-size lists: the conformed column is
    what the same shapes as Python lists give, and out-of-range ones are found as before."""
    from collectors.readers._kineto_join import _shape3, _shape_column
    from collectors.readers.importers import _out_of_range
    from collectors.readers._kineto_values import NULL
    from rooftop.trace.build import _column

    class G:
        def __init__(self, cols):
            self.cols = cols

        def np(self, key):
            return self.cols[key]
    gx = np.array([4, 4, NULL, 1, -3, 2**31], dtype=np.int64)
    ones = np.ones(len(gx), dtype=np.int64)
    g = G({"gx": gx, "gy": ones * 2, "gz": ones})
    order = np.array([6, 0, 1, 7, 2, 3, 4, 5])  # kernels and two rows without a shape, interleaved
    col = pd.Series(_shape_column(_shape3(g, "g"), 2, order))
    as_lists = [None if v == NULL else [int(v), 2, 1] for v in gx] + [None, None]
    objects = pd.Series(np.array([as_lists[i] for i in order], dtype=object))
    bad = _out_of_range(pd.DataFrame({"grid": col}))
    assert bad.tolist() == _out_of_range(pd.DataFrame({"grid": objects})).tolist()
    assert bad.tolist() == [False, False, False, False, False, False, True, True]
    keep = ~bad
    typ = pa.list_(pa.int32(), 3)
    got = _column(pd.DataFrame({"grid": col[keep].reset_index(drop=True)}), "grid", typ, int(keep.sum()))
    want = _column(pd.DataFrame({"grid": objects[keep].reset_index(drop=True)}), "grid", typ, int(keep.sum()))
    flat = lambda a: a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a
    assert flat(got).equals(flat(want))
    assert got.to_pylist() == [None, [4, 2, 1], [4, 2, 1], None, None, [1, 2, 1]]


def _rows_with_host_calls() -> pd.DataFrame:
    """Kernels, ranges and runtime calls interleaved, text as categoricals (as an import hands them
    on): a name only a runtime call has, a path only a range has, a missing op, a secret-shaped name."""
    kinds = ["range", "runtime", "kernel", "runtime", "kernel", "memcpy", "range", "runtime", "kernel"]
    names = ["step=1", "cudaLaunchKernel", "ampere_sgemm_128x64", "cudaLaunchKernel", "flash_fwd_kernel",
             "Memcpy DtoD (Device -> Device)", "step=2", "cudaGraphLaunch", "hf_" + "a" * 24]
    paths = ["decode/step=1", None, "decode/step=1/layer.0", None, "decode/step=1/layer.0/attn", None,
             "decode/step=2", None, "decode/step=2/layer.1"]
    ops = [None, "aten::mm", "aten::mm", "aten::sdpa", "aten::sdpa", None, None, None, "aten::mm"]
    n = len(kinds)
    return pd.DataFrame({
        "id": np.arange(n), "kind": pd.Categorical(kinds), "name": pd.Categorical(names),
        "start_ns": np.arange(n) * 1000, "dur_ns": np.full(n, 500),
        "correlation": pd.array([None, 1, 1, 2, 2, None, None, 3, 3], dtype="Int64"),
        "thread": pd.array([1, 1, None, 1, None, None, 1, 1, None], dtype="Int64"),
        "path": pd.Categorical(paths), "op": pd.Categorical(ops)})


def test_text_kept_as_dictionaries_writes_and_reads_as_plain_text(tmp_path):
    """An import's table keeps names, paths and ops as dictionaries: the same values, the same file
    (stored as plain text), and the same trace when analysed before the write (host calls split
    off, each part keeping its own names) as the plain table gives."""
    import pyarrow.parquet as pq

    from rooftop.present.summary import write_summarized_handed_over
    from rooftop.trace import to_table, write_trace
    from rooftop.trace.read import trace_from_table
    from rooftop.trace.scrubbing import scrub_all

    rows = _rows_with_host_calls()
    plain, kept = to_table(rows), to_table(rows, text_dictionaries=True)
    for c in ("name", "short_name", "path", "op"):
        assert plain.schema.field(c).type == pa.string()
        assert pa.types.is_dictionary(kept.schema.field(c).type)
        assert kept.column(c).cast(pa.string()).equals(plain.column(c))
    assert kept.drop_columns(["name", "short_name", "path", "op"]).equals(
        plain.drop_columns(["name", "short_name", "path", "op"]))
    meta = {"source": {"tool": "test"}}
    (plain, meta_p, w_p), (kept, meta_k, w_k) = scrub_all(plain, meta), scrub_all(kept, meta)
    assert w_p == w_k and meta_p == meta_k
    assert "hf_" + "a" * 24 not in kept.column("name").cast(pa.string()).to_pylist()  # redacted in both
    for name, table in (("plain", plain), ("kept", kept)):
        write_trace(tmp_path / name / "t.parquet", table, meta_p, conform=False)
        write_summarized_handed_over(tmp_path / name / "s.parquet", [table], meta_p, scrubbed=True)
    for f in ("t.parquet", "s.parquet"):
        a, b = pq.ParquetFile(tmp_path / "plain" / f), pq.ParquetFile(tmp_path / "kept" / f)
        assert a.schema_arrow == b.schema_arrow and a.schema_arrow.field("name").type == pa.string()
        assert a.read().equals(b.read())
        assert a.metadata.metadata == b.metadata.metadata  # the summary of the analysis, too
    one, two = trace_from_table(plain, meta_p, scrubbed=True), trace_from_table(kept, meta_p, scrubbed=True)
    pd.testing.assert_frame_equal(one.events, two.events)
    pd.testing.assert_frame_equal(one.host, two.host)
    assert one.host["name"].cat.categories.tolist() == ["cudaLaunchKernel", "cudaGraphLaunch"]


def test_out_of_range_on_nullable_integers_is_what_numbers_give():
    """The Kineto join's launch and id columns are nullable integers (Int64 where a value does not
    fit int32): checked as integers, they flag the rows that the same values as numbers flag."""
    from collectors.readers.importers import _out_of_range

    rng = np.random.default_rng(5)
    n = 4000
    values = rng.choice(np.array([0, 7, -1, -(2 ** 31), -(2 ** 31) - 1, 2 ** 31 - 1, 2 ** 31, 2 ** 40]), n)
    missing = rng.random(n) < 0.3
    cols = {c: pd.arrays.IntegerArray(values.copy(), missing.copy()) for c in ("registers", "device", "step")}
    cols["stream"] = pd.arrays.IntegerArray(rng.integers(0, 9, n), missing.copy()).astype("Int32")
    cols["shared_mem"] = pd.arrays.IntegerArray(rng.integers(-2, 9, n), missing.copy()).astype("Int32")
    ints = pd.DataFrame(cols)
    numbers = pd.DataFrame({c: pd.Series(np.where(missing, np.nan, np.asarray(v, dtype=object)), dtype=object)
                            for c, v in ((c, ints[c].to_numpy(dtype=np.float64, na_value=np.nan)) for c in ints)})
    got = _out_of_range(ints)
    assert got.tolist() == _out_of_range(numbers).tolist()
    # by hand: a negative launch size, or an id outside int32, on a row where the value is known
    v = values.astype(np.float64)
    want = ~missing & ((v < 0) | (v >= 2 ** 31))  # registers
    want |= ~missing & ((v < -(2 ** 31)) | (v >= 2 ** 31))  # device, step
    want |= ~missing & (cols["shared_mem"].to_numpy(dtype=np.int64, na_value=0) < 0)
    assert got.tolist() == want.tolist() and want.any() and not want.all()


@pytest.mark.parametrize("seed", range(2))
def test_category_of_a_name_and_its_op_is_the_two_pass_loop(seed):
    """The name's first rule, else the op's (never attention from an op beside a name): what one loop
    over (name, op) gave, for names paired with ops, and categorize's per-text memo agrees."""
    names = _random_names(2000, seed + 20) + ["zzz_custom", "zzz_custom", ""]
    ops = _random_names(2000, seed + 30) + ["aten::scaled_dot_product_attention", "aten::mm", "aten::mm"]
    for n, op in zip(names, ops):
        assert nm.category_of(n, op) == _case_insensitive_category(n, op), (n, op)
    assert [nm.category_of(*p) for p in zip(names[-3:], ops[-3:])] == ["other", "gemm", "gemm"]
    cats = nm.categorize(pd.Series(names, dtype="category"), pd.Series(ops, dtype=object))
    assert cats.astype(object).tolist() == [_case_insensitive_category(n, op) for n, op in zip(names, ops)]
