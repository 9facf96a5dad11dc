"""Stream one top-level JSON object whose big array (Kineto's `traceEvents`) does not fit in memory.

The file (plain or gzip) is decoded a chunk at a time. The other top-level keys are small and
decoded whole; the big array is handed to a sink in batches of complete elements, each batch as
the text of a JSON array, so the sink can decode thousands of events in one C call.
"""
from __future__ import annotations

import codecs
import json
import os
import re
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from rooftop import limits
from rooftop.errors import TraceError

Progress = Callable[[int, int], None]
CHUNK = 4 << 20  # bytes read at a time: big enough that per-batch overhead vanishes, small to bound memory

_WS = re.compile(r"[\s,]*")
# the stdlib decoder with floats kept as their text: the exact (slow) path and the header's values
def _bounded_int(text: str):
    """An integer of more digits than Python converts (`sys.get_int_max_str_digits`, 4300): far
    beyond any time, id or size, so an infinity, which every reader drops as out of range."""
    if len(text) <= 4000:
        return int(text)
    return float("-inf") if text.startswith("-") else float("inf")


class _Decoder(json.JSONDecoder):
    """json's decoder (floats kept as their text) that survives a 5,000-digit integer: the fast
    scanner first; where it refused such an integer (a plain ValueError, not a syntax error), the
    same text again with a bounded integer conversion (a Python call per integer: only then)."""

    def __init__(self) -> None:
        super().__init__(parse_float=str)
        self._bounded = json.JSONDecoder(parse_float=str, parse_int=_bounded_int)

    def raw_decode(self, s, idx=0):
        try:
            return super().raw_decode(s, idx)
        except json.JSONDecodeError:
            raise
        except ValueError:  # "Exceeds the limit (4300 digits) for integer string conversion"
            return self._bounded.raw_decode(s, idx)


DECODER = _Decoder()
_scan = DECODER.raw_decode


class Sink(Protocol):
    def add_text(self, text: str) -> None:
        """Take the text of a JSON array of elements; raise ValueError, adding nothing, if it is
        not valid JSON."""

    def add_objects(self, objs: list) -> None:
        """Take elements already decoded by `DECODER`."""

    # and optionally add_span(buf, start, stop): `add_text("[" + buf[start:stop] + "]")` without
    # the text made first (`_kineto_events.Collector`)


class Stream:
    """Text of a (possibly gzipped) file, refilled chunk by chunk, with the raw position for progress.

    Gzip is inflated with zlib directly: `GzipFile.read` drops what it had inflated when the
    stream turns out truncated, and a truncated trace should keep every complete event."""

    def __init__(self, path: Path, progress: Progress | None, chunk: int, start: int = 0, end: int | None = None):
        self.path = path
        self.chunk = chunk
        self.raw = open(path, "rb")
        self.total = os.fstat(self.raw.fileno()).st_size
        self.end = self.total if end is None else end  # a plain file's bytes [start, end) only
        self.gz = self.raw.read(2) == b"\x1f\x8b"
        self.raw.seek(0 if self.gz else start)
        self.z = zlib.decompressobj(16 + zlib.MAX_WBITS) if self.gz else None
        self.pending = b""
        self.inflated = 0
        self.inflate_budget = limits.max_inflate(self.total)
        self.dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.buf, self.pos, self.eof = "", 0, False
        self.consumed = 0  # characters dropped from the front of buf (for error offsets)
        self.truncated: str | None = None
        self.progress = progress

    def close(self):
        self.raw.close()

    def _bytes(self) -> bytes:
        if not self.gz:
            return self.raw.read(max(0, min(self.chunk, self.end - self.raw.tell())))
        while True:
            if not self.pending:
                self.pending = self.raw.read(max(1, self.chunk // 4))
                if not self.pending:
                    if not self.z.eof:
                        self.truncated = "compressed stream ends early"
                    return b""
            if self.z.eof:  # concatenated gzip members
                self.z = zlib.decompressobj(16 + zlib.MAX_WBITS)
            try:
                # at most one chunk out per call: a gzip bomb inflates 1 MB into 1 GB in one call
                out = self.z.decompress(self.pending, self.chunk)
            except zlib.error as exc:
                self.truncated = f"corrupt compressed data ({exc})"
                return b""
            self.pending = self.z.unused_data if self.z.eof else self.z.unconsumed_tail
            self.inflated += len(out)
            if self.inflated > self.inflate_budget:
                raise TraceError(self.path, limits.over_budget(
                    f"decompressed size (over {self.inflated:,} bytes from {self.total:,})",
                    limits.MAX_INFLATE_RATIO_ENV, limits.budget(limits.MAX_INFLATE_RATIO_ENV,
                                                                limits.MAX_INFLATE_RATIO_DEFAULT)))
            if out:
                return out

    def copy_to(self, out) -> None:
        """Write the rest of the file's bytes, inflated (the gzip budget applies), to `out`; a
        truncated or corrupt gzip stream sets `truncated` as a read would."""
        while True:
            data = self._bytes()
            if not data:
                return
            out.write(data)
            if self.progress:
                self.progress(min(self.raw.tell(), self.total), self.total)

    def more(self, at_least: int = 0) -> bool:
        """Read one more chunk into the buffer, or `at_least` bytes (an element longer than the
        buffer: read as much again as is held, so that its decode is retried a logarithmic number
        of times and a name of any length costs linear time); False at end of input."""
        if self.eof:
            return False
        data = self._bytes()
        if at_least > len(data) and data:
            parts, got = [data], len(data)
            while got < at_least:
                part = self._bytes()
                if not part:
                    break
                parts.append(part)
                got += len(part)
            data = b"".join(parts)
        self.consumed += self.pos
        self.buf = self.buf[self.pos:] + self.dec.decode(data, final=not data)
        self.pos = 0
        if not data:
            self.eof = True
        if self.progress:
            self.progress(min(self.raw.tell(), self.total), self.total)
        return bool(data)

    def cursor_byte(self) -> int | None:
        """The file offset of the cursor (plain files), None where it cannot be known for sure:
        the buffer's text re-encoded must be the bytes it was decoded from."""
        if self.gz:
            return None
        if self.buf.isascii():  # (a flag of the text, no scan) its bytes are its characters
            ahead, head = len(self.buf) - self.pos, self.buf[self.pos:self.pos + 4096].encode("ascii")
        else:
            rest = self.buf[self.pos:].encode("utf-8")
            ahead, head = len(rest), rest[:4096]
        at = self.raw.tell() - ahead - len(self.dec.getstate()[0])
        with open(self.path, "rb") as f:
            f.seek(at)
            return at if f.read(min(ahead, 4096)) == head else None

    def seek_byte(self, offset: int) -> None:
        """Go on reading a plain file from `offset` (the start of a character)."""
        self.raw.seek(offset)
        self.dec.reset()
        self.buf, self.pos, self.eof = "", 0, False
        self.consumed = offset  # error offsets from here count bytes before as characters

    def skip_ws(self) -> str | None:
        """Skip whitespace and commas; the next character (None at end of input)."""
        while True:
            end = _WS.match(self.buf, self.pos, self.pos + 4096).end()
            if end == self.pos + 4096:  # a long run (padding, or a bomb of blanks): C-speed strip
                end = len(self.buf) - len(self.buf[end:].lstrip(" \t\r\n,"))
            self.pos = end
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return None

    @property
    def left(self) -> int:
        """Characters read but not consumed (an incomplete element at a cut)."""
        return len(self.buf) - self.pos


class Malformed(ValueError):
    """A syntax error inside the input (not an element cut short by the end of the buffer)."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


def _needs_more(exc: json.JSONDecodeError, text_len: int) -> bool:
    """True when a decode failed only because the text stops early: an unterminated string, or an
    error at the very end. Anything earlier is a real syntax error, and more input cannot fix it."""
    return exc.msg.startswith("Unterminated string") or exc.pos >= text_len - 1


def value(s: Stream) -> Any:
    """Decode one JSON value at the cursor, reading more input until it is complete. A syntax
    error is reported at once (never retried with each new chunk: that would be quadratic)."""
    if s.skip_ws() is None:
        raise EOFError("file ends early")
    while True:
        try:
            obj, end = _scan(s.buf, s.pos)
            s.pos = end
            return obj
        except json.JSONDecodeError as exc:
            if not _needs_more(exc, len(s.buf)):
                s.pos = exc.pos
                raise Malformed(f"malformed JSON ({exc.msg})", s.consumed + exc.pos) from None
            if not s.more(at_least=s.left):  # (doubling: a long token is decoded O(log n) times)
                raise


def array(s: Stream, sink: Sink) -> None:
    """Stream the elements of the array at the cursor (after its `[`) into `sink`. A slice that
    parses as `[...]` necessarily ends at an element boundary, so each full buffer is cut at its
    last `},` and handed over whole (a cut inside a string fails to parse: try an earlier one)."""
    add_span = getattr(sink, "add_span", None)
    while True:
        c = s.skip_ws()
        if c is None:
            return
        if c == "]":
            s.pos += 1
            return
        buf, start = s.buf, s.pos
        cut = len(buf)
        for _ in range(4):
            cut = buf.rfind("},", start, cut)
            if cut < 0:
                break
            try:
                if add_span is not None:
                    add_span(buf, start, cut + 1)
                else:
                    sink.add_text("[" + buf[start:cut + 1] + "]")
            except ValueError:
                if _stop_at_syntax_error(s, sink, buf, start, cut):
                    break  # the array's rest was handed over; the cursor is on its `]`
                continue
            s.pos = cut + 2
            break
        else:
            cut = -1
        if cut >= 0:
            continue
        if s.left < s.chunk and s.more():
            continue  # only the start of an element is buffered: read on rather than decode it alone
        if c != "{":
            raise ValueError(f"unexpected {c!r} in the array")
        sink.add_objects([value(s)])  # one element, reading more input if needed


def _stop_at_syntax_error(s: Stream, sink: Sink, buf: str, start: int, cut: int) -> bool:
    """After a batch failed to decode: if the reason is a syntax error inside the batch (not the
    cut), hand over the complete elements before it and raise `Malformed`, once. True when the
    cut lay past the array's end and the array's rest was handed over instead."""
    text = "[" + buf[start:cut + 1] + "]"
    try:
        DECODER.decode(text)
        return False  # valid JSON that the sink refused for another reason: let the caller go on
    except json.JSONDecodeError as exc:
        if _needs_more(exc, len(text)) or exc.pos >= len(text) - 2:
            return False  # the cut fell inside an element: an earlier cut (or more input) will do
        if exc.msg == "Extra data":
            # The cut fell past the array's end (a `},` in an object-valued key after it, such as
            # `"distributedInfo": {...}, "traceName": ...`): the text up to the array's `]` is the
            # rest of the array, whole. Hand it over; the cursor goes to that `]`.
            end = DECODER.raw_decode(text)[1]
            sink.add_text(text[:end])
            s.pos = start + end - 2
            return True
        bad, msg = start + exc.pos - 1, exc.msg
    before = buf.rfind("},", start, bad)
    if before >= 0:
        try:
            sink.add_text("[" + buf[start:before + 1] + "]")
            s.pos = before + 2
        except ValueError:
            s.pos = start
    else:
        s.pos = start
    raise Malformed(f"malformed JSON ({msg})", s.consumed + bad)


def document(s: Stream, key: str, sink: Sink, at_array: Callable[[Stream], None] | None = None) -> dict:
    """Walk the top-level object; stream the array under `key` into `sink`, return the other keys.
    `at_array` is called with the cursor on the array's first element (it may move the cursor
    further in, to an element boundary: `_kineto_parallel.RangeSplit`)."""
    if s.skip_ws() != "{":
        raise ValueError("not a JSON object")
    s.pos += 1
    head: dict = {}
    seen = False
    while True:
        c = s.skip_ws()
        if c is None:
            raise EOFError(f"file ends after {key}" if seen else f"no {key} array")
        if c == "}":
            break
        k = value(s)
        if not isinstance(k, str):
            raise ValueError("bad key")
        if s.skip_ws() != ":":
            raise ValueError("expected ':'")
        s.pos += 1
        if k == key:
            if s.skip_ws() != "[":
                raise ValueError(f"{key} is not an array")
            s.pos += 1
            seen = True
            if at_array is not None:
                at_array(s)
            array(s, sink)
        else:
            head[k] = value(s)
    if not seen:
        raise ValueError(f"no {key} array")
    return head
