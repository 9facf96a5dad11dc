"""Read Nsight Compute CSV: `ncu --csv` with `--page details` (long) or `--page raw` (wide).

Quirks handled (docs/formats.md), all seen in real output or public parsers' fixtures:
- `==PROF==` lines and the application's own prints before (and among) the CSV rows;
- header generations: with `"Kernel Time"` (CUDA 11.4-era, a timestamp, ignored), with or without
  `Block Size`/`Grid Size`/`Device`/`CC`, with `Rule*`/`Estimated Speedup*` columns;
  columns are found by name, never by position;
- numbers with thousands separators (`"1,073,741,824"`), European locale (`"2.508.800"`, `"9,00"`);
- auto-scaled units (`usecond`, `Kbyte`, `Gbyte/second`, `Mhz`...) normalised to bytes, ns, Hz;
- `n/a` (unsupported metric) -> null;
- details-page section metrics under display labels (`Duration`, `DRAM Throughput`), mapped to
  metric names where the label is unambiguous.
NVTX ranges are not in ncu's CSV: `path` is null (use a `.ncu-rep` for steps).
"""
from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from rooftop import limits

from collectors.readers.ncu import NcuError, device_meta, finish_rows, row_from_metrics, total_only_warning

_IDENTITY = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context",
             "Stream", "Block Size", "Grid Size", "Device", "CC")

# Details-page labels -> (metric name, unit class the value must have). The class check keeps
# "Memory Throughput" in Gbyte/second (MemoryWorkloadAnalysis) apart from the SOL percentage.
_LABELS = {
    "Duration": ("gpu__time_duration.sum", "time"),
    "DRAM Throughput": ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    "Compute (SM) Throughput": ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    "SM Throughput": ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    "Achieved Occupancy": ("sm__warps_active.avg.pct_of_peak_sustained_active", "%"),
    "L1/TEX Hit Rate": ("l1tex__t_sector_hit_rate.pct", "%"),
    "L2 Hit Rate": ("lts__t_sector_hit_rate.pct", "%"),
    "Registers Per Thread": ("launch__registers_per_thread", None),
    "Static Shared Memory Per Block": ("launch__shared_mem_per_block_static", "bytes"),
    "Dynamic Shared Memory Per Block": ("launch__shared_mem_per_block_dynamic", "bytes"),
    "SM Frequency": ("sm__cycles_elapsed.avg.per_second", "hz"),
    "Elapsed Cycles": ("gpc__cycles_elapsed.max", None),
    "DRAM Frequency": ("dram__cycles_elapsed.avg.per_second", "hz"),
}

_PREFIX = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
           "Ki": 1024.0, "Mi": 1024.0 ** 2, "Gi": 1024.0 ** 3, "Ti": 1024.0 ** 4}
_TIME_NS = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9, "ns": 1.0, "us": 1e3,
            "ms": 1e6, "s": 1e9}
_UNIT_RE = re.compile(r"^(Ki|Mi|Gi|Ti|K|k|M|G|T)?(byte|hz|inst|cycle|warp|sector|request|thread|"
                      r"block|register|transaction|wavefront|pass|sample|SM)$", re.IGNORECASE)


def unit_factor(unit: str) -> tuple[float, str | None]:
    """(factor to base units, unit class) for an ncu unit string: bytes, ns, Hz, per second.

    A time in the numerator becomes ns (`usecond` x 1e3); a time in the denominator becomes per
    second (`Gbyte/second` x 1e9, `cycle/nsecond` x 1e9).
    """
    unit = (unit or "").strip()
    if not unit:
        return 1.0, None
    if unit == "%":
        return 1.0, "%"
    num, _, den = unit.partition("/")
    factor, cls = _part(num, numerator=True)
    if den:
        d, dcls = _part(den, numerator=False)
        factor /= d
        cls = "rate" if dcls == "time" else cls
    return factor, cls


def _part(text: str, numerator: bool) -> tuple[float, str | None]:
    if text in _TIME_NS:
        ns = _TIME_NS[text]
        return (ns, "time") if numerator else (ns / 1e9, "time")
    m = _UNIT_RE.match(text)
    if m:
        prefix = m.group(1) or ""
        base = m.group(2).lower()
        scale = _PREFIX.get(prefix, _PREFIX.get(prefix.upper(), 1.0))
        return scale, {"byte": "bytes", "hz": "hz"}.get(base)
    return 1.0, None


_EN = re.compile(r"^[-+]?\d{1,3}(,\d{3})+(\.\d+)?$")
# European grouping only when unambiguous: two or more dot groups, or dot groups with a comma
# decimal. "1.500" stays 1.5 (ncu writes the C/en locale unless told otherwise).
_EU = re.compile(r"^[-+]?[1-9]\d{0,2}((\.\d{3}){2,}(,\d+)?|(\.\d{3})+,\d+)$")
_EU_DECIMAL = re.compile(r"^[-+]?\d+,(\d{1,2}|\d{4,})$")


def parse_number(text: str) -> float | str | None:
    """A CSV value: float, None for `n/a`/empty, or the text itself for string metrics."""
    s = (text or "").strip()
    if not s or s.lower() in ("n/a", "nan", "-"):
        return None
    if _EN.match(s):
        s = s.replace(",", "")
    elif _EU.match(s):
        s = s.replace(".", "").replace(",", ".")
    elif _EU_DECIMAL.match(s):
        s = s.replace(",", ".")
    try:
        return float(s)
    except ValueError:
        return text.strip()


def _shape(text: str | None) -> list[int] | None:
    nums = re.findall(r"\d+", text or "")
    return [int(n) for n in nums] if len(nums) == 3 else None


# Every physical line is read with a cap, so a file of junk (one endless line, millions of lines
# that are not CSV rows, a binary tail) stops early, in bounded memory, with one line naming the
# budget it crossed. A line may hold a kernel name and a raw page's hundreds of metrics: it gets
# LINE_VALUES times the text budget of one value.
LINE_VALUES = 16


def _open_text(path: Path) -> io.TextIOWrapper:
    """The file as text: UTF-16 when it starts with a UTF-16 byte-order mark (PowerShell's `>`),
    else UTF-8 without its BOM (Excel, PowerShell redirection); undecodable bytes become U+FFFD."""
    try:
        fh = open(path, "rb")
    except PermissionError:
        raise NcuError(path, "permission denied") from None
    except OSError as exc:
        raise NcuError(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        head = fh.read(4096)
        fh.seek(0)
    except OSError as exc:
        fh.close()
        raise NcuError(path, f"cannot read: {exc.strerror or exc}") from None
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        encoding = "utf-16"
    elif b"\0" in head:
        fh.close()
        raise NcuError(path, "binary file, not ncu CSV", "a .ncu-rep is read with read_ncu_rep")
    else:
        encoding = "utf-8-sig"
    return io.TextIOWrapper(fh, encoding=encoding, errors="replace", newline=None)


class _Lines:
    """The file's lines (universal newlines, terminators removed), each within the line budget,
    and the count of lines that are not CSV rows (`skip`) within the skipped-lines budget."""

    def __init__(self, fh: io.TextIOWrapper, path: Path):
        self.fh, self.path = fh, path
        self.cap = LINE_VALUES * limits.max_text()
        self.max_skipped = limits.max_skipped_lines()
        self.number = 0  # physical lines read so far
        self.skipped = 0
        self.last = ""  # the line read last (an example for a warning)

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        try:
            line = self.fh.readline(self.cap + 2)
        except OSError as exc:
            raise NcuError(self.path, f"cannot read: {exc.strerror or exc}") from None
        if not line:
            raise StopIteration
        self.number += 1
        line = line[:-1] if line.endswith("\n") else line
        if len(line) > self.cap:
            raise NcuError(self.path, limits.over_budget(
                f"line {self.number:,} (over {self.cap:,} characters, {LINE_VALUES}x the text budget)",
                limits.MAX_TEXT_ENV, limits.max_text()))
        self.last = line
        return line

    def skip(self, n: int = 1) -> None:
        """Count `n` lines that are no CSV row (a preamble, an unreadable line): a file of junk
        ends at the budget instead of being read to its end."""
        self.skipped += n
        if self.skipped > self.max_skipped:
            raise NcuError(self.path, limits.over_budget(
                f"{self.skipped:,} lines that are not ncu CSV rows", limits.MAX_SKIPPED_LINES_ENV,
                self.max_skipped), "is this an `ncu --csv` export?")


def _find_header(lines: _Lines, path: Path) -> list[str]:
    """The header's fields; the lines before it (ncu's `==PROF==` lines, the application's own
    output) are skipped."""
    for line in lines:
        if '"ID"' in line and "Kernel Name" in line:
            try:
                fields = next(csv.reader([line]))
            except csv.Error:
                fields = []
            if "ID" in fields and "Kernel Name" in fields:
                return fields
        lines.skip()
    raise NcuError(path, "no ncu CSV header (\"ID\",...,\"Kernel Name\",...) found",
                   "export with `ncu --csv --page details` or `--page raw`")


class _Records:
    """The CSV records after the header, fitted to the header's width, read as they are used.

    ncu writes the rule columns (`Rule Name` ... `Estimated Speedup`) in the header but ends a
    metric row right after its value with a trailing comma: such a short row is padded with empty
    cells. Extra trailing empty cells are dropped. Lines ncu or the application printed among the
    rows (`==PROF==`, `==WARNING==`, the app's own output) are left out; any other record whose
    width cannot be fitted is unreadable: counted (`bad`), with one example line kept for the
    warning. Records count against the row budget, skipped lines against the skipped-lines budget.
    """

    def __init__(self, lines: _Lines, header: list[str], path: Path):
        self.lines, self.header, self.path = lines, header, path
        self.bad, self.example = 0, None

    def _body(self) -> Iterator[str]:
        for ln in self.lines:
            if ln.strip() and not ln.startswith("=="):
                yield ln
            else:
                self.lines.skip()

    def __iter__(self) -> Iterator[dict[str, str]]:
        header, width, least = self.header, len(self.header), _min_width(self.header)
        cap, rows = limits.max_rows(), 0
        reader = csv.reader(self._body())
        while True:
            try:
                rec = next(reader)
            except StopIteration:
                return
            except csv.Error:
                self._unreadable()
                continue
            if not rec:
                continue
            if len(rec) > width and not any(c.strip() for c in rec[width:]):
                rec = rec[:width]
            if width > len(rec) >= least:
                rec = rec + [""] * (width - len(rec))
            if len(rec) != width:
                self._unreadable()
                continue
            rows += 1
            if rows > cap:
                raise NcuError(self.path, limits.over_budget(f"more than {cap:,} CSV records",
                                                             limits.MAX_ROWS_ENV, cap))
            yield dict(zip(header, rec))

    def _unreadable(self) -> None:
        self.bad += 1
        self.example = self.example or self.lines.last
        self.lines.skip()


def _min_width(header: list[str]) -> int:
    """Cells a record must have: up to `Metric Value` on the details page (the rule columns may be
    cut off), every column on the raw page."""
    if "Metric Value" in header:
        return header.index("Metric Value") + 1
    return len(header)


def read_ncu_csv(path: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, Any]]:
    """One row per profiled kernel from an ncu CSV export (details or raw page) and its metadata.
    The file is streamed: what is kept is one entry per kernel, never the file's text."""
    path = Path(path)
    if not path.is_file():
        raise NcuError(path, "no such file" if not path.exists() else "not a file")
    with _open_text(path) as fh:
        lines = _Lines(fh, path)
        # Demangled template names are long (the csv module's default cap is 128 KiB per field); a
        # field, like a line, stops at the line budget (a quote never closed must not swallow the file).
        old_limit = csv.field_size_limit(lines.cap)
        try:
            header = _find_header(lines, path)
            # A header that ends with a comma has an empty last column: not a metric.
            while header and not header[-1].strip():
                header = header[:-1]
            records = _Records(lines, header, path)
            if "Metric Name" in header and "Metric Value" in header:
                kernels, fmt = _details(records), "details"
            else:
                kernels, fmt = _raw(records, header), "raw"
        except UnicodeError as exc:
            raise NcuError(path, f"cannot decode: {exc}") from None
        finally:
            csv.field_size_limit(old_limit)
    bad, example = records.bad, records.example
    kernels = [(ident, m) for ident, m in kernels if ident.get("Kernel Name") or m]
    if not kernels:
        hint = f"{bad} unreadable line(s), e.g. {_quote(example)}" if bad else None
        raise NcuError(path, f"ncu CSV ({fmt} page) holds no kernel rows", hint)

    rows, metrics, cc = [], [], None
    for ident, m in kernels:
        row = row_from_metrics(m)
        row["name"] = ident.get("Kernel Name")
        row["path"] = None
        if row["grid"] is None:
            row["grid"] = _shape(ident.get("Grid Size"))
        if row["block"] is None:
            row["block"] = _shape(ident.get("Block Size"))
        if row["device"] is None:
            row["device"] = parse_number(ident.get("Device", "")) if ident.get("Device") else None
        if row["stream"] is None and ident.get("Stream"):
            row["stream"] = parse_number(ident["Stream"])
        cc = cc or (ident.get("CC") or None)
        rows.append(row)
        metrics.append(m)
    derived = sum(1 for r in rows if r.pop("dur_derived", False))
    frame = finish_rows(rows)
    device = device_meta(metrics)
    if device["cc"] is None and cc:
        device["cc"] = cc
    warnings = ["ncu has no timeline: start_ns places the profiled kernels back to back",
                "ncu CSV carries no NVTX ranges: kernels have no path (use a .ncu-rep for steps)"]
    warnings += total_only_warning(metrics)
    if derived:
        warnings.append(f"{derived} kernel(s) lack gpu__time_duration.sum: duration derived from "
                        "sm__cycles_elapsed.avg / sm__cycles_elapsed.avg.per_second")
    if bad:
        warnings.append(f"{bad} unreadable CSV line(s) skipped, e.g. {_quote(example)}")
    meta = {"source": {"tool": "ncu", "version": None, "format": f"csv-{fmt}", "file": path.name,
                       "duration": "derived" if derived == len(rows) else "mixed" if derived else "measured"},
            "device": device, "warnings": warnings, "modeled": False}
    return frame, meta


def _quote(line: str | None, limit: int = 160) -> str:
    text = " ".join((line or "").split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _kernel_key(rec: dict[str, str]) -> tuple[str, str]:
    return rec.get("Process ID", ""), rec.get("ID", "")


def _details(records: Iterable[dict[str, str]]) -> list[tuple[dict[str, str], dict[str, Any]]]:
    """Long format: one row per (kernel, metric); rule rows have no metric name."""
    kernels: dict[tuple[str, str], tuple[dict[str, str], dict[str, Any]]] = {}
    for rec in records:
        key = _kernel_key(rec)
        if key not in kernels:
            kernels[key] = ({k: rec.get(k, "") for k in _IDENTITY if k in rec}, {})
        name = (rec.get("Metric Name") or "").strip()
        if not name:
            continue
        value = parse_number(rec.get("Metric Value", ""))
        factor, cls = unit_factor(rec.get("Metric Unit", ""))
        if isinstance(value, float):
            value *= factor
        m = kernels[key][1]
        if name in _LABELS:
            metric, want = _LABELS[name]
            if want is None or want == cls:
                m.setdefault(metric, value)
            continue
        m[name] = value
    return list(kernels.values())


def _raw(records: Iterable[dict[str, str]], header: list[str]):
    """Wide format: one column per metric, and a units row (empty ID) right after the header."""
    units: dict[str, str] = {}
    kernels = []
    for i, rec in enumerate(records):
        if i == 0 and not rec.get("ID", "").strip():
            units = rec  # the units row: empty identity cells, a unit under each metric
            continue
        ident = {k: rec[k] for k in _IDENTITY if k in rec}
        m: dict[str, Any] = {}
        for col in header:
            if col in _IDENTITY or col not in rec:
                continue
            value = parse_number(rec[col])
            if isinstance(value, float):
                value *= unit_factor(units.get(col, ""))[0]
            m[col] = value
        kernels.append((ident, m))
    return kernels
