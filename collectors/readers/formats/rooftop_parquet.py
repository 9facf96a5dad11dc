"""rooftop's own Parquet traces, a file or a directory of per-rank files: loaded, not converted."""
from __future__ import annotations

from rooftop.trace import check_input, load_trace, parquet_files

from collectors.readers.formats.base import Reader


class RooftopParquet(Reader):
    name, label, stems, native = "rooftop", "rooftop Parquet", (".parquet",), True

    def sniff(self, peek):
        return not peek.is_dir and peek.head[:4] == b"PAR1"

    def read(self, path, progress, early=None):
        t = load_trace(path)
        return t.events, t.meta


class RooftopDir(RooftopParquet):
    name, label, stems = "rooftop-dir", "rooftop run directory", ()

    def sniff(self, peek):
        if not peek.is_dir:
            return False
        files = parquet_files(peek.path)
        for f in files:  # an unreadable rank is named now, not after the screen has switched
            check_input(f, allow_dir=False)
        return bool(files)
