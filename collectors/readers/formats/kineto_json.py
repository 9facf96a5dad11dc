"""PyTorch profiler (Kineto) Chrome-trace JSON: `.json`, `.json.gz`, `.pt.trace.json`."""
from __future__ import annotations

from collectors.readers.formats.base import Reader


def is_kineto_text(text: str) -> bool:
    return text.startswith("{") and any(k in text for k in ('"traceEvents"', '"deviceProperties"',
                                                            '"schemaVersion"'))


class KinetoJson(Reader):
    name, label, stems = "kineto", "Kineto JSON", (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json")

    def sniff(self, peek):
        return not peek.is_dir and is_kineto_text(peek.text)

    def read(self, path, progress, early=None):
        from collectors.readers.kineto import read_kineto
        return read_kineto(path, progress, early=early)
