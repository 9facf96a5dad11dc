"""The rooftop trace file, format version 1: one Parquet table of events + a JSON metadata document.

A file is one run (or one rank of a run). A directory of such files (`rank=0/…`, `*rank*`) is one
multi-rank run. Everything a reader needs is in the file: no GPU, no torch, no rooftop required
(pyarrow, DuckDB and Spark read it as plain Parquet). One job per module: `schema` (columns, types,
`Trace`, `TraceError`), `build` (rows -> a conformed table), `write` (atomic writes), `read` (load a
file or a run), and what a load goes through: `inputs` (what can be opened), `parquet` (the file,
column by column), `meta` (the metadata document), `conform` (schema types, impossible values),
`scrubbing` (secrets out), `runtime` (the host rows apart), `frame` (Arrow to pandas), `runs`
(multi-rank directories).
"""
from .build import to_table
from .conform import conform_types, validate
from .inputs import check_input, is_parquet
from .meta import conform_meta, json_safe
from .read import load_trace, read_meta, trace_from_table
from .runs import NotOneRun, check_run_directory, parquet_files, run_files
from .scrubbing import scrub, scrub_all
from .schema import (COLUMNS, FORMAT_VERSION, KINDS, META_KEY, REQUIRED, SCHEMA, STALL_COLUMNS, STALL_REASONS,
                     Trace, TraceError)
from .write import check_writable, encode_meta, write_trace

__all__ = [
    "COLUMNS", "FORMAT_VERSION", "KINDS", "META_KEY", "NotOneRun", "REQUIRED", "SCHEMA", "STALL_COLUMNS", "STALL_REASONS",
    "Trace", "TraceError", "check_input", "check_run_directory", "check_writable", "conform_meta", "conform_types",
    "encode_meta", "is_parquet", "json_safe", "load_trace", "parquet_files", "read_meta", "run_files", "scrub",
    "scrub_all", "to_table", "trace_from_table", "validate", "write_trace",
]
