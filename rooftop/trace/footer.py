"""The key-value metadata and row count of a Parquet file, read from its footer in pure Python.

`rooftop report` on a trace with a stored summary (rooftop/present/summary.py) must answer in a fraction of
a second, and importing pyarrow (with numpy) alone costs a good part of that. The footer is
a Thrift-compact `FileMetaData` at the end of the file (`... FOOTER <u32 length> PAR1`): this reads
its `num_rows` (field 3) and `key_value_metadata` (field 5) and skips everything else, never the
row groups' data. Anything unexpected (not Parquet, an encrypted footer, a truncated or damaged
one) gives None: the caller then takes the ordinary pyarrow path, which says what is wrong.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

MAGIC = b"PAR1"
# A footer larger than this is not one rooftop wrote (1M-kernel traces have footers of ~1-10 MB).
MAX_FOOTER_BYTES = 256 << 20
MAX_DEPTH = 32  # Thrift structs nest a few levels in FileMetaData; more is a damaged footer

# Thrift compact protocol type ids
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)


class _Bad(Exception):
    """The footer is not what a Parquet writer writes."""


@dataclass
class Footer:
    num_rows: int
    metadata: dict[bytes, bytes]
    size: int = 0  # the file's size in bytes when the footer was read
    # where each metadata value starts in the file (the summary's seal is checked and written there)
    value_at: dict[bytes, int] = field(default_factory=dict)


def read_footer(path: str | os.PathLike) -> Footer | None:
    """`num_rows` and the key-value metadata of a Parquet file, or None when it cannot be read this way."""
    try:
        with open(path, "rb") as fh:
            if fh.read(4) != MAGIC:
                return None  # a Parquet file starts with the magic too (pyarrow would refuse it)
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            if size < 12:
                return None
            fh.seek(size - 8)
            tail = fh.read(8)
            length = struct.unpack("<I", tail[:4])[0]
            if tail[4:] != MAGIC or length > MAX_FOOTER_BYTES or length + 12 > size:
                return None
            fh.seek(size - 8 - length)
            data = fh.read(length)
        if len(data) != length:
            return None
        footer = _Reader(data).file_metadata()
        start = size - 8 - length
        footer.size = size
        footer.value_at = {k: start + at for k, at in footer.value_at.items()}
        return footer
    except (OSError, _Bad, struct.error, IndexError, ValueError, RecursionError):
        return None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise _Bad("past the end")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        shift = out = 0
        while True:
            b = self.byte()
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 70:
                raise _Bad("varint too long")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def binary(self) -> bytes:
        n = self.varint()
        end = self.pos + n
        if end > len(self.data):
            raise _Bad("string past the end")
        out = self.data[self.pos:end]
        self.pos = end
        return out

    def field(self, last: int) -> tuple[int, int]:
        """(field id, type) of the next field of a struct; type 0 is the end of the struct."""
        b = self.byte()
        kind = b & 0x0F
        if kind == _STOP:
            return 0, _STOP
        delta = b >> 4
        return (last + delta if delta else self.zigzag()), kind

    def list_header(self) -> tuple[int, int]:
        b = self.byte()
        n = b >> 4
        if n == 15:
            n = self.varint()
        return n, b & 0x0F

    def skip(self, kind: int, depth: int = 0) -> None:
        self.pos = _skip(self.data, self.pos, kind, depth)

    def key_value(self) -> tuple[bytes | None, bytes | None, int]:
        key = value = None
        last = at = 0
        while True:
            last, kind = self.field(last)
            if kind == _STOP:
                return key, value, at
            if last == 1 and kind == _BINARY:
                key = self.binary()
            elif last == 2 and kind == _BINARY:
                value = self.binary()
                at = self.pos - len(value)
            else:
                self.skip(kind, 1)

    def file_metadata(self) -> Footer:
        rows, meta, last, value_at = None, {}, 0, {}
        while True:
            last, kind = self.field(last)
            if kind == _STOP:
                break
            if last == 3 and kind == _I64:
                rows = self.zigzag()
            elif last == 5 and kind == _LIST:
                n, elem = self.list_header()
                if elem != _STRUCT:
                    raise _Bad("key_value_metadata is not a list of structs")
                for _ in range(n):
                    key, value, at = self.key_value()
                    if key is not None:
                        meta[key] = value if value is not None else b""
                        value_at[key] = at if value is not None else -1
            else:
                self.skip(kind)
        if rows is None or rows < 0:
            raise _Bad("no row count")
        return Footer(rows, meta, 0, value_at)


_FIXED = {_BYTE: 1, _DOUBLE: 8}  # bytes of a value of these types (booleans in a list: one byte)
_VARINTS = (_I16, _I32, _I64)


def _skip(data: bytes, pos: int, kind: int, depth: int) -> int:
    """The position after the value of compact type `kind` at `pos`. Most of a footer is skipped
    (the schema, every row group's column chunks: thousands of small structs at 1M rows), so this
    is one function over local variables, not a method call per byte."""
    if depth > MAX_DEPTH:
        raise _Bad("nested too deep")
    if kind in _VARINTS:
        while data[pos] & 0x80:  # (past the end: IndexError, which read_footer catches)
            pos += 1
        return pos + 1
    if kind == _STRUCT:
        while True:
            b = data[pos]
            pos += 1
            k = b & 0x0F
            if k == _STOP:
                return pos
            if not b >> 4:  # a long-form field id: its zigzag varint follows
                while data[pos] & 0x80:
                    pos += 1
                pos += 1
            if k in _VARINTS:
                while data[pos] & 0x80:
                    pos += 1
                pos += 1
            elif k != _TRUE and k != _FALSE:  # a struct field's boolean is in its type
                pos = _skip(data, pos, k, depth + 1)
    if kind == _BINARY:
        n, pos = _varint(data, pos)
        pos += n
    elif kind in _FIXED:
        pos += _FIXED[kind]
    elif kind in (_LIST, _SET):
        b = data[pos]
        pos += 1
        n, elem = b >> 4, b & 0x0F
        if n == 15:
            n, pos = _varint(data, pos)
        if elem in (_TRUE, _FALSE):
            pos += n
        elif elem in _FIXED:
            pos += n * _FIXED[elem]
        else:
            for _ in range(n):  # every element takes at least one byte: bounded by the footer
                pos = _skip(data, pos, elem, depth + 1)
    elif kind == _MAP:
        n, pos = _varint(data, pos)
        if n:
            kv = data[pos]
            pos += 1
            for _ in range(n):
                for k in (kv >> 4, kv & 0x0F):
                    pos = pos + 1 if k in (_TRUE, _FALSE) else _skip(data, pos, k, depth + 1)
    elif kind not in (_TRUE, _FALSE):
        raise _Bad(f"unknown type {kind}")
    if pos > len(data):
        raise _Bad("past the end")
    return pos


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it) of the unsigned varint at `pos`."""
    shift = out = 0
    while True:
        b = data[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out, pos
        shift += 7
        if shift > 70:
            raise _Bad("varint too long")
