"""Run directories: the Parquet files of a directory, the rank of each, and whether they are the ranks of
one run (`NotOneRun` otherwise, naming the files)."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Callable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from rooftop.trace.schema import TraceError
from rooftop.trace.inputs import check_input
from rooftop.trace.meta import _parse_meta


_RANK_RE = re.compile(r"rank[=_\-]?(\d+)", re.IGNORECASE)


_PARTITION_DIR = re.compile(r"^[^=/]+=[^/]*$|rank", re.IGNORECASE)


def parquet_files(path: Path) -> list[Path]:
    """The .parquet files of a run directory: directly in it, or one level down in partition
    directories (`rank=0/`, `rank_1/`, hive-style `key=value/`). Never a walk of the whole tree:
    `rooftop report /` must not read the file system, nor unreadable corners of it like /proc."""
    def listing(d: Path) -> list[Path]:
        try:
            return sorted(e for e in d.iterdir() if not e.name.startswith("."))
        except OSError:
            return []

    found = []
    for e in listing(path):
        try:
            if e.suffix == ".parquet" and e.is_file():
                found.append(e)
            elif _PARTITION_DIR.search(e.name) and e.is_dir():
                found += [f for f in listing(e) if f.suffix == ".parquet" and f.is_file()]
        except OSError:
            continue
    return sorted(found)


def _rank_files(path: Path) -> list[tuple[int | None, Path]]:
    files = parquet_files(path)
    out = []
    for f in files:
        check_input(f, allow_dir=False)  # permission denied names the file (not "cannot be read")
        rel = f.relative_to(path).as_posix()
        m = _RANK_RE.search(rel)
        out.append((int(m.group(1)) if m and len(m.group(1)) <= 9 else None, f))
    return out


class NotOneRun(TraceError):
    """A directory whose traces are not the ranks of one run: open one of `files` instead.
    `message` replaces the generic sentence where the problem is more precise (a duplicate rank)."""

    def __init__(self, path: Path, files: list[Path], why: str, message: str | None = None):
        self.files, self.why = files, why
        names = [f.relative_to(path).as_posix() for f in files]
        shown = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
        super().__init__(path, message or f"holds {len(files)} traces that are not one multi-rank run ({why}): {shown}",
                         "open or report one of them")


def _duplicate_rank(path: Path, ranks: list, files: list[Path]) -> None:
    """Two files claiming one rank are two runs (or a copy) mixed in one directory: never merged."""
    seen: dict = {}
    for r, f in zip(ranks, files):
        if r in seen:
            a, b = (x.relative_to(path).as_posix() for x in (seen[r], f))
            why = f"rank {r} appears twice"
            raise NotOneRun(path, files, why, f"{why} ({a} and {b}): a duplicate rank is not one multi-rank run")
        seen[r] = f


def _run_identity(meta: Mapping[str, Any]) -> str:
    """What names the run a rank file belongs to: the model and the workload (not the device or the
    time, which differ between ranks of one run)."""
    import json

    model = meta.get("model") if isinstance(meta.get("model"), dict) else {}
    return json.dumps({"model": model.get("name"), "workload": meta.get("workload")}, sort_keys=True, default=str)


def run_files(path: Path) -> list[tuple[int | None, Path]]:
    """The (rank, file) pairs of a directory that is one run: a single trace; rank folders
    (`rank=0/`, `rank_1/`); or files whose metadata name the same run (model, workload) and distinct
    ranks (from the name or the metadata). Any other directory raises `NotOneRun`, naming its files."""
    files = _rank_files(path)
    if len(files) <= 1:
        return files
    ranks = [r for r, _ in files]
    in_folders = all(r is not None and "/" in f.relative_to(path).as_posix() for r, f in files)
    if in_folders and len(set(ranks)) == len(ranks):
        return files
    metas = []
    for _, f in files:
        try:
            metas.append(_parse_meta(f, pq.read_schema(f).metadata))
        except (TraceError, pa.ArrowException, OSError):
            raise NotOneRun(path, [f for _, f in files], f"{f.name} cannot be read") from None
    ranks = [r if r is not None else _small_int(m.get("rank"), default=-1) if "rank" in m else None
             for (r, _), m in zip(files, metas)]
    if len({_run_identity(m) for m in metas}) > 1:
        raise NotOneRun(path, [f for _, f in files], "their metadata name different runs")
    if any(r is None for r in ranks):
        raise NotOneRun(path, [f for _, f in files], "no distinct rank for each")
    _duplicate_rank(path, ranks, [f for _, f in files])
    return [(r, f) for r, (_, f) in zip(ranks, files)]


# Names of trace files any reader takes (the importers decide by content; this only lists them).
TRACE_SUFFIXES = (".parquet", ".json", ".json.gz", ".sqlite", ".ncu-rep", ".csv", ".nsys-rep")


def check_run_directory(path: str | os.PathLike, header_rank: Callable[[Path], int | None] | None = None) -> None:
    """Raise `NotOneRun` unless the directory is one run: its Parquet files pass `run_files`, or,
    holding other traces (Kineto JSON, ...), each of them names a distinct rank: in its header
    (`header_rank`, the readers' look at a file's `distributedInfo`), else in its name (`rank0`)."""
    path = Path(path)
    if parquet_files(path):
        run_files(path)
        return
    try:
        files = sorted(f for f in path.iterdir()
                       if not f.name.startswith(".") and f.name.lower().endswith(TRACE_SUFFIXES) and f.is_file())
    except OSError:
        return  # the reader that follows says what is wrong with the directory
    if len(files) <= 1:
        return
    ranks = [header_rank(f) if header_rank is not None else None for f in files]
    ranks = [r if r is not None else int(m.group(1)) if (m := _RANK_RE.search(f.name)) and len(m.group(1)) <= 9
             else None for r, f in zip(ranks, files)]
    if None in ranks:
        why = "no distinct rank in each file's header or name" if header_rank else "no distinct rank in each file's name"
        raise NotOneRun(path, files, why)
    _duplicate_rank(path, ranks, files)


def _small_int(v: Any, default: int) -> int:
    ok = isinstance(v, int) and not isinstance(v, bool) and -(2 ** 31) <= v < 2 ** 31
    return v if ok else default
