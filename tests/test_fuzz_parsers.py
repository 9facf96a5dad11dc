"""Property tests: whatever bytes, JSON or CSV cells a parser meets, it raises nothing but a TraceError
subclass (one line, naming the file), or returns rows."""
from __future__ import annotations

import os
import json
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from rooftop.trace import TraceError, load_trace

SETTINGS = settings(max_examples=int(os.environ.get("ROOFTOP_FUZZ_EXAMPLES", 25)), deadline=None, suppress_health_check=[HealthCheck.too_slow])


_DIR: Path | None = None  # this module's examples' files, removed when its tests are done


@pytest.fixture(scope="module", autouse=True)
def _examples_dir():
    """(Hypothesis runs many examples per test, and a function-scoped `tmp_path` is shared by them:
    each example gets a directory of its own here, all removed at the end, not left in /tmp.)"""
    global _DIR
    with tempfile.TemporaryDirectory(prefix="rooftop-fuzz-") as d:
        _DIR = Path(d)
        yield
    _DIR = None


def _file(data: bytes, name: str) -> Path:
    d = Path(tempfile.mkdtemp(dir=_DIR))
    p = d / name
    p.write_bytes(data)
    return p


def _only_trace_errors(fn, path: Path):
    try:
        fn(path)
    except TraceError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)


# --- Kineto ---------------------------------------------------------------------------------------

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20))
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                            st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                           max_leaves=20)
_KEYS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id")
_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "cpu_op", "cuda_runtime", "cuda_driver", "user_annotation",
         "gpu_user_annotation", "python_function", "ac2g")
_ARG_KEYS = ("device", "stream", "correlation", "External id", "grid", "block", "bytes", "Input Dims",
             "registers per thread", "shared memory")
event = st.fixed_dictionaries({}, optional={
    "ph": st.sampled_from(["X", "B", "E", "i", "s", "f"]) | json_values,
    "cat": st.sampled_from(_CATS) | json_values,
    "name": st.text(max_size=30) | json_values,
    "pid": st.integers() | json_values, "tid": st.integers() | json_values,
    "ts": st.integers() | st.floats() | json_values, "dur": st.integers() | st.floats() | json_values,
    "args": st.dictionaries(st.sampled_from(_ARG_KEYS), json_values, max_size=4) | json_values,
})


def _read_kineto(path):
    from collectors.readers.kineto import read_kineto
    read_kineto(path)


@SETTINGS
@given(st.binary(max_size=2000))
def test_kineto_random_bytes(data):
    _only_trace_errors(_read_kineto, _file(data, "t.json"))


@settings(SETTINGS)
@given(st.lists(event, max_size=8), st.dictionaries(st.sampled_from(["deviceProperties", "distributedInfo",
                                                                     "baseTimeNanoseconds", "schemaVersion"]),
                                                   json_values, max_size=3))
def test_kineto_random_events(events, head):
    doc = dict(head)
    doc["traceEvents"] = events
    _only_trace_errors(_read_kineto, _file(json.dumps(doc).encode(), "t.json"))


@SETTINGS
@given(st.lists(event, max_size=8))
def test_kineto_random_events_through_the_importer(events):
    """What a user meets: `open_trace` turns whatever the Kineto reader raises into one line."""
    from collectors.open import open_trace

    _only_trace_errors(open_trace, _file(json.dumps({"traceEvents": events}).encode(), "t.json"))


# --- ncu CSV ----------------------------------------------------------------------------------------

_HEAD = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
         "Grid Size", "Section Name", "Metric Name", "Metric Unit", "Metric Value"]
_METRICS = ("gpu__time_duration.sum", "dram__bytes_read.sum", "Duration", "DRAM Throughput",
            "launch__grid_dim_x", "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio")
cell = st.one_of(st.text(max_size=12), st.sampled_from(["n/a", "nan", "inf", "-1e400", "1,073,741,824", "2.508.800",
                                                        "9,00", "", "-", "(1, 1, 1)", "0x1f"]))
row = st.tuples(cell, cell, cell, cell, cell, cell, cell, cell, cell, cell,
                st.sampled_from(_METRICS) | cell,
                st.sampled_from(["usecond", "byte", "Gbyte/second", "%", "Mhz", ""]) | cell, cell)


def _csv_line(cells) -> str:
    return ",".join('"' + str(c).replace('"', '""') + '"' for c in cells)


def _read_csv(path):
    from collectors.readers.ncu_csv import read_ncu_csv
    read_ncu_csv(path)


@SETTINGS
@given(st.lists(row, max_size=6), st.booleans())
def test_ncu_csv_random_cells(rows, prof_noise):
    lines = (["==PROF== Connected"] if prof_noise else []) + [_csv_line(_HEAD)] + [_csv_line(r) for r in rows]
    _only_trace_errors(_read_csv, _file("\n".join(lines).encode(), "m.csv"))


@SETTINGS
@given(st.binary(max_size=2000))
def test_ncu_csv_random_bytes(data):
    _only_trace_errors(_read_csv, _file(b'"ID","Kernel Name"\n' + data, "m.csv"))


# --- the Parquet validator ----------------------------------------------------------------------------

_COLUMN = st.sampled_from(["id", "kind", "name", "start_ns", "dur_ns", "path", "flops", "dram_read", "step",
                           "phase", "grid", "counters", "stall_wait"])
_ARRAYS = {
    "int": lambda n: pa.array(list(range(-2, n - 2)), pa.int64()),
    "float": lambda n: pa.array([float("nan"), float("inf"), -1.0, 1e308][:n] + [0.5] * max(0, n - 4)),
    "str": lambda n: pa.array(["\x1b[31m", "[bold]x[/]", "hf_" + "a" * 30, "decode/step=99999999999"][:n]
                              + ["x"] * max(0, n - 4)),
    "null": lambda n: pa.nulls(n),
    "bool": lambda n: pa.array([True, None, False, True][:n] + [False] * max(0, n - 4)),
}


@SETTINGS
@given(st.dictionaries(_COLUMN, st.sampled_from(sorted(_ARRAYS)), min_size=1, max_size=8),
       st.integers(0, 5), json_values | st.binary(max_size=40))
def test_parquet_validator(columns, n, meta):
    table = pa.table({c: _ARRAYS[t](n) for c, t in columns.items()})
    if isinstance(meta, bytes):
        raw = meta
    else:
        doc = meta if isinstance(meta, dict) else {"x": meta}
        raw = json.dumps({**doc, "format": 1}).encode()
    table = table.replace_schema_metadata({b"rooftop": raw})
    path = _file(b"", "t.parquet")
    pq.write_table(table, path)

    def load_and_analyze(p):
        from rooftop.analysis import analyze
        analyze(load_trace(p))
    _only_trace_errors(load_and_analyze, path)
