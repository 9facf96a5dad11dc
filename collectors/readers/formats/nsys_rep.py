"""Nsight Systems reports (`.nsys-rep`, `.qdrep`): exported to SQLite through `nsys export`, cached.
Their bytes are nsys's own: known by their name only, so this reader is tried last."""
from __future__ import annotations

from collectors.readers.formats.base import Reader


class NsysRep(Reader):
    name, label, stems = "nsys-rep", "nsys report", (".nsys-rep", ".qdrep")

    def sniff(self, peek):
        return not peek.is_dir and peek.path.name.lower().endswith(self.stems)

    def read(self, path, progress, early=None):
        from collectors.readers.nsys import read_nsys
        from collectors.readers.nsys_rep import sqlite_for
        return read_nsys(sqlite_for(path, progress), progress)

    def check(self, path):
        from collectors.readers.nsys_rep import check_readable
        check_readable(path)  # an export cached, or an nsys to make one; else the export command
