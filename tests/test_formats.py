"""The registry of formats (`collectors/readers/formats/`): one reader per format, tried in order."""
from __future__ import annotations

import pandas as pd

from collectors.readers import formats, importers
from collectors.readers.formats import BY_NAME, READERS, Peek, Reader


def test_each_format_is_one_reader_with_its_own_name():
    names = [r.name for r in READERS]
    assert len(set(names)) == len(names) and BY_NAME == dict(zip(names, READERS))
    assert set(names) == {"rooftop", "rooftop-dir", "nsys-sqlite", "ncu-rep", "kineto", "kineto-dir", "ncu-csv",
                          "nsys-rep"}
    assert [r.name for r in READERS if r.native] == ["rooftop", "rooftop-dir"]


def test_no_readers_stems_end_in_anothers():
    """`default_output` drops the first stem a name ends with, readers in registry order: that
    order may not matter, so no stem of one reader is the end of another reader's."""
    for a in READERS:
        for b in READERS:
            if a is not b:
                assert not [(x, y) for x in a.stems for y in b.stems if x.endswith(y)], (a.name, b.name)


def test_a_new_format_is_a_reader_and_one_line(tmp_path, monkeypatch):
    """A reader added to the registry is what `detect` names and `import_any` reads, ahead of the
    readers after it; every file it does not claim goes on as before."""

    class Toy(Reader):
        name, label, stems = "toy", "toy trace", (".toy",)

        def sniff(self, peek: Peek) -> bool:
            return peek.head.startswith(b"TOY1")

        def read(self, path, progress, early=None):
            return pd.DataFrame({"kind": ["kernel"], "name": ["k"], "start_ns": [0], "dur_ns": [5]}), {"source": "toy"}

    toy = Toy()
    monkeypatch.setattr(formats, "READERS", (toy,) + READERS)
    monkeypatch.setattr(formats, "BY_NAME", {**BY_NAME, "toy": toy})
    monkeypatch.setattr(importers, "BY_NAME", formats.BY_NAME)
    f = tmp_path / "run.toy"
    f.write_bytes(b"TOY1 anything")
    assert formats.detect(f) == "toy" and importers.detect(f) == "toy"
    rows, meta = importers.import_any(f)
    assert rows["dur_ns"].tolist() == [5] and meta == {"source": "toy"}
    other = tmp_path / "t.json"
    other.write_text('{"traceEvents": []}')
    assert formats.detect(other) == "kineto"
