"""The rooftop trace file, format version 1: one Parquet table of events + a JSON metadata document.

A file is one run (or one rank of a run). A directory of such files (`rank=0/…`, `*rank*`) is one
multi-rank run. Everything a reader needs is in the file: no GPU, no torch, no rooftop required
(pyarrow, DuckDB and Spark read it as plain Parquet). One job per module: `schema` (columns, types,
`Trace`, `TraceError`), `build` (rows -> a conformed table), `write` (atomic writes), `read`
(load, validate, conform, scrub).
"""
from .build import to_table
from .read import (NotOneRun, check_input, check_run_directory, conform_meta, conform_types, is_parquet, json_safe,
                   load_trace, parquet_files, read_meta, run_files, scrub, scrub_all, trace_from_table, validate)
from .schema import (COLUMNS, FORMAT_VERSION, KINDS, META_KEY, REQUIRED, SCHEMA, STALL_COLUMNS, STALL_REASONS,
                     Trace, TraceError)
from .write import check_writable, encode_meta, write_trace

__all__ = [
    "COLUMNS", "FORMAT_VERSION", "KINDS", "META_KEY", "NotOneRun", "REQUIRED", "SCHEMA", "STALL_COLUMNS", "STALL_REASONS",
    "Trace", "TraceError", "check_input", "check_run_directory", "check_writable", "conform_meta", "conform_types",
    "encode_meta", "is_parquet", "json_safe", "load_trace", "parquet_files", "read_meta", "run_files", "scrub",
    "scrub_all", "to_table", "trace_from_table", "validate", "write_trace",
]
