"""Format detection from content, `import_any`, `collectors.open.open_trace`, and `rooftop import`."""
from __future__ import annotations

import argparse
import gzip
import io
import shutil

import pytest

from collectors.readers import import_command, importers
from collectors.open import open_trace
from collectors.readers.importers import UnknownFormatError, default_output, detect, import_any
from rooftop.trace import TraceError, load_trace, write_trace

KINETO = "facebookresearch__HolisticTraceAnalysis__tests__data__triton_example__triton_example.json.gz"
RANK0 = "facebookresearch__HolisticTraceAnalysis__tests__data__trace_filter__sampled_rank-0.json.gz"
RANK1 = "facebookresearch__HolisticTraceAnalysis__tests__data__trace_filter__sampled_rank-1.json.gz"
NSYS = "extra-p__extrap__tests__data__nsight__concurrent_example__concurrent.s1__profile1.sqlite"
VLLM = ("Navi-AI-Lab__nvllm__benchmarks__nvllm__traces__cute_paged_attn__2026-04-13-nsys__"
        "rank0.1776116491109655086.pt.trace.json.gz")
DSOCR = "CodeGandee__llm-perf-opt__reports__20251107-dsocr__ncu-v2__kernel_"
# Every fixture with its facts, as SOURCES.md states them: format, kernels (not copies), device.
FACTS = {
    "traces/" + KINETO: ("kineto", 1, "NVIDIA A100-PG509-200"),
    "traces/" + RANK0: ("kineto", 1154, None),  # old format: no deviceProperties
    "traces/" + RANK1: ("kineto", 1104, None),
    "traces/facebookresearch__HolisticTraceAnalysis__tests__data__nccl_parser_config__nccl_data.json.gz":
        ("kineto", 2700, "NVIDIA A100-PG509-200"),
    "traces/" + VLLM: ("kineto", 13530, "NVIDIA GB10"),
    "traces/" + NSYS: ("nsys-sqlite", 12, "GeForce GTX 1060 with Max-Q Design"),
    "traces/NVIDIA__Fuser__report1.sqlite": ("nsys-sqlite", 18, "NVIDIA H200"),
    # two GPUs, 1,721 kernels each; no TARGET_INFO_GPU table, so no device name
    "traces/GindaChen__nsys-ai__tests__fixtures__h100_2gpu_1s.sqlite": ("nsys-sqlite", 3442, None),
    "traces/NVIDIA__Fuser__report1.h100-8fa9ec29.sqlite": ("nsys-sqlite", 19, "NVIDIA H100 80GB HBM3"),
    "ncu/panjd123__cutlass__report.ncu-rep": ("ncu-rep", 3, "NVIDIA A100 80GB PCIe"),
    "ncu/AveryClapp__ESMM-Research__profile.ncu-rep": ("ncu-rep", 11, "NVIDIA A10G"),
    "ncu/AveryClapp__ESMM-Research__metrics.csv": ("ncu-csv", 9, None),
    "ncu/Navi-AI-Lab__nvllm__benchmarks__nvllm__traces__cute_paged_attn__2026-05-03-w-o-k-parallel-harness__ncu__"
    "wo_split_8__kernel.ncu-rep": ("ncu-rep", 1, "NVIDIA GB10"),
    "ncu/" + DSOCR + "0013_178ff748c21ea29399b8568af3cd1f02__ncu.details.csv": ("ncu-csv", 1, None),
    "ncu/" + DSOCR + "0001_67bdb7e29d1bb4e0ca0aec954ef18af3__ncu.details.csv": ("ncu-csv", 1, None),
}
EXPECTED = {rel: fact[0] for rel, fact in FACTS.items()}


def test_every_fixture_is_listed(fixtures_dir):
    files = {p.relative_to(fixtures_dir).as_posix() for p in fixtures_dir.glob("*/*") if p.suffix != ".md"}
    assert files == set(EXPECTED)


@pytest.mark.parametrize("rel", sorted(FACTS))
def test_fixture_facts(fixtures_dir, rel):
    if rel.endswith(".ncu-rep"):
        pytest.importorskip("ncu_report")
    fmt, kernels, device = FACTS[rel]
    trace = open_trace(fixtures_dir / rel)
    assert int((trace.events["kind"] == "kernel").sum()) == kernels
    assert trace.meta.get("device", {}).get("name") == device


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_detect_fixture_and_wrong_extension_copy(fixtures_dir, tmp_path, rel):
    src = fixtures_dir / rel
    assert detect(src) == EXPECTED[rel]
    for name in ("renamed.txt", "trace.parquet", "no_extension"):
        copy = tmp_path / name
        shutil.copyfile(src, copy)
        assert detect(copy) == EXPECTED[rel], name


def test_detect_plain_json_rooftop_dirs_and_unknown(fixtures_dir, tmp_path):
    plain = tmp_path / "k.bin"
    plain.write_bytes(gzip.decompress((fixtures_dir / "traces" / KINETO).read_bytes()))
    assert detect(plain) == "kineto"
    rows, meta = import_any(plain)
    out = write_trace(tmp_path / "run.data", rows, meta)
    assert detect(out) == "rooftop"
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for n in (RANK0, RANK1):
        shutil.copyfile(fixtures_dir / "traces" / n, ranks / n.split("__")[-1])
    assert detect(ranks) == "kineto-dir"
    (tmp_path / "nothing").mkdir()
    assert detect(tmp_path / "nothing") == "unknown"
    for content in (b"", b"hello world", b'{"a": 1}', b"\x1f\x8b garbage"):
        (tmp_path / "u").write_bytes(content)
        assert detect(tmp_path / "u") == "unknown"
    csv = tmp_path / "noise.log"
    csv.write_text("==PROF== Connected to process 1\n==PROF== Disconnected\n")
    assert detect(csv) == "ncu-csv"


def test_nsys_rep_and_unknown_are_one_line_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nsys: the message gives the export command
    monkeypatch.delenv("NSYS", raising=False)
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"\x00\x01binary")
    with pytest.raises(TraceError, match="nsys export --type sqlite") as info:  # (no nsys here: NsysMissing)
        open_trace(rep)
    assert "\n" not in str(info.value)
    junk = tmp_path / "junk.json"
    junk.write_text("not a trace")
    with pytest.raises(TraceError, match="unrecognised"):
        import_any(junk)
    with pytest.raises(TraceError, match="no such file"):
        open_trace(tmp_path / "missing.json")


def test_open_trace_converts_in_memory(fixtures_dir):
    for name, kernels in ((RANK0, 1154), (NSYS, 12)):
        trace = open_trace(fixtures_dir / "traces" / name)
        assert trace.path == str(fixtures_dir / "traces" / name)
        assert int((trace.events["kind"] == "kernel").sum()) == kernels
        assert trace.meta["format"] == 1 and not trace.modeled
        assert len(trace.timed()) >= kernels


def test_open_trace_kineto_dir_has_ranks(fixtures_dir, tmp_path):
    for n in (RANK0, RANK1):
        shutil.copyfile(fixtures_dir / "traces" / n, tmp_path / n.split("__")[-1])
    trace = open_trace(tmp_path)
    assert trace.ranks == [0, 1]
    assert [r["rank"] for r in trace.meta["ranks"]] == [0, 1]


def _args(src, output=None):
    p = argparse.ArgumentParser()
    import_command.add_arguments(p)
    return p.parse_args([str(src)] + (["-o", str(output)] if output else []))


def test_cli_run_default_output_and_roundtrip(fixtures_dir, tmp_path, capsys):
    src = tmp_path / "my.pt.trace.json.gz"
    shutil.copyfile(fixtures_dir / "traces" / RANK0, src)
    assert importers.run(_args(src)) == 0
    out = tmp_path / "my.rooftop.parquet"
    assert capsys.readouterr().out.strip() == str(out)
    direct, _ = import_any(src)
    trace = load_trace(out)
    assert len(trace.events) + len(trace.host) == len(direct)  # runtime calls load apart, as `host`
    assert int(trace.events["dur_ns"].sum()) + int(trace.host["dur_ns"].sum()) == int(direct["dur_ns"].sum())
    assert trace.meta["source"]["tool"] == "kineto"
    sq = tmp_path / "p.sqlite"
    shutil.copyfile(fixtures_dir / "traces" / NSYS, sq)
    assert importers.run(_args(sq, tmp_path / "o" / "n.parquet")) == 0
    back = load_trace(tmp_path / "o" / "n.parquet")
    # 12 kernels + 30 memcpy + 17 memset + 76 NVTX ranges, and the 184 CUDA runtime calls (host side)
    assert len(back.events) == 135 and len(back.host) == 184


def test_cli_run_dir_writes_rank_files(fixtures_dir, tmp_path):
    src = tmp_path / "job"
    src.mkdir()
    for n in (RANK0, RANK1):
        shutil.copyfile(fixtures_dir / "traces" / n, src / n.split("__")[-1])
    assert importers.run(_args(src)) == 0
    assert default_output(src, "kineto-dir") == tmp_path / "job.rooftop"
    assert load_trace(tmp_path / "job.rooftop").ranks == [0, 1]


def test_progress_line_only_for_large_inputs():
    buf = io.StringIO()
    bar = importers._ProgressLine("big.json", stream=buf, min_bytes=100)
    bar(10, 50)
    bar.stage("joining")  # a small file's stages are as quiet as its bytes
    assert buf.getvalue() == ""
    bar(50, 200)
    bar.done()
    assert buf.getvalue() == "\rimporting big.json:  25% (0/0 MB)\n"
    staged = io.StringIO()  # a stage follows the last reading, even one the throttle kept off screen
    bar = importers._ProgressLine("big\x1b[2J.json", stream=staged, min_bytes=100, size=300)
    bar(100 << 20, 300 << 20)
    bar(300 << 20, 300 << 20)
    bar.stage("joining")
    assert staged.getvalue() == ("\rimporting big\\x1b[2J.json:  33% (100/300 MB)"
                                 "\rimporting big\\x1b[2J.json: 300 MB read · joining")
    narrow = io.StringIO()  # a terminal's line is cut to its width: `\r` would not reach a wrapped one
    bar = importers._ProgressLine("a-long-trace-name.pt.trace.json", stream=narrow, min_bytes=0, size=300)
    bar.columns = 40
    bar(300 << 20, 300 << 20)
    bar.stage("joining launches and ranges")
    assert [len(x) for x in narrow.getvalue().split("\r")[1:]] == [40, 40]
    assert narrow.getvalue().endswith("…")
    early = io.StringIO()  # the early start's inflation of a gzip file says so
    importers._ProgressLine("big.json.gz", stream=early, min_bytes=100, verb="inflating")(3 << 20, 6 << 20)
    assert early.getvalue() == "\rinflating big.json.gz:  50% (3/6 MB)"


def test_nsys_progress_is_in_stages_and_shown_for_a_large_file(fixtures_dir):
    calls = []
    from collectors.readers.nsys import read_nsys
    read_nsys(fixtures_dir / "traces" / NSYS, lambda *a: calls.append(a))
    assert calls == [(1, 4, "stages"), (2, 4, "stages"), (3, 4, "stages"), (4, 4, "stages")]
    buf = io.StringIO()
    bar = importers._ProgressLine("run.sqlite", stream=buf, min_bytes=100, size=1000)
    bar(2, 4, "stages")
    assert buf.getvalue() == "\rimporting run.sqlite:  50% (stage 2 of 4)"
    quiet = io.StringIO()
    importers._ProgressLine("small.sqlite", stream=quiet, min_bytes=100, size=99)(2, 4, "stages")
    assert quiet.getvalue() == ""


@pytest.mark.parametrize("rel", ["ncu/AveryClapp__ESMM-Research__metrics.csv", "ncu/panjd123__cutlass__report.ncu-rep"])
def test_ncu_formats_dispatch_to_ncu_module(fixtures_dir, rel):
    if rel.endswith(".ncu-rep"):
        pytest.importorskip("ncu_report")
    trace = open_trace(fixtures_dir / rel)
    assert int((trace.events["kind"] == "kernel").sum()) == (9 if rel.endswith(".csv") else 3)


@pytest.mark.parametrize("typ", ["int32", "int64"])
def test_wild_launch_shapes_of_an_arrow_column_by_hand(typ):
    """Out-of-range launch shapes found in an Arrow column of [x, y, z] lists (as a Kineto join
    makes it): a negative or >= 2**31 part, never a null list (whatever its slot holds), through
    slices and chunks."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(5)
    n = 3_000
    vals = rng.integers(1, 1 << 12, (n, 3))
    vals[rng.random((n, 3)) < 0.01] = -4
    if typ == "int64":
        vals[rng.random((n, 3)) < 0.01] = 1 << 31
    null = rng.random(n) < 0.2
    col = pa.FixedSizeListArray.from_arrays(pa.array(vals.ravel(), typ), 3, mask=pa.array(null))
    want = ((vals < 0) | (vals >= 1 << 31)).any(axis=1) & ~null
    assert want.sum() > 20 and (((vals < 0).any(axis=1)) & null).any()  # wild parts under null lists too
    assert importers._wild_shapes(col).tolist() == want.tolist()
    assert importers._wild_shapes(col.slice(7, 500)).tolist() == want[7:507].tolist()
    chunked = pa.chunked_array([col.slice(0, 1000), col.slice(1000)])
    assert importers._wild_shapes(chunked).tolist() == want.tolist()
    lists = pa.array([None if m else list(v) for v, m in zip(vals.tolist(), null)], pa.list_(pa.int64()))
    assert importers._wild_shapes(lists).tolist() == want.tolist()  # variable-size lists: the per-part path
