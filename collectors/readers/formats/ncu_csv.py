"""Nsight Compute CSV (`ncu --csv`, with or without its `==PROF==` lines)."""
from __future__ import annotations

from collectors.readers.formats.base import Reader


class NcuCsv(Reader):
    name, label, stems = "ncu-csv", "ncu CSV", (".csv",)

    def sniff(self, peek):
        lines = [ln.strip() for ln in peek.text.splitlines()[:50] if ln.strip()]
        return any(ln.startswith("==PROF==") for ln in lines) or \
            any(ln.startswith('"ID","Process ID"') for ln in lines)

    def read(self, path, progress, early=None):
        from collectors.readers.ncu_csv import read_ncu_csv
        return read_ncu_csv(path)
