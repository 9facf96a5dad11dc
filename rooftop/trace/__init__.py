"""The rooftop trace file, format version 1: one Parquet table of events + a JSON metadata document.

A file is one run (or one rank of a run). A directory of such files (`rank=0/…`, `*rank*`) is one
multi-rank run. Everything a reader needs is in the file: no GPU, no torch, no rooftop required
(pyarrow, DuckDB and Spark read it as plain Parquet). One job per module: `schema` (columns, types,
`Trace`, `TraceError`), `build` (rows -> a conformed table), `write` (atomic writes), `read` (load a
file or a run), and what a load goes through: `inputs` (what can be opened), `parquet` (the file,
column by column), `meta` (the metadata document), `conform` (schema types, impossible values),
`scrubbing` (secrets out), `runtime` (the host rows apart), `frame` (Arrow to pandas), `runs`
(multi-rank directories).

The package also holds what the file's text means and how it is kept: `names/` (kernel names and
categories), `steps/` (step markers and phases), `redact` and `records` (secrets and per-step
records), `codes` and `paired` (how the import's columns are built), `footer`, `seal` and
`atomic` (the Parquet footer read in pure Python, the summary's seal, atomic writes). Those are
light: the names below are loaded on first use (PEP 562), so a module of this package imports no
pandas or pyarrow unless it needs them (a report from a stored summary needs neither).
"""

from importlib import import_module

_WHERE = {
    "build": ("to_table",),
    "conform": ("conform_types", "validate"),
    "inputs": ("check_input", "is_parquet"),
    "meta": ("conform_meta", "json_safe"),
    "read": ("load_trace", "read_meta", "trace_from_table"),
    "runs": ("NotOneRun", "check_run_directory", "parquet_files", "run_files"),
    "scrubbing": ("scrub", "scrub_all"),
    "schema": ("COLUMNS", "FORMAT_VERSION", "KINDS", "META_KEY", "REQUIRED", "SCHEMA", "STALL_COLUMNS",
               "STALL_REASONS", "Trace", "TraceError"),
    "write": ("check_writable", "encode_meta", "write_trace"),
}
_MODULE_OF = {name: module for module, names in _WHERE.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # once: later lookups are plain
    return value
