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
        _bytes_case("csv-utf16.csv", (head + ok).encode("utf-16"), "error"),
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


def all_cases() -> list[Case]:
    return _mutation_cases() + _kineto_cases() + _parquet_cases() + _nsys_cases() + _csv_cases() + _other_cases()


CASES = all_cases()
CASE_IDS = [c.name for c in CASES]
