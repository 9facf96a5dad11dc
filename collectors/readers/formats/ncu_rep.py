"""Nsight Compute reports (`.ncu-rep`), read through NVIDIA's `ncu_report` module."""
from __future__ import annotations

from collectors.readers.formats.base import Reader

NCU_REP_MAGIC = b"NVR\x00"  # first bytes of every .ncu-rep seen (Nsight Compute 2021-2025)


class NcuRep(Reader):
    name, label, stems = "ncu-rep", ".ncu-rep", (".ncu-rep",)

    def sniff(self, peek):
        return peek.head[:4] == NCU_REP_MAGIC

    def read(self, path, progress, early=None):
        from collectors.readers.ncu_rep import read_ncu_rep
        return read_ncu_rep(path)
