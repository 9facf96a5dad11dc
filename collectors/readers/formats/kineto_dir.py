"""A directory of per-rank Kineto files (one run on several GPUs): read one after the other, each
row told its rank (the file's own `distributedInfo`, else its name)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from collectors.readers.formats.base import ImportFailed, Peek, Reader, peek_text
from collectors.readers.formats.kineto_json import KinetoJson, is_kineto_text

KINETO_SUFFIXES = (".json", ".json.gz")


class KinetoDir(Reader):
    name, label = "kineto-dir", "directory of Kineto files"

    def sniff(self, peek):
        return peek.is_dir and bool(kineto_files(peek.path))

    def read(self, path, progress, early=None):
        import pandas as pd

        from collectors.readers.kineto import read_kineto

        frames, metas, files = [], [], kineto_files(path)
        for f in files:
            rows, meta = read_kineto(f, progress)
            frames.append(rows)
            metas.append(meta)
        ranks = ranks_of(path, files, metas)
        for rows, r in zip(frames, ranks):
            rows["rank"] = r
        meta = dict(metas[0])
        meta["ranks"] = [{"rank": r, "file": f.name, "device": m.get("device")}
                         for r, m, f in zip(ranks, metas, files)]
        meta["warnings"] = [w for m in metas for w in m.get("warnings", [])]
        return pd.concat(frames, ignore_index=True), meta


def rank_files(src: Path) -> list[Path]:
    return sorted(p for p in src.iterdir() if p.is_file() and p.name.endswith(KINETO_SUFFIXES))


_KINETO = KinetoJson()


def kineto_files(path: Path) -> list[Path]:
    """The Kineto traces directly in a directory (regular files only: never a FIFO, never a walk)."""
    # A trace-named file that cannot be read (permission denied) is an error naming it, never a
    # rank silently left out of the run. (A file whose first bytes are another format's magic
    # never reads as Kineto text: the Kineto sniff alone says what `detect` would.)
    return [p for p in rank_files(path) if _KINETO.sniff(Peek(p))]


def rank_of(path: Path, head_rank: Any = None) -> int | None:
    if isinstance(head_rank, int):
        return head_rank
    m = re.search(r"rank[=_\-]?(\d+)", path.name, re.IGNORECASE)
    return int(m.group(1)) if m else None


def ranks_of(src: Path, files: list[Path], metas: list[dict]) -> list[int]:
    """The rank of each per-rank file: its own `distributedInfo`, else its name; neither is an error.
    Two files claiming one rank is an error (two runs mixed in one directory)."""
    out = []
    for f, m in zip(files, metas):
        r = m.get("rank")
        if not (type(r) is int and 0 <= r < 2 ** 31):
            r = rank_of(f)
        if not (type(r) is int and 0 <= r < 2 ** 31):
            raise ImportFailed(src, f"{f.name} names no rank (no distributedInfo rank in it, no rank in its name): "
                               "the files are not one multi-rank run", "import one of them")
        out.append(r)
    seen: dict[int, Path] = {}
    for r, f in zip(out, files):
        if r in seen:
            raise ImportFailed(src, f"rank {r} appears twice ({seen[r].name} and {f.name})",
                               "keep one trace per rank in the directory")
        seen[r] = f
    return out


# `"distributedInfo": {..., "rank": 3, ...}` near the top of a Kineto file (PyTorch writes it before
# the events). Bounded: no nesting inside the object, a 9-digit rank at most.
_HEADER_RANK = re.compile(r'"distributedInfo"\s*:\s*\{[^{}]{0,4096}?"rank"\s*:\s*(\d{1,9})\b')


def header_rank(path: Path) -> int | None:
    """The rank a Kineto file's header names (its `distributedInfo`), from its first ~1 MB; None
    when it names none or is not a Kineto file (the caller falls back to the file's name)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError:
        return None
    text = peek_text(path, head)
    if not is_kineto_text(text):
        return None
    m = _HEADER_RANK.search(text)
    return int(m.group(1)) if m else None
