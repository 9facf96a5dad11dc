"""Budgets that bound the work one input can cause (a hostile or damaged file must end quickly).

Each is an environment variable with a default far above any real trace; crossing one is a
one-line error that names the variable, so a user with a genuinely huge trace can raise it.
"""
from __future__ import annotations

import os

# Events (rows) in one trace file or one import: a 1M-kernel decode run is ~3M rows.
MAX_ROWS_ENV = "ROOFTOP_MAX_ROWS"
MAX_ROWS_DEFAULT = 200_000_000
# Decompressed bytes per compressed byte of a gzipped trace: Kineto JSON
# compresses 7-15x (real captures); a gzip bomb (zeros) 1000x. The first 32 MiB are always allowed.
MAX_INFLATE_RATIO_ENV = "ROOFTOP_MAX_INFLATE_RATIO"
MAX_INFLATE_RATIO_DEFAULT = 100
INFLATE_FREE_BYTES = 32 << 20
# Characters of one text value (a kernel name, an NVTX range, a metadata string): demangled
# template names reach ~20 K; longer ones are cut (with a warning) so every pattern stays cheap.
MAX_TEXT_ENV = "ROOFTOP_MAX_TEXT"
MAX_TEXT_DEFAULT = 65_536
# Bytes of one SQLite value read from an nsys export (a text or blob cell).
MAX_SQL_VALUE_ENV = "ROOFTOP_MAX_SQL_VALUE"
MAX_SQL_VALUE_DEFAULT = 1 << 20
# Work of the SQLite engine while an nsys export is read, in virtual-machine steps per byte of the
# database (plus a free 50,000 per unit: 10^8 by default): an honest export is scanned a few dozen
# times (~10 steps a byte per pass); a 0.3 MB file whose columns compute for minutes stops here, in
# seconds.
MAX_SQL_WORK_ENV = "ROOFTOP_MAX_SQL_WORK"
MAX_SQL_WORK_DEFAULT = 2000
SQL_WORK_FREE_STEPS = 50_000
# Lines of a text trace that are not data: an ncu CSV's preamble before its header (ncu's
# `==PROF==` lines, the application's own output) and unreadable lines among its rows. A real
# export has a few per profiled kernel; a file of junk stops here instead of being read to its end.
MAX_SKIPPED_LINES_ENV = "ROOFTOP_MAX_SKIPPED_LINES"
MAX_SKIPPED_LINES_DEFAULT = 100_000
# Seconds NVIDIA's .ncu-rep reader may take in its child process: a minute, plus a second per MiB of
# the report (a real 1 GB report loads in well under that); a reader caught in a loop on a damaged
# file is stopped here, with one line.
NCU_REP_SECONDS_ENV = "ROOFTOP_NCU_REP_SECONDS"
NCU_REP_FREE_SECONDS = 60


def ncu_rep_seconds(report_bytes: int) -> int:
    return budget(NCU_REP_SECONDS_ENV, NCU_REP_FREE_SECONDS + (max(int(report_bytes), 0) >> 20))


# Nesting depth of the metadata document.
MAX_META_DEPTH = 64
# A `--model` config.json: bytes of the file (real ones are a few KB; a tokenizer-sized one ~1 MB),
# nesting depth, digits of one number, the largest integer a size or count field may hold, and the
# length of one quantization exclusion pattern (`re:` patterns run on a linear-time engine).
MAX_CONFIG_BYTES_ENV = "ROOFTOP_MAX_CONFIG_BYTES"
MAX_CONFIG_BYTES_DEFAULT = 16 << 20
MAX_CONFIG_DEPTH = 64
MAX_CONFIG_DIGITS = 32
MAX_CONFIG_INT = 2**40
MAX_CONFIG_PATTERN = 4096
MAX_CONFIG_PATTERNS = 10_000


def max_config_bytes() -> int:
    return budget(MAX_CONFIG_BYTES_ENV, MAX_CONFIG_BYTES_DEFAULT)


def budget(env: str, default: int) -> int:
    """The budget in `env` (a positive integer), else `default`."""
    try:
        v = int(os.environ.get(env, ""))
    except ValueError:
        return default
    return v if v > 0 else default


def max_rows() -> int:
    return budget(MAX_ROWS_ENV, MAX_ROWS_DEFAULT)


def max_text() -> int:
    return budget(MAX_TEXT_ENV, MAX_TEXT_DEFAULT)


def max_inflate(compressed: int) -> int:
    """Decompressed bytes allowed for a gzip stream of `compressed` bytes."""
    return INFLATE_FREE_BYTES + budget(MAX_INFLATE_RATIO_ENV, MAX_INFLATE_RATIO_DEFAULT) * compressed


def max_sql_value() -> int:
    return budget(MAX_SQL_VALUE_ENV, MAX_SQL_VALUE_DEFAULT)


def max_sql_steps(db_bytes: int) -> int:
    """SQLite virtual-machine steps allowed for reading a database of `db_bytes` bytes."""
    per_byte = budget(MAX_SQL_WORK_ENV, MAX_SQL_WORK_DEFAULT)
    return per_byte * (SQL_WORK_FREE_STEPS + max(0, db_bytes))


def max_skipped_lines() -> int:
    return budget(MAX_SKIPPED_LINES_ENV, MAX_SKIPPED_LINES_DEFAULT)


def over_budget(what: str, env: str, limit: int) -> str:
    """The wording of a budget error: what was too big, and how to raise the budget."""
    return f"{what} exceeds the budget {env}={limit:,} (set {env} higher if the file is genuine)"
