"""The stored summary: the report document, computed when a trace is written, kept in its footer.

`rooftop report` and the Overview read it instead of analysing a million rows, when it is current:
made by this analysis (`ANALYSIS_VERSION` and a digest of the core's code and device table), for
this exact file (its metadata bytes and row count), with the default options (the one rule for
those is `collectors.open.summary_answers`), and sealed by this user's rooftop for these very bytes
(rooftop/trace/seal.py: anyone can recompute the other checks).
Anything else (an older rooftop, a changed device table, `--gpu`, `--model`, another `--top`, a
damaged summary) and rooftop analyses the rows as it always did; a current summary without a
valid seal is compared with the rows, and the report says it was not used (`unsealed_note`): a
stored summary is a cache, never a source of truth. docs/summary.md says what is stored and when
it is trusted.

Importing this module costs nothing: reading a summary needs neither pandas nor pyarrow (the
footer is read by rooftop/trace/footer.py); writing one imports the analysis when it runs.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass
from itertools import chain
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

# The layout of the stored document. Bump it when the stored document's shape or meaning changes
# (a key renamed or dropped, a unit changed); a change in what the analysis computes needs no bump:
# the code digest below changes with any edit of the core or of the device table.
ANALYSIS_VERSION = 1
SUMMARY_KEY = b"rooftop.summary"
META_KEY = b"rooftop"  # the trace's own metadata (rooftop.trace.schema.META_KEY; not imported: pandas)
DEFAULT_TOP = 10  # `rooftop report --top`'s default: the groups stored
# A stored summary larger than this is not one rooftop wrote (1M kernels: a few MB, most of it steps).
MAX_SUMMARY_BYTES = 128 << 20
MAX_DEPTH = 16

_CORE = Path(__file__).resolve().parents[1]  # rooftop/, whatever room of it holds this module


@lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 of the device table and every source file of the core (rooftop/): what the numbers
    depend on besides the trace. Any edit, even a comment, makes stored summaries stale (they are
    then recomputed): cheaper than trusting a forgotten version bump."""
    h = hashlib.sha256()
    files = sorted(p for p in _CORE.rglob("*.py") if "__pycache__" not in p.parts)
    for p in [_CORE / "data" / "gpus.json", *files]:
        h.update(p.relative_to(_CORE).as_posix().encode() + b"\0")
        h.update(p.read_bytes() + b"\0")
    return h.hexdigest()


def current_digest() -> str:
    """What a summary must have been made with to be used now: this analysis, the default options,
    and the text budget the rows were read with (a smaller `ROOFTOP_MAX_TEXT` cuts names differently)."""
    from rooftop import limits

    options = {"top": DEFAULT_TOP, "peaks": "auto", "max_text": limits.max_text()}
    text = json.dumps({"version": ANALYSIS_VERSION, "code": code_digest(), "options": options}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


# --- writing ------------------------------------------------------------------------------------

# The per-step lists are nine tenths of the document: they are stored
# apart, already as `report --json` prints them, so a report reads and prints them without parsing.
BULK = ("steps", "gap_steps")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def bulk_key(name: str) -> bytes:
    return SUMMARY_KEY + b"." + name.encode()


def _json_text(value: Any) -> str:
    """`value` exactly as `rooftop report --json` prints it at the top level of the document."""
    text = _records_text(value)
    return text if text is not None else json.dumps(value, indent=1, default=str, allow_nan=False)


_SCALARS = frozenset((str, int, float, bool, type(None)))
_BETWEEN_ITEMS = ",\n  "  # what the indent puts between the items of a record
_BETWEEN_RECORDS = "}" + _BETWEEN_ITEMS + "{"  # raw newlines: never inside an encoded string


def _records_text(value: Any) -> str | None:
    """`json.dumps(value, indent=1, allow_nan=False)` of a list of flat, non-empty records (str
    keys; str, int, float, bool or None values), made by json's C encoder: with an indent, `json`
    encodes in Python, one generator step per value. The list is encoded in one call with the
    indent's separator between items; the records are then cut apart where one ends and the next
    begins (a newline, which encoded text never holds raw) and laid out as the indent lays them
    out. None for anything else (a nested value, another type, an empty record, a NaN), which
    `json.dumps` then encodes (or refuses) itself."""
    if type(value) is not list:
        return None
    if not value:
        return "[]"
    if not all(type(r) is dict and r for r in value) \
            or not set(map(type, chain.from_iterable(value))) <= {str} \
            or not set(map(type, chain.from_iterable(r.values() for r in value))) <= _SCALARS:
        return None
    encode = json.encoder.c_make_encoder
    if encode is None:
        return None
    try:
        text = "".join(encode(None, None, json.encoder.encode_basestring_ascii, None, ": ", _BETWEEN_ITEMS,
                              False, False, False)(value, 0))
    except ValueError:  # NaN or infinity
        return None
    records = text[2:-2].split(_BETWEEN_RECORDS)
    if not (text.startswith("[{") and text.endswith("}]")) or len(records) != len(value):
        return None
    return "[\n {\n  " + "\n },\n {\n  ".join(records) + "\n }\n]"


def build(analysis: Any, meta_bytes: bytes, rows: int) -> dict[bytes, bytes] | None:
    """The footer entries of `analysis`'s summary, for a file whose footer holds `meta_bytes` and
    `rows` rows; None when the document is not plain JSON (then nothing is stored)."""
    report = _report(analysis)
    report["trace"]["path"] = None  # where the file lives is said by whoever reads it
    try:
        bulk = {name: _json_text(report[name]).encode() for name in BULK}
        head = {"analysis_version": ANALYSIS_VERSION, "digest": current_digest(), "meta": _digest(meta_bytes),
                "rows": int(rows), "top": DEFAULT_TOP,
                "report": {k: (None if k in BULK else v) for k, v in report.items()},
                "bulk": {name: _digest(data) for name, data in bulk.items()},
                # the Overview's warning list (file, device, coverage), which the report does not carry
                "overview_warnings": [[str(w), str(m)] for w, m in analysis.warnings]}
        entries = {SUMMARY_KEY: json.dumps(head, default=str, allow_nan=False, ensure_ascii=False,
                                           separators=(",", ":")).encode()}
    except (ValueError, TypeError, RecursionError):
        return None
    from rooftop.trace.seal import PLACEHOLDER, SEAL_KEY

    # the seal's place, filled in once the file is complete (rooftop/trace/seal.py)
    return {**entries, **{bulk_key(name): data for name, data in bulk.items()}, SEAL_KEY: PLACEHOLDER}


# Sections a large trace's summary computes on a second thread, beside the others: its grouping
# by whole name and by category, the attention verdicts and the gap to ideal (about half of the
# summary's analysis, on a core the written rows have just left idle), where
# `rooftop.present.report.two_threads` says a second thread pays.
SECOND_THREAD = ("top_kernels", "categories", "attention", "gap", "gap_steps")


def _report(analysis: Any) -> dict:
    """`report_dict(analysis, DEFAULT_TOP)`, the same document, its sections split over two threads
    for a large trace. They only read the analysis's frames, which pandas' copy-on-write (always on
    from pandas 3) never changes in place, and each cached table is computed once, under its lock."""
    from rooftop.present.report import report_dict, section_names, two_threads

    if not two_threads(analysis):
        return report_dict(analysis, DEFAULT_TOP)
    from concurrent.futures import ThreadPoolExecutor

    order = section_names(analysis)  # (the shared tables first: the timed rows, the steps)
    with ThreadPoolExecutor(1, thread_name_prefix="rooftop-summary") as pool:
        # (the sections are split between the two threads here: no third for the wait tables)
        second = pool.submit(report_dict, analysis, DEFAULT_TOP, SECOND_THREAD, ahead=False)
        first = report_dict(analysis, DEFAULT_TOP, skip=SECOND_THREAD, ahead=False)
        first.update(second.result())
    return {k: first[k] for k in order}



# Read only by a kernel group's launches and details (`Analysis.launches`, `kernel_detail`: the TUI),
# never by the report: the summary's handed-over trace holds them null, not converted (the launch
# shapes are the costliest columns to convert, ~10% of that conversion).
LAUNCH_COLUMNS = ("grid", "block", "registers", "shared_mem")


def _entries_of_handed(held: list, meta_bytes: bytes, path: str | os.PathLike | None,
                       scrubbed: bool) -> dict[bytes, bytes] | None:
    """The summary's footer entries for the conformed trace table in `held` (`[table]`, emptied:
    once it is converted to pandas for the analysis, nothing here keeps it), about to be written
    with `meta_bytes`: the table is read as `load_trace` would read the file, and analysed with the
    defaults (`scrubbed`: the table went through `scrub_all` already, as every import does, so the
    second pass that a load makes would find nothing). None when the analysis fails (the trace is
    then written without a summary, and analysed when opened)."""
    from rooftop.analysis import analyze
    from rooftop.trace.read import trace_from_handover

    try:
        rows = held[0].num_rows
        held.append(json.loads(meta_bytes))
        return build(analyze(trace_from_handover(held, path, scrubbed, unread=LAUNCH_COLUMNS)), meta_bytes, rows)
    except Exception:
        if os.environ.get("ROOFTOP_DEBUG"):
            raise
        return None
    finally:
        held.clear()


def write_summarized(path: str | os.PathLike, events: Any, meta: Mapping[str, Any], *, conform: bool = True,
                     scrubbed: bool = False) -> Path:
    """`rooftop.trace.write_trace` with the summary in the footer (what a finished import or
    collection writes). Costs one analysis of the rows, during the write. `scrubbed`: `events` is
    a table `scrub_all` gave (see `_entries_of_handed`)."""
    from rooftop.trace import to_table

    held = [to_table(events) if conform or not hasattr(events, "num_rows") else events]
    del events
    return write_summarized_handed_over(path, held, meta, scrubbed=scrubbed)


def write_summarized_handed_over(path: str | os.PathLike, held: list, meta: Mapping[str, Any], *,
                                 scrubbed: bool = False) -> Path:
    """`write_summarized` of the conformed table in `held` (`[table]`, which it empties: the
    caller keeps no other reference, so that the table is freed before the analysis peaks; see
    `rooftop.trace.write.write_handed_over`)."""
    from rooftop.trace import encode_meta
    from rooftop.trace.write import write_handed_over

    from rooftop.trace.seal import seal

    meta_bytes = encode_meta(meta)  # what the writer stores (the same bytes: a pure function)
    out = write_handed_over(path, held, meta, lambda mine: _entries_of_handed(mine, meta_bytes, path, scrubbed))
    # Sealed in place once complete: the 64 digits replace their placeholder (the same length), so
    # the file is whole at every moment; until then, or if this fails, the summary is not used.
    try:
        seal(out)
    except OSError:
        pass
    return out


def refresh(path: str | os.PathLike) -> Path:
    """Store a current summary in an existing rooftop trace file (atomically: the file is rewritten
    beside itself, then renamed over). Its rows and metadata are kept as they are."""
    import pyarrow.parquet as pq

    from rooftop.analysis import analyze
    from rooftop.trace.atomic import replace_atomically
    from rooftop.trace import TraceError, load_trace
    from rooftop.trace.write import write_parquet

    path = Path(path)
    if path.is_dir():
        raise TraceError(path, "is a run directory: summaries are stored per file, and a run of several ranks"
                               " is always analysed whole", "summarize one trace file")
    analysis = analyze(load_trace(path))  # the ordinary load: validated, scrubbed, errors named
    table = pq.read_table(path)
    existing = {k: v for k, v in (table.schema.metadata or {}).items() if not k.startswith(SUMMARY_KEY)}
    entries = build(analysis, existing[META_KEY], table.num_rows)
    if entries is None:
        raise TraceError(path, "the analysis of this trace is not plain JSON; no summary stored")
    table = table.replace_schema_metadata(existing)
    from rooftop.trace.seal import seal

    def write(tmp: str) -> None:
        write_parquet(table, tmp, entries)
        seal(tmp)
    return replace_atomically(path, write)


# --- reading ------------------------------------------------------------------------------------

@dataclass
class Stored:
    """A current summary: the report document (with this file's path; the `BULK` lists still as the
    text `report --json` prints), and the Overview's warnings."""

    version: int
    report: dict
    warnings: list[tuple[str, str]]
    top: int
    bulk: dict[str, str]

    def _parse_bulk(self, name: str) -> tuple[list, bool]:
        """One of the `BULK` lists, parsed, checked and scrubbed, and whether its stored text can be
        printed as it is (plain ASCII JSON that scrubbing leaves alone). Raises ValueError when it
        is not a list of records."""
        from rooftop.trace.redact import redact

        text = self.bulk[name]
        try:
            value = json.loads(text, parse_constant=_reject_constant)
        except RecursionError:
            raise _Malformed(f"{name} is nested too deep") from None
        if not isinstance(value, list) or not all(isinstance(r, dict) for r in value):
            raise _Malformed(f"{name} is not a list of records")
        if "\\" in text:
            _check(value)  # escapes can make what the text cannot hold (lone surrogates)
        clean = _no_secrets(text)
        return (value if clean else redact(value)), clean and _PLAIN_JSON_LIST.fullmatch(text) is not None

    def bulk_values(self, name: str) -> list:
        """One of the `BULK` lists, parsed, checked and scrubbed."""
        return self._parse_bulk(name)[0]

    def full_report(self) -> dict:
        """The whole `report --json` document."""
        return {k: (self.bulk_values(k) if k in BULK else v) for k, v in self.report.items()}

    def json_text(self) -> str:
        """`report --json`'s output (without the final newline): the head printed, the stored bulk
        text spliced in where the lists go, once parsed to know it is sound. Bulk text in which
        anything looks like a secret is scrubbed like any other string and printed anew (the output
        is then what a fresh analysis of the scrubbed rows would print). ValueError: damaged."""
        nonce = os.urandom(8).hex()
        head = {k: (f"{nonce}:{k}" if k in BULK else v) for k, v in self.report.items()}
        text = _json_text(head)
        for name in BULK:
            value, as_stored = self._parse_bulk(name)
            bulk = self.bulk[name] if as_stored else _json_text(value)
            # nested one level in the document: every line after the first one space further in
            text = text.replace(json.dumps(f"{nonce}:{name}"), bulk.replace("\n", "\n "), 1)
        return text


# What `json.dumps(..., indent=1)` of a list prints: ASCII, no control character but newlines.
_PLAIN_JSON_LIST = re.compile(r"\[[\x20-\x7e\n]*\]")


def _no_secrets(text: str) -> bool:
    """Whether scrubbing would leave every string of this JSON text as it is (rooftop.trace.redact):
    none holds a secret's shape, none is a secret-named key. The per-step lists repeat a few
    dozen distinct strings (keys, phases, sources), each looked at once; text with an escape
    (a backslash) is not split this way and counts as suspect (it is then parsed and scrubbed)."""
    from rooftop.trace.redact import redact_text, secret_key

    if "\\" in text:
        return False
    strings = set(text.split('"')[1::2])  # without escapes, every quote opens or closes a string
    return all(redact_text(s) == s and not secret_key(s) for s in strings)


class _Malformed(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _Malformed(f"{name} is not JSON")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _check(obj: Any, depth: int = 0) -> None:
    """Plain JSON only: bounded depth, finite numbers, text without lone surrogates (which no
    writer of a summary makes, and which would break printing)."""
    if depth > MAX_DEPTH:
        raise _Malformed("nested too deep")
    if isinstance(obj, str):
        if not obj.isascii() and _SURROGATE.search(obj):
            raise _Malformed("lone surrogate")
    elif isinstance(obj, float):
        if not math.isfinite(obj):
            raise _Malformed("not finite")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _check(k, depth + 1)
            _check(v, depth + 1)
    elif isinstance(obj, list):
        for v in obj:
            _check(v, depth + 1)


_REPORT_LISTS = ("phases", "top_kernels", "top_groups", "categories", "attention", "gap", "findings", "warnings")
_FINDING_TEXT = ("id", "severity", "title", "detail")


def _shape(report: Any) -> None:
    """The keys and types every reader of the document relies on."""
    if not isinstance(report, dict) or not isinstance(report.get("trace"), dict) \
            or not isinstance(report.get("device"), dict) or not isinstance(report.get("identity"), dict):
        raise _Malformed("not a report document")
    for key in _REPORT_LISTS:
        v = report.get(key)
        if not isinstance(v, list) or (key != "warnings" and not all(isinstance(r, dict) for r in v)):
            raise _Malformed(f"{key} is not a list of records")
    if not all(isinstance(w, str) for w in report["warnings"]):
        raise _Malformed("warnings are not text")
    for f in report["findings"]:
        if not all(isinstance(f.get(k), str) for k in _FINDING_TEXT):
            raise _Malformed("a finding without its text")
    for d in report["device"].get("peaks_differ") or []:
        if not isinstance(d, dict) or not all(isinstance(d.get(k), (int, float)) for k in ("ncu", "datasheet", "ratio")):
            raise _Malformed("peaks_differ")
    if report.get("ranks") is not None:
        raise _Malformed("a multi-rank report")  # only single files are summarised
    for key in ("model", "stalls"):
        if report.get(key) is not None and not isinstance(report[key], dict):
            raise _Malformed(key)
    if report.get("model_phases") is not None and not all(isinstance(m, dict) for m in report["model_phases"]):
        raise _Malformed("model_phases")
    if any(k not in report or report[k] is not None for k in BULK):
        raise _Malformed("bulk lists in the head")


def _decode(footer: Any) -> Stored | None:
    meta_bytes = footer.metadata.get(META_KEY)
    raw = footer.metadata.get(SUMMARY_KEY)
    if raw is None or meta_bytes is None or len(raw) > MAX_SUMMARY_BYTES:
        return None
    try:
        doc = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
        if not isinstance(doc, dict):
            return None
        if doc.get("analysis_version") != ANALYSIS_VERSION or doc.get("digest") != current_digest():
            return None  # another analysis made it: recompute
        if doc.get("rows") != footer.num_rows or doc.get("meta") != _digest(meta_bytes):
            return None  # the file was rewritten since, without its summary being
        top = doc.get("top")
        if not isinstance(top, int) or isinstance(top, bool) or top < 1:
            return None
        _check(doc)
        report = doc.get("report")
        _shape(report)
        warnings = doc.get("overview_warnings")
        if not isinstance(warnings, list) or not all(
                isinstance(w, list) and len(w) == 2 and all(isinstance(x, str) for x in w) for w in warnings):
            return None
        bulk = {}
        for name in BULK:
            data = footer.metadata.get(bulk_key(name))
            if data is None or not isinstance(doc.get("bulk"), dict) or doc["bulk"].get(name) != _digest(data):
                return None  # the lists are not the ones written with this head
            bulk[name] = data.decode("utf-8")
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    from rooftop.trace.redact import redact

    # text from a file: the same secret scrubbing as every other string a trace carries
    report, warnings = redact(report), redact(warnings)
    return Stored(ANALYSIS_VERSION, report, [(w, m) for w, m in warnings], top, bulk)


def load_stored(path: str | os.PathLike, top: int = DEFAULT_TOP, footer: Any = None,
                unsealed: list | None = None) -> Stored | None:
    """The current summary of a rooftop trace file with its `top` groups, or None (none stored,
    stale, damaged, more groups asked than stored, a directory, not Parquet, over the row budget,
    not sealed by this user for these bytes: the caller analyses the rows instead). A current
    summary that only lacks a valid seal (rooftop/trace/seal.py) is appended to `unsealed`: the caller
    says that the rows were analysed, and compares (`disagreement`)."""
    from rooftop import limits, speedups
    from rooftop.trace.footer import read_footer

    if not speedups.on("SUMMARY"):  # off by choice: every answer from the rows (rooftop/speedups.py)
        return None
    p = Path(path)
    try:
        if not p.is_file() or not isinstance(top, int) or top < 1:
            return None
    except OSError:
        return None
    if footer is None:  # (a caller that read the footer already hands it over)
        footer = read_footer(p)
    if footer is None or footer.num_rows > limits.max_rows():
        return None
    stored = _decode(footer)
    if stored is None:
        return None
    from rooftop.trace.seal import verify

    if not verify(p, footer):  # a cache, never an authority: only a summary proven to be of these bytes
        if unsealed is not None:
            unsealed.append(stored)
        return None
    report = stored.report
    for key in ("top_kernels", "top_groups"):
        if top > stored.top and len(report[key]) >= stored.top:
            return None  # more groups asked than stored, and there are more
        report[key] = report[key][:top]
    report["trace"]["path"] = str(p)  # as the ordinary load names it
    report["identity"]["label"] = p.name
    return stored


# What is compared of an unsealed summary with the analysis of the rows: the numbers a report
# leads with. Floats within a relative 1e-9 (the same code gives the same bits; a JSON round trip
# keeps them).
COMPARED = ("phases", "top_groups", "gap")


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, bool) or isinstance(y, bool) or not isinstance(x, (int, float)) or not isinstance(y, (int, float)):
        if isinstance(x, dict) and isinstance(y, dict):
            return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
        if isinstance(x, list) and isinstance(y, list):
            return len(x) == len(y) and all(map(_same, x, y))
        return x == y
    return x == y or abs(x - y) <= 1e-9 * max(abs(x), abs(y))


def disagreement(stored: Stored, report: dict) -> str | None:
    """The first section in which an unsealed stored summary and the report computed from the rows
    differ (None: they agree). `report` is a report document of the default options."""
    for key in COMPARED:
        if key not in report:
            continue
        mine = json.loads(json.dumps(report[key], default=str))
        theirs = stored.report.get(key)
        if key == "top_groups" and isinstance(theirs, list):
            theirs, mine = theirs[:len(mine)], mine[:len(theirs)]
        if not _same(mine, theirs):
            return key
    return None


# What a viewer that does not compare (the TUI) says of a stored summary it did not use.
NOT_USED = ("the stored summary is not sealed for this user and file: not used; every number here is computed "
            "from the rows (`rooftop summarize` seals it for fast opens)")


def unsealed(path: str | os.PathLike) -> bool:
    """Whether `path` holds a current stored summary that lacks this user's seal (so it was not
    used). A few ms (the footer and the seal's HMAC); False for anything that is not such a file."""
    found: list = []
    try:
        load_stored(path, unsealed=found)
    except Exception:  # a summary is a cache: whatever is wrong with it, there is nothing to say
        return False
    return bool(found)


def unsealed_note(path: str | os.PathLike, stored: Stored, report: dict) -> str:
    """The line that says why a stored summary was not used, for the report's warnings."""
    where = disagreement(stored, report)
    if where is not None:
        return (f"the stored summary disagrees with the rows ({where}): discarded; every number here is"
                " computed from the rows")
    return ("the stored summary is not sealed for this user and file: the numbers are computed from the rows"
            " (they agree with it; `rooftop summarize` seals it for fast reports)")
