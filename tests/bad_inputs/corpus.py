"""The bad-input corpus: each case builds one file (or directory) into a temporary folder.

Cases are mutations of real files (the third-party fixtures, read at test time and never written
into the repository, and the project's own `sample_traces/`) plus hand-made files for each format.
A case is only a recipe: `build(tmp, fixtures) -> Path`. `expect` says what a user must get:
"error" (exit 2, one line), "warn" (loads, with a warning), "ok" (loads), or None (either, as long
as it is clean: a corrupted byte may or may not matter).
"""
from __future__ import annotations

import gzip
import json
import random
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"

# Real files, by short label -> path relative to the fixtures folder (None: a project sample).
SOURCES = {
    "tiny": None, "modeled": None,
    "nccl": "traces/facebookresearch__HolisticTraceAnalysis__tests__data__nccl_parser_config__nccl_data.json.gz",
    "rank0": "traces/facebookresearch__HolisticTraceAnalysis__tests__data__trace_filter__sampled_rank-0.json.gz",
    "triton": "traces/facebookresearch__HolisticTraceAnalysis__tests__data__triton_example__triton_example.json.gz",
    "nsys": "traces/extra-p__extrap__tests__data__nsight__concurrent_example__concurrent.s1__profile1.sqlite",
    "ncurep": "ncu/AveryClapp__ESMM-Research__profile.ncu-rep",
    "ncucsv": "ncu/AveryClapp__ESMM-Research__metrics.csv",
}
_SAMPLE_FILES = {"tiny": "tiny-cpu.parquet", "modeled": "llama3-8b_h200_b1_fused.modeled.parquet"}
_SUFFIX = {"tiny": ".parquet", "modeled": ".parquet", "nccl": ".json.gz", "rank0": ".json.gz",
           "triton": ".json.gz", "nsys": ".sqlite", "ncurep": ".ncu-rep", "ncucsv": ".csv"}

ESC_NAME = "evil\x1b[2J\x1b]0;owned\x07[bold red]markup[/]\x9b31m\rkernel"
HF_TOKEN = "hf_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ"


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[Path, Path | None], Path]
    expect: str | None = None  # "error" | "warn" | "ok" | None
    fixtures: bool = False     # needs the third-party fixtures
    native: bool = False       # read by a native library (ncu_report): only ever in a subprocess

    def make(self, tmp: Path, fixtures: Path | None) -> Path:
        return self.build(tmp, fixtures)


def source_bytes(label: str, fixtures: Path | None) -> bytes:
    if SOURCES[label] is None:
        return (SAMPLES / _SAMPLE_FILES[label]).read_bytes()
    assert fixtures is not None
    return (fixtures / SOURCES[label]).read_bytes()


def _write(tmp: Path, name: str, data: bytes) -> Path:
    p = tmp / name
    p.write_bytes(data)
    return p


# --- mutations of real files -------------------------------------------------------------------

def _truncate(label: str, frac: float):
    def build(tmp, fx):
        data = source_bytes(label, fx)
        cut = max(1, min(len(data) - 1, int(len(data) * frac)))
        return _write(tmp, f"{label}-cut{cut}{_SUFFIX[label]}", data[:cut])
    return build


def _flip(label: str, seed: int, n: int = 8):
    def build(tmp, fx):
        data = bytearray(source_bytes(label, fx))
        rnd = random.Random(seed)
        for _ in range(n):
            i = rnd.randrange(len(data))
            data[i] ^= 1 << rnd.randrange(8)
        return _write(tmp, f"{label}-flip{seed}{_SUFFIX[label]}", bytes(data))
    return build


def _plain(label: str, frac: float):
    """A gzipped Kineto trace decompressed, then cut (a plain .json killed mid-write)."""
    def build(tmp, fx):
        data = gzip.decompress(source_bytes(label, fx))
        return _write(tmp, f"{label}-plaincut.json", data[: int(len(data) * frac)])
    return build


def _swap(label: str, header: bytes, keep: int | None = None):
    """Another format's magic bytes over the start of a real file."""
    def build(tmp, fx):
        data = source_bytes(label, fx)
        return _write(tmp, f"{label}-swap{_SUFFIX[label]}", header + data[len(header) if keep is None else keep:])
    return build


def _renamed(label: str, suffix: str):
    def build(tmp, fx):
        return _write(tmp, f"{label}-renamed{suffix}", source_bytes(label, fx))
    return build


def _mutation_cases() -> list[Case]:
    out = []
    for label in SOURCES:
        fx = SOURCES[label] is not None
        native = label == "ncurep"
        fracs = (0.0005, 0.01, 0.3, 0.5, 0.9, 0.9999) if not native else (0.01, 0.5, 0.99)
        for frac in fracs:
            out.append(Case(f"{label}-trunc{frac}", _truncate(label, frac), fixtures=fx, native=native))
        for seed in ((1, 2, 3) if not native else (1,)):
            out.append(Case(f"{label}-flip{seed}", _flip(label, seed), fixtures=fx, native=native))
    for label in ("nccl", "triton"):
        for frac in (0.2, 0.7):
            out.append(Case(f"{label}-plaincut{frac}", _plain(label, frac), fixtures=True))
    swaps = [("nccl", b"PAR1"), ("tiny", b"SQLite format 3\x00"), ("nsys", b"PAR1"), ("ncucsv", b"NVR\x00"),
             ("nsys", b"NVR\x00"), ("triton", b"\x1f\x8b\x08\x00")]
    for label, head in swaps:
        name = head[:4].decode("latin-1").strip("\x00\x1f\x8b\x08") or "gzip"
        out.append(Case(f"{label}-swap-{name}", _swap(label, head), expect="error", fixtures=SOURCES[label] is not None,
                        native=head.startswith(b"NVR")))
    # the right content under the wrong extension loads all the same (format comes from content)
    for label, suffix in (("tiny", ".json"), ("nsys", ".csv"), ("ncucsv", ".parquet"), ("rank0", ".sqlite")):
        out.append(Case(f"{label}-as{suffix}", _renamed(label, suffix), expect="ok", fixtures=SOURCES[label] is not None))
    return out


# --- hand-made files -----------------------------------------------------------------------------

def _bytes_case(name: str, data: bytes, expect: str | None = "error", native: bool = False) -> Case:
    return Case(f"raw-{name}", lambda tmp, fx: _write(tmp, name, data), expect=expect, native=native)


def _kineto_doc(events: list, **head) -> dict:
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}
    doc.update(head)
    doc["traceEvents"] = events
    return doc


def _kernel_ev(i: int, ts, dur, name="gemm_kernel", corr=None) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": 7, "correlation": i if corr is None else corr,
                     "grid": [1, 1, 1], "block": [128, 1, 1]}}


def _kineto(name: str, doc_or_text, expect: str | None = None) -> Case:
    def build(tmp, fx):
        text = doc_or_text if isinstance(doc_or_text, (str, bytes)) else json.dumps(doc_or_text)
        data = text.encode("utf-8") if isinstance(text, str) else text
        return _write(tmp, f"{name}.json", data)
    return Case(f"kineto-{name}", build, expect=expect)


def _kineto_cases() -> list[Case]:
    k = _kernel_ev
    big = "k" * 1_000_000
    deep = '{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}"
    latin = json.dumps(_kineto_doc([k(1, 10, 5, name="caf\u00e9")])).replace("caf\\u00e9", "caf\u00e9").encode("latin-1")
    return [
        _kineto("empty-object", {}, "error"),
        _kineto("top-array", "[]", "error"),
        _kineto("events-not-list", {"traceEvents": {"a": 1}}, "error"),
        _kineto("no-events", _kineto_doc([]), None),
        _kineto("no-kernels", _kineto_doc([{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                                             "ts": 1, "dur": 3}]), None),
        _kineto("events-scalars", _kineto_doc([1, "x", None, [], {"ph": 3}]), None),
        _kineto("ts-strings", _kineto_doc([k(1, "abc", "xyz"), k(2, 10, 5)]), None),
        _kineto("ts-nan", '{"traceEvents": [{"ph":"X","cat":"kernel","name":"k","ts":NaN,"dur":Infinity,'
                          '"args":{"correlation":1}}, {"ph":"X","cat":"kernel","name":"k2","ts":5,"dur":-Infinity}]}'),
        _kineto("ts-huge", _kineto_doc([k(1, 1e300, 1e300), k(2, -1e19, 5), k(3, 10, 2**70)])),
        _kineto("dur-negative", _kineto_doc([k(1, 10, -5), k(2, 20, 5)])),
        _kineto("args-not-dict", _kineto_doc([{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1,
                                               "args": [1, 2]}])),
        _kineto("name-not-string", _kineto_doc([{"ph": "X", "cat": "kernel", "name": {"a": 1}, "ts": 1, "dur": 1},
                                                {"ph": "X", "cat": "kernel", "name": None, "ts": 2, "dur": 1}])),
        _kineto("huge-name", _kineto_doc([k(1, 10, 5, name=big)])),
        _kineto("escape-name", _kineto_doc([k(1, 10, 5, name=ESC_NAME)])),
        _kineto("duplicate-correlation", _kineto_doc([k(1, 10, 5, corr=7), k(2, 12, 5, corr=7),
                                                      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1,
                                                       "tid": 1, "ts": 1, "dur": 30, "args": {"correlation": 7}}])),
        _kineto("out-of-order", _kineto_doc([k(i, 1000 - 10 * i, 50) for i in range(50)])),
        _kineto("deep-nesting", deep),
        _kineto("latin1", latin),
        _kineto("bom", "\ufeff" + json.dumps(_kineto_doc([k(1, 10, 5)]))),
        _kineto("device-props-junk", _kineto_doc([k(1, 10, 5)], deviceProperties="junk", distributedInfo=[1])),
        _kineto("secret-meta", _kineto_doc([k(1, 10, 5)], metadata={"HF_TOKEN": HF_TOKEN, "cmd": f"--token {HF_TOKEN}"},
                                           distributedInfo={"backend": "nccl", "rank": 0, "token": HF_TOKEN})),
        _kineto("step-absurd", _kineto_doc([{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#99999999999999999999",
                                             "pid": 1, "tid": 1, "ts": 0, "dur": 100}, k(1, 10, 5)])),
        _kineto("trailing-garbage", json.dumps(_kineto_doc([k(1, 10, 5)])) + "\x00\x00garbage{{{"),
    ]


def _parquet(name: str, expect: str | None, rows=None, meta=None, raw_meta: bytes | None = None,
             table: pa.Table | None = None) -> Case:
    def build(tmp, fx):
        from rooftop.trace import encode_meta, to_table
        t = table if table is not None else to_table(rows if rows is not None else [_row(0)])
        md = raw_meta if raw_meta is not None else encode_meta(meta if meta is not None else _meta())
        t = t.replace_schema_metadata({b"rooftop": md} if md != b"-" else None)
        p = tmp / f"{name}.parquet"
        pq.write_table(t, p)
        return p
    return Case(f"parquet-{name}", build, expect=expect)


def _row(i: int, **kw) -> dict:
    row = {"id": i, "kind": "kernel", "name": f"gemm_{i}", "start_ns": 1000 * i, "dur_ns": 500, "device": 0,
           "stream": 7, "path": f"decode/step={i % 3}/layer=0/attn", "model_flops": 1e6, "model_bytes": 1e4}
    row.update(kw)
    return row


def _meta(**kw) -> dict:
    m = {"format": 1, "source": {"tool": "test"}, "device": {"name": "NVIDIA H100 80GB HBM3"},
         "model": {"name": "tiny"}, "workload": {"batch": 1}, "steps": [], "modeled": False}
    m.update(kw)
    return m


def _absurd_paths(tmp, fx):
    """Paths whose step numbers overflow int32/int64 (written as stored columns, as other tools may)."""
    from rooftop.trace import encode_meta, to_table
    t = to_table([_row(0), _row(1), _row(2)])
    paths = pa.array(["decode/step=10000000/layer=99999999", "prefill/step=99999999999999999999999/layer=0",
                      "decode/step=-1/layer=" + "9" * 5000])
    t = t.set_column(t.schema.get_field_index("path"), "path", paths)
    t = t.replace_schema_metadata({b"rooftop": encode_meta(_meta())})
    pq.write_table(t, tmp / "absurd-step.parquet")
    return tmp / "absurd-step.parquet"


def _parquet_cases() -> list[Case]:
    rows = [_row(i) for i in range(6)]
    floaty = pa.table({"id": [0, 1], "kind": ["kernel", "kernel"], "name": ["a", "b"], "start_ns": [0.5, 1.0],
                       "dur_ns": [1.0, float("nan")]})
    nan_numbers = [_row(0, flops=float("nan"), dram_read=float("inf"), dram_write=-5.0, model_bytes=float("-inf"),
                        sm_pct=float("nan")), _row(1)]
    return [
        _parquet("no-meta", "error", raw_meta=b"-"),
        _parquet("meta-not-json", "error", raw_meta=b"{not json"),
        _parquet("meta-list", "error", raw_meta=b"[1, 2]"),
        _parquet("meta-bad-utf8", None, raw_meta=b'{"format": 1, "model": {"name": "\xff\xfe"}}'),
        _parquet("meta-deep", "error", raw_meta=b'{"format": 1, "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
        _parquet("future-version", "error", raw_meta=json.dumps(_meta(format=99)).encode()),
        _parquet("version-string", "error", raw_meta=json.dumps(_meta(format="1")).encode()),
        _parquet("meta-wrong-types", None, meta=_meta(device="H100", model=[1, 2], workload=5, steps="x",
                                                       source=None, peaks="y", warnings="not a list")),
        _parquet("meta-wrong-types2", None, meta=_meta(device={"name": 5, "peaks": {"datasheet": "x", "measured": [1]},
                                                               "sms": "many", "cc": None},
                                                       model={"name": None, "layers": "x", "hidden": -1},
                                                       workload={"batch": "b", "dtype": 3},
                                                       steps=[{"phase": 1, "index": "x"}, 5, None])),
        _parquet("missing-dur", "error", table=pa.table({"id": [0], "kind": ["kernel"], "name": ["a"], "start_ns": [0]})),
        _parquet("float-times", "error", table=floaty),
        _parquet("negative-dur", "error", rows=[_row(0, dur_ns=-5), _row(1)]),
        _parquet("null-times", "warn", rows=[_row(0, start_ns=None), _row(1, dur_ns=None), _row(2)]),
        _parquet("nan-numbers", "warn", rows=nan_numbers),
        _parquet("zero-rows", None, rows=[]),
        _parquet("ranges-only", None, rows=[{"id": 0, "kind": "range", "name": "decode", "start_ns": 0, "dur_ns": 10,
                                             "path": "decode"}]),
        _parquet("unknown-kind", None, rows=[_row(0, kind="spaceship"), _row(1)]),
        _parquet("duplicate-ids", None, rows=[_row(0), _row(0, start_ns=5), _row(0, start_ns=9)]),
        _parquet("out-of-order", None, rows=[_row(i, start_ns=10_000 - 1000 * i, dur_ns=3000) for i in range(8)]),
        _parquet("huge-values", None, rows=[_row(0, start_ns=2**62, dur_ns=2**62), _row(1, start_ns=-(2**62)),
                                            _row(2, step=2**30, layer=-7, flops=1e308)]),
        _parquet("huge-name", None, rows=[_row(0, name="g" * 1_000_000, path="decode/" + "x" * 1_000_000), _row(1)]),
        Case("parquet-absurd-step", _absurd_paths),
        _parquet("escape-names", "ok", rows=[_row(0, name=ESC_NAME, path=f"decode/step=0/{ESC_NAME}", op=ESC_NAME),
                                             _row(1)],
                 meta=_meta(model={"name": ESC_NAME}, device={"name": ESC_NAME}, source={"tool": ESC_NAME},
                            warnings=[ESC_NAME])),
        _parquet("secret-meta", None, meta=_meta(source={"tool": "x", "env": {"HF_TOKEN": HF_TOKEN},
                                                         "command": f"serve --api-key {HF_TOKEN}"},
                                                 model={"name": f"model {HF_TOKEN}"},
                                                 warnings=[f"token {HF_TOKEN}"])),
        _parquet("mixed-encoding-names", None, rows=[_row(0, name="caf\udcff"[:3] + "\u00e9\u4e2d\U0001F600\u202e"),
                                                     _row(1, name="\x00nul\x00")]),
    ]


def _sqlite(name: str, script: str, expect: str | None = None, rows: dict | None = None) -> Case:
    def build(tmp, fx):
        p = tmp / f"{name}.sqlite"
        con = sqlite3.connect(p)
        con.executescript(script)
        for table, values in (rows or {}).items():
            for v in values:
                con.execute(f"INSERT INTO {table} VALUES ({','.join('?' * len(v))})", v)
        con.commit()
        con.close()
        return p
    return Case(f"nsys-{name}", build, expect=expect)


_KTABLE = ("CREATE TABLE StringIds (id INTEGER, value TEXT);"
           "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, streamId INTEGER,"
           " correlationId INTEGER, demangledName INTEGER, shortName INTEGER);"
           "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, correlationId INTEGER,"
           " globalTid INTEGER);"
           "CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, text TEXT, textId INTEGER,"
           " globalTid INTEGER);")


def _nsys_cases() -> list[Case]:
    return [
        _sqlite("empty-db", "CREATE TABLE t (x);", "error"),
        _sqlite("tables-empty", _KTABLE, None),
        _sqlite("no-columns", "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (foo TEXT); INSERT INTO"
                " CUPTI_ACTIVITY_KIND_KERNEL VALUES ('x');", None),
        _sqlite("junk-values", _KTABLE, None, rows={
            "StringIds": [(1, "k1"), ("x", b"\xff\xfe"), (None, None)],
            "CUPTI_ACTIVITY_KIND_KERNEL": [(10, 5, 0, 7, 1, 1, 1), ("a", "b", "c", None, None, 99, None),
                                           (None, None, None, None, None, None, None), (1e300, -1e300, 0, 0, 2, 3.5, 1),
                                           (2**62, 2**63 - 1, 0, 0, 3, 1, 1)],
            "CUPTI_ACTIVITY_KIND_RUNTIME": [(1, 2, 1, 5), (1, 2, 1, 5), ("x", None, "y", "z")],
            "NVTX_EVENTS": [(0, 100, 59, ESC_NAME, None, 5), (5, None, 59, None, 1, 5), (50, 10, 59, "bad", None, 5),
                            ("s", "e", 59, b"\xff\xfe", None, "t"), (0, 100, 60, None, 12345, None)]}),
        _sqlite("escape-and-secret", _KTABLE + "CREATE TABLE EXPORT_META_DATA (name TEXT, value TEXT);"
                "CREATE TABLE TARGET_INFO_GPU (id INTEGER, name TEXT);", None, rows={
                    "StringIds": [(1, ESC_NAME), (2, f"kernel_{HF_TOKEN}")],
                    "CUPTI_ACTIVITY_KIND_KERNEL": [(10, 20, 0, 7, 1, 1, 1), (30, 40, 0, 7, 2, 2, 2)],
                    "CUPTI_ACTIVITY_KIND_RUNTIME": [(5, 6, 1, 1), (25, 26, 2, 1)],
                    "NVTX_EVENTS": [(0, 100, 59, "decode", None, 1)],
                    "EXPORT_META_DATA": [("HF_TOKEN", HF_TOKEN), ("EXPORT_PRODUCT_VERSION", ESC_NAME)],
                    "TARGET_INFO_GPU": [(0, ESC_NAME)]}),
        _sqlite("views-not-tables", "CREATE TABLE x (a); CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS SELECT 1 AS start;",
                "error"),
    ]


def _csv_cases() -> list[Case]:
    head = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Section Name",' \
           '"Metric Name","Metric Unit","Metric Value"\n'

    def line(i, name, metric, unit, value):
        return f'"{i}","1","app","host","{name}","1","7","S","{metric}","{unit}","{value}"\n'
    ok = line(0, "k", "gpu__time_duration.sum", "usecond", "1.5")
    return [
        _bytes_case("prof-only.csv", b"==PROF== Connected to process 1\n==PROF== Disconnected\n"),
        _bytes_case("header-only.csv", head.encode()),
        _bytes_case("csv-junk-cells.csv", (head + line(0, "k", "gpu__time_duration.sum", "usecond", "nan") +
                                           line(0, "k", "dram__bytes.sum", "Gbyte", "inf") +
                                           line(0, "k", "dram__bytes_read.sum", "byte", "-1e400") +
                                           line(1, "k2", "gpu__time_duration.sum", "furlong", "1,2,3,4") +
                                           line(2, "k3", "gpu__time_duration.sum", "usecond", "1e999") +
                                           line("x", "k4", "gpu__time_duration.sum", "", "-5")).encode(), None),
        _bytes_case("csv-ragged.csv", (head + ok + '"1","2"\n"unterminated\n' + ok).encode(), None),
        _bytes_case("csv-escape.csv", (head + line(0, ESC_NAME.replace('"', ""), "gpu__time_duration.sum", "usecond",
                                                   "2")).encode(), "ok"),
        _bytes_case("csv-huge-name.csv", (head + line(0, "n" * 1_000_000, "gpu__time_duration.sum", "usecond",
                                                      "2")).encode(), None),
        _bytes_case("csv-utf16.csv", (head + ok).encode("utf-16"), "ok"),  # ncu on Windows writes UTF-16: read
        _bytes_case("csv-latin1.csv", (head + line(0, "caf\u00e9", "gpu__time_duration.sum", "usecond", "2")).encode("latin-1"),
                    None),
        _bytes_case("csv-duplicate-ids.csv", (head + ok + ok + line(0, "other", "gpu__time_duration.sum", "usecond",
                                                                   "3")).encode(), None),
    ]


def _other_cases() -> list[Case]:
    def directory(files: dict[str, bytes]):
        def build(tmp, fx):
            d = tmp / "run"
            d.mkdir()
            for name, data in files.items():
                (d / name).parent.mkdir(parents=True, exist_ok=True)
                (d / name).write_bytes(data)
            return d
        return build

    def good_dir(tmp, fx):
        d = tmp / "ranks"
        from rooftop.trace import write_trace
        write_trace(d / "rank=0" / "trace.parquet", [_row(0)], _meta())
        (d / "rank=1").mkdir()
        (d / "rank=1" / "trace.parquet").write_bytes(b"PAR1garbage")
        return d

    return [
        _bytes_case("empty.parquet", b""),
        _bytes_case("empty.json", b""),
        _bytes_case("empty.sqlite", b""),
        _bytes_case("empty.ncu-rep", b""),
        _bytes_case("zeros.bin", b"\0" * 4096),
        _bytes_case("random.bin", random.Random(7).randbytes(50_000)),
        _bytes_case("magic-only.parquet", b"PAR1"),
        _bytes_case("magic-both.parquet", b"PAR1PAR1"),
        _bytes_case("magic-only.sqlite", b"SQLite format 3\x00"),
        _bytes_case("magic-garbage.ncu-rep", b"NVR\x00" + random.Random(3).randbytes(5000), native=True),
        _bytes_case("html.json", b"<!DOCTYPE html><html><body>404</body></html>"),
        _bytes_case("gzip-garbage.json.gz", b"\x1f\x8b\x08\x00" + random.Random(5).randbytes(2000)),
        _bytes_case("gzip-empty.json.gz", gzip.compress(b"")),
        _bytes_case("trace.nsys-rep", b"\x00\x01nsys"),
        Case("dir-empty", directory({}), expect="error"),
        Case("dir-bad-parquet", directory({"rank=0/trace.parquet": b"not parquet"}), expect="error"),
        Case("dir-one-rank-bad", good_dir, expect=None),
        Case("dir-kineto-junk", directory({"rank0.json": b'{"traceEvents": [', "rank1.json": b"{}"}), expect=None),
    ]


# --- issue 13: hostile files (second pass) --------------------------------------------------------

# One token of each shape rooftop scrubs (built from pieces so no scanner mistakes this file for a leak).
SECRETS = {
    "hf": "hf_" + "Q" * 30, "ghp": "ghp_" + "a1" * 18, "ghs": "ghs_" + "b2" * 18, "ghu": "ghu_" + "c3" * 18,
    "ghr": "ghr_" + "d4" * 18, "github_pat": "github_pat_" + "11AB" * 8, "glpat": "glpat-" + "e5" * 10,
    "npm": "npm_" + "f6" * 18, "slack": "xoxb-" + "1234567890-abcdefghij", "stripe": "sk_live_" + "g7" * 12,
    "stripe_rk": "rk_live_" + "h8" * 12, "google": "AIza" + "Sy" + "i9" * 17, "aws_id": "AKIA" + "ABCDEFGHIJKLMNOP",
    "aws_sts": "ASIA" + "QRSTUVWXYZ234567", "openai": "sk-" + "proj-" + "j0" * 20, "anthropic": "sk-ant-" + "api03-" + "k1" * 20,
    "gho": "gho_" + "l2" * 18, "slack_user": "xoxp-" + "2345678901-bcdefghijk", "openai_plain": "sk-" + "m3N4" * 12,
    "jwt": "eyJhbGciOiJIUzI1NiJ9" + "." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0" + "." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
}
# Secrets that only their context gives away: the value must go, the name may stay.
CONTEXT_SECRETS = {
    "aws_secret": ("aws_secret_access_key = ", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY"),
    "bearer": ("Authorization: Bearer ", "opaque.token-value_123456"),
    "url": ("https://alice:", "pa55w0rd-x1@example.com/repo.git"),
    "api_key": ("MY_SERVICE_API_KEY=", "zq8-opaque-value"),
    "token_env": ("GITLAB_TOKEN=", "opaque987value"),
    "secret_env": ("CLIENT_SECRET=", "opaque654value"),
    "json_field": ('{"access_token": "', 'ya29.opaque-json-value"}'),
    "json_api_key": ('{"api_key": "', 'opaque-json-api-key-321"}'),
    "token_flag": ("--hf-token ", "opaque-flag-value-987"),
}
SECRET_VALUES = list(SECRETS.values()) + [v.split("@")[0] for _, v in CONTEXT_SECRETS.values()]


def secret_strings() -> list[str]:
    """Every secret, bare and in its context, as the strings a trace would carry."""
    return [f"run --token {v}" if i % 2 else v for i, v in enumerate(SECRETS.values())] + \
        [k + v for k, v in CONTEXT_SECRETS.values()]


MARKUP = "[bold red]big[/] [@click=app.screenshot('pwned.svg')]click[/] [link=file:///etc/passwd]x[/link]"
BIDI = "abc\u202edcba\u200b\u2066x\u2069\ufeff\u00ad"
FORMULA = "=HYPERLINK(\"http://evil\",\"x\")"


def _secret_kineto(tmp, fx):
    """Every token shape in kernel names, NVTX ranges, ops and metadata of a Kineto trace."""
    evs, t = [], 0
    for i, sec in enumerate(secret_strings()):
        t += 100
        evs += [{"ph": "X", "cat": "user_annotation", "name": f"decode/{sec}", "pid": 1, "tid": 1, "ts": t, "dur": 90},
                {"ph": "X", "cat": "cpu_op", "name": f"aten::mm {sec}", "pid": 1, "tid": 1, "ts": t + 1, "dur": 20,
                 "args": {"External id": i + 1}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 2, "dur": 3,
                 "args": {"correlation": i + 1, "External id": i + 1}},
                _kernel_ev(i + 1, t + 5, 4, name=f"gemm_{sec}")]
    doc = _kineto_doc(evs, metadata={"cmdline": " ".join(secret_strings()), "env": {"HF_TOKEN": SECRETS["hf"]}},
                      distributedInfo={"backend": "nccl", "rank": 0, "note": SECRETS["slack"]})
    return _write(tmp, "secrets.json", json.dumps(doc).encode())


def _secret_parquet(kind: str):
    """Every secret in the text columns of a Parquet trace stored as `kind` strings (dictionary,
    large or plain) and in its metadata."""
    def build(tmp, fx):
        from rooftop.trace import encode_meta
        secs = secret_strings()
        rows = [_row(i, name=f"k_{s}", path=f"decode/step=0/{s}", op=f"aten::mm {s}") for i, s in enumerate(secs)]
        from rooftop.trace import to_table
        t = to_table(rows)
        for c in ("name", "path", "op", "short_name"):
            i = t.schema.get_field_index(c)
            col = t.column(c)
            if pa.types.is_dictionary(col.type):
                col = col.cast(pa.string())
            t = t.set_column(i, c, {"dict": col.dictionary_encode(), "large": col.cast(pa.large_string()),
                                    "plain": col.cast(pa.string())}[kind])
        md = encode_meta(_meta(source={"tool": "x", "file": "/home/alice/secret-project/run.json",
                                       "cmd": " ".join(secs)},
                               model={"name": secs[0]}, device={"name": "NVIDIA H100 80GB HBM3",
                                                                   "note": secs[1]}, notes=secs))
        t = t.replace_schema_metadata({b"rooftop": md})
        p = tmp / f"secrets-{kind}.parquet"
        pq.write_table(t, p)
        return p
    return build


def _secret_nsys(tmp, fx):
    secs = secret_strings()
    return _sqlite("secrets", _KTABLE + "CREATE TABLE EXPORT_META_DATA (name TEXT, value TEXT);", None, rows={
        "StringIds": [(i + 1, f"kernel_{s}") for i, s in enumerate(secs)],
        "CUPTI_ACTIVITY_KIND_KERNEL": [(10 * i, 10 * i + 5, 0, 7, i + 1, i + 1, i + 1) for i in range(len(secs))],
        "CUPTI_ACTIVITY_KIND_RUNTIME": [(10 * i - 2, 10 * i - 1, i + 1, 1) for i in range(len(secs))],
        "NVTX_EVENTS": [(0, 10 * len(secs) + 10, 59, f"decode {secs[0]}", None, 1)],
        "EXPORT_META_DATA": [("EXPORT_PRODUCT_VERSION", secs[2])]}).build(tmp, fx)


def _secret_csv(tmp, fx):
    head = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Section Name",' \
           '"Metric Name","Metric Unit","Metric Value"\n'
    body = "".join(f'"{i}","1","app","host","k_{s.replace(chr(34), "")}","1","7","S","gpu__time_duration.sum",'
                   f'"usecond","1.5"\n' for i, s in enumerate(secret_strings()))
    return _write(tmp, "secrets.csv", (head + body).encode())


def _interpreted_parquet(tmp, fx):
    """Markup, bidi overrides, zero-width characters and formulas in every place a trace has text."""
    from rooftop.trace import encode_meta, to_table
    texts = [MARKUP, BIDI, FORMULA, "+cmd|' /C calc'!A0", "@SUM(1+1)", "-2+3", "\tx", ESC_NAME]
    rows = [_row(i, name=t, path=f"decode/step={i}/{t}", op=t) for i, t in enumerate(texts)]
    t = to_table(rows).replace_schema_metadata({b"rooftop": encode_meta(_meta(
        device={"name": MARKUP}, model={"name": BIDI}, source={"tool": FORMULA}, warnings=[MARKUP, BIDI]))})
    p = tmp / "interpreted.parquet"
    pq.write_table(t, p)
    return p


def _deep_ranges(tmp, fx, depth: int = 3000):
    """Thousands of NVTX ranges inside each other, each with a long label: linear, not quadratic."""
    evs = [{"ph": "X", "cat": "user_annotation", "name": f"r{i}_" + "x" * 200, "pid": 1, "tid": 1,
            "ts": i, "dur": 2 * depth - 2 * i} for i in range(depth)]
    evs += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": depth + 1, "dur": 1,
             "args": {"correlation": 1}}, _kernel_ev(1, depth + 3, 2)]
    return _write(tmp, "deep-ranges.json", json.dumps(_kineto_doc(evs)).encode())


def _malformed_mid(tmp, fx, n: int = 60_000):
    """A syntax error half-way through a large events array: found once, not retried per chunk."""
    evs = [json.dumps(_kernel_ev(i, 10 + i, 5)) for i in range(n)]
    evs[n // 2] = evs[n // 2].replace('"ph": "X"', '"ph": X')
    text = '{"schemaVersion": 1, "traceEvents": [' + ",".join(evs) + "]}"
    return _write(tmp, "malformed-mid.json", text.encode())


def _malformed_head(tmp, fx, n: int = 60_000):
    evs = [json.dumps(_kernel_ev(i, 10 + i, 5)) for i in range(n)]
    text = '{"schemaVersion": 1, "deviceProperties": [1,,2], "traceEvents": [' + ",".join(evs) + "]}"
    return _write(tmp, "malformed-head.json", text.encode())


def _gzip_bomb(tmp, fx):
    """~320 MB of whitespace in a ~0.3 MB gzip: refused by the decompression budget, quickly."""
    import zlib
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [co.compress(b'{"traceEvents": [')]
    block = b" " * (16 << 20)
    parts += [co.compress(block) for _ in range(20)]
    parts += [co.compress(b"]}"), co.flush()]
    return _write(tmp, "bomb.json.gz", b"".join(parts))


def _absurd_patterns(tmp, fx):
    """Names built to make a backtracking regex quadratic, in every text column."""
    bad = ["(" * 200_000 + ")", "-eyJ" * 50_000, "ampere_" * 30_000, "a=" * 100_000 + "token",
           "token=" * 40_000, "://a:" * 40_000, "/step=" + "1" * 200_000, "<" * 200_000]
    return _write(tmp, "absurd.json", json.dumps(_kineto_doc(
        [{"ph": "X", "cat": "user_annotation", "name": b, "pid": 1, "tid": 1, "ts": 0, "dur": 100} for b in bad] +
        [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10 + i, "dur": 1,
          "args": {"correlation": i + 1}} for i in range(len(bad))] +
        [_kernel_ev(i + 1, 20 + i, 2, name=b) for i, b in enumerate(bad)])).encode())


def _bad_events(tmp, fx):
    """One bad event of each kind among good ones: each is dropped (or cleaned) with a warning."""
    k = _kernel_ev
    good = [k(i, 100 + 10 * i, 5) for i in range(1, 6)]
    bad = [k(100, "NaN", 5), k(101, "1e400", 5), k(102, 1e300, 5), k(103, 30, 5, name="lone\udcffsurrogate"),
           dict(k(104, 40, 5), args={"correlation": 104, "grid": [2 ** 40, 1, 1], "block": [128, 1, 1]}),
           dict(k(105, 50, 5), args={"correlation": 105, "grid": [1, 1, 1], "block": [-1, 1, 1]}),
           dict(k(106, 60, 5), args={"correlation": 106, "registers per thread": 2 ** 40}),
           dict(k(107, 70, 5), args={"correlation": 107, "device": 2 ** 40})]
    return _write(tmp, "bad-events.json", json.dumps(_kineto_doc(good + bad)).encode())


def _wrong_arrow_type(column: str, arr_of):
    def build(tmp, fx):
        from rooftop.trace import encode_meta, to_table
        t = to_table([_row(i) for i in range(4)])
        arr = arr_of(t.num_rows)
        t = t.set_column(t.schema.get_field_index(column), column, arr) if column in t.column_names \
            else t.append_column(column, arr)
        t = t.replace_schema_metadata({b"rooftop": encode_meta(_meta())})
        p = tmp / f"type-{column}.parquet"
        pq.write_table(t, p)
        return p
    return build


_WRONG = {
    "text": lambda n: pa.array([b"\xff\xfe"] * n, pa.binary()),
    "number": lambda n: pa.array([1.5] * n),
    "struct": lambda n: pa.array([{"a": 1}] * n),
    "list": lambda n: pa.array([["a", "b"]] * n),
    "big": lambda n: pa.array([2 ** 40] * n, pa.int64()),
}


def _meta_cases() -> list[Case]:
    nan_meta = b'{"format": 1, "device": {"name": "x", "peaks": {"datasheet": {"bf16": NaN, "bw": Infinity}}},' \
               b' "model": {"layers": 1e999, "hidden": 123456789012345678901234567890}, "x": -Infinity}'
    return [
        _parquet("meta-too-deep", "error", raw_meta=b'{"format": 1, "x": ' + b"[" * 500 + b"]" * 500 + b"}"),
        _parquet("meta-not-json-safe", None, raw_meta=nan_meta),
        _parquet("meta-lone-surrogate", None, raw_meta=b'{"format": 1, "model": {"name": "a\\udcffb"}}'),
    ]


def robust_cases() -> list[Case]:
    """Issue 13's classes: secrets in every source, text that must not be interpreted, bounded work,
    one bad event, every wrong Arrow type, metadata that is too deep or not JSON-safe."""
    cases = [
        Case("r13-secrets-kineto", _secret_kineto), Case("r13-secrets-parquet-dict", _secret_parquet("dict")),
        Case("r13-secrets-parquet-large", _secret_parquet("large")),
        Case("r13-secrets-parquet-plain", _secret_parquet("plain")), Case("r13-secrets-nsys", _secret_nsys),
        Case("r13-secrets-csv", _secret_csv), Case("r13-interpreted", _interpreted_parquet, expect="ok"),
        Case("r13-deep-ranges", _deep_ranges, expect="warn"), Case("r13-malformed-mid", _malformed_mid, expect="warn"),
        Case("r13-malformed-head", _malformed_head, expect="error"), Case("r13-gzip-bomb", _gzip_bomb, expect="error"),
        Case("r13-absurd-patterns", _absurd_patterns, expect="warn"), Case("r13-bad-events", _bad_events, expect="warn"),
        _bytes_case("r13-bom.csv", b"\xef\xbb\xbf" + b'"ID","Process ID","Process Name","Host Name","Kernel Name",'
                    b'"Context","Stream","Section Name","Metric Name","Metric Unit","Metric Value"\n'
                    b'"0","1","app","host","k","1","7","S","gpu__time_duration.sum","usecond","1.5"\n', expect="ok"),
    ]
    for column in ("name", "kind", "start_ns", "dur_ns", "id", "path", "op", "device", "step", "grid", "flops",
                   "counters", "sm_pct", "stall_wait", "phase", "rank"):
        for label, arr in _WRONG.items():
            expect = "error" if column in ("name", "kind", "start_ns", "dur_ns", "id") and label != "big" \
                else None
            cases.append(Case(f"r13-type-{column}-{label}", _wrong_arrow_type(column, arr), expect=expect))
    return cases + _meta_cases()


# --- issue 38: the third round ------------------------------------------------------------------

_OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
_JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlLXNpZ25hdHVyZQ"


def _r38_kineto(name: str, events: list[str], tail: str = "", expect: str | None = None) -> Case:
    text = '{"schemaVersion": 1, "traceEvents": [' + ",".join(events) + "]" + tail + "}"
    return Case(f"r38-{name}", lambda tmp, fx: _write(tmp, f"r38-{name}.json", text.encode()), expect=expect)


def _r38_event(i: int, ts: str = None, dur: str = None, name: str = "gemm_kernel") -> str:
    text = json.dumps(_kernel_ev(i, 10 + i, 5, name=name))
    if ts is not None:
        text = text.replace(f'"ts": {10 + i}', f'"ts": {ts}')
    if dur is not None:
        text = text.replace('"dur": 5', f'"dur": {dur}')
    return text


def _r38_hostile_parquet(tmp, fx):
    """Escapes in the phase and category columns (which the text report once printed raw)."""
    from rooftop.trace import encode_meta, to_table
    rows = [_row(i, phase=f"decode{_OSC52}", category=f"gemm\x9b2J{BIDI}") for i in range(6)]
    p = tmp / "r38-hostile-phase.parquet"
    pq.write_table(to_table(rows).replace_schema_metadata({b"rooftop": encode_meta(_meta())}), p)
    return p


def _r38_generated_sqlite(tmp, fx):
    import sqlite3
    p = tmp / "r38-generated.sqlite"
    c = sqlite3.connect(p)
    c.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, raw TEXT,"
              " value TEXT GENERATED ALWAYS AS (replace(replace(raw, 'a', 'aaaa'), 'a', 'aaaa')) VIRTUAL)")
    c.execute("INSERT INTO StringIds (id, raw) VALUES (1, 'a')")
    c.commit()
    c.close()
    return p


def _r38_inflated_ncu_rep(tmp, fx):
    """One record length of a real report inflated by 7: NVIDIA's reader aborts on it."""
    import struct
    data = bytearray(source_bytes("ncurep", fx))
    off, k = 10, 0
    while k < 20:
        (n,) = struct.unpack_from("<I", data, off)
        off, k = off + 4 + n, k + 1
    (n,) = struct.unpack_from("<I", data, off)
    struct.pack_into("<I", data, off, n + 7)
    return _write(tmp, "r38-inflated.ncu-rep", bytes(data))


def r38_cases() -> list[Case]:
    """Issue 38's classes: numbers beyond any range, a valid layout once read as malformed, a JWT
    inside a name, escapes in the phase and category columns, a generated nsys column, a report
    that aborts NVIDIA's reader."""
    good = [_r38_event(i) for i in range(8)]
    return [
        _r38_kineto("huge-ts", good + [_r38_event(90, ts="1e999999999"), _r38_event(91, dur="-1e999999999")], expect="warn"),
        _r38_kineto("digits", good + [_r38_event(92, ts="9" * 5000)], expect="warn"),
        _r38_kineto("layout", good, ', "distributedInfo": {"a": {"b": [1, {"c": 2}]}}, "traceName": "x"', expect="ok"),
        _r38_kineto("jwt-name", good + [_r38_event(93, name=f"gemm_{_JWT}_kernel")], expect="ok"),
        Case("r38-hostile-phase", _r38_hostile_parquet, expect="ok"),
        Case("r38-generated-sqlite", _r38_generated_sqlite, expect="error"),
        Case("r38-inflated-ncu-rep", _r38_inflated_ncu_rep, expect="error", fixtures=True, native=True),
    ]


def all_cases() -> list[Case]:
    return _mutation_cases() + _kineto_cases() + _parquet_cases() + _nsys_cases() + _csv_cases() + _other_cases() \
        + robust_cases() + r38_cases()


CASES = all_cases()
CASE_IDS = [c.name for c in CASES]
