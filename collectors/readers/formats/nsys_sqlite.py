"""Nsight Systems SQLite exports (`nsys export --type sqlite`)."""
from __future__ import annotations

from collectors.readers.formats.base import Reader

SQLITE_MAGIC = b"SQLite format 3\x00"


class NsysSqlite(Reader):
    name, label, stems = "nsys-sqlite", "nsys SQLite", (".sqlite",)

    def sniff(self, peek):
        return peek.head[:16] == SQLITE_MAGIC

    def read(self, path, progress, early=None):
        from collectors.readers.nsys import read_nsys
        return read_nsys(path, progress)
