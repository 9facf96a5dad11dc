"""The registry of trace formats rooftop reads: one `Reader` per format (`base.Reader`: sniff,
read, and what the format is called), tried in the order of `READERS`. A new format is a module
here and one line below.

Order matters only between readers that could both claim a file: magic bytes first (Parquet,
SQLite, .ncu-rep), then text (Kineto JSON before ncu CSV), then the name alone (nsys reports);
directories: rooftop ranks before Kineto ranks.
"""
from __future__ import annotations

import os

from collectors.readers.formats.base import ImportFailed, Peek, Reader, peek_text
from collectors.readers.formats.kineto_dir import KinetoDir
from collectors.readers.formats.kineto_json import KinetoJson
from collectors.readers.formats.ncu_csv import NcuCsv
from collectors.readers.formats.ncu_rep import NcuRep
from collectors.readers.formats.nsys_rep import NsysRep
from collectors.readers.formats.nsys_sqlite import NsysSqlite
from collectors.readers.formats.rooftop_parquet import RooftopDir, RooftopParquet

READERS: tuple[Reader, ...] = (
    RooftopParquet(),
    RooftopDir(),
    NsysSqlite(),
    NcuRep(),
    KinetoJson(),
    KinetoDir(),
    NcuCsv(),
    NsysRep(),
)
BY_NAME: dict[str, Reader] = {r.name: r for r in READERS}

__all__ = ["BY_NAME", "READERS", "ImportFailed", "Peek", "Reader", "detect", "peek_text"]


def detect(path: str | os.PathLike) -> str:
    """The format of a file or directory (a reader's `name`), from its content; "unknown" when no
    reader claims it."""
    peek = Peek(path)
    for reader in READERS:
        if reader.sniff(peek):
            return reader.name
    return "unknown"
