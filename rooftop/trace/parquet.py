"""Reading the Parquet file: one column of one row group at a time, text as shared dictionaries, the
columns without any value left unread, the runtime rows filtered out as they come."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rooftop import limits
from rooftop.trace.schema import GPU_KINDS, REQUIRED, SCHEMA, TEXT_COLUMNS, TraceError, one_line
from rooftop.trace.conform import _is_text
from rooftop.trace.inputs import check_input, is_parquet
from rooftop.trace.meta import _parse_meta
from rooftop.trace.runtime import _kind_in, _kind_is


def _read_filtered(pf: pq.ParquetFile, columns: list[str], kind: str, keep: bool) -> pa.Table:
    """The rows whose `kind` is (`keep`) or is not `kind`, the GPU rows kept first (in file order),
    then the others (see `split_runtime`). Read one column of one row group at a time and filtered
    as it comes: the file is never decoded whole (read whole and then filtered, a large Kineto
    import's load peaked far higher). See `_row_group_column` for how each column is read."""
    import pyarrow.compute as pc

    first: dict[str, list] = {c: [] for c in columns}
    rest: dict[str, list] = {c: [] for c in columns}
    types: dict[str, pa.DataType] = {}
    for g in range(pf.metadata.num_row_groups):
        kinds = pf.read_row_group(g, columns=["kind"], use_threads=False).column(0)
        hit = _kind_is(kinds, kind)
        if not keep:
            hit = pc.invert(hit)
        gpu = _kind_in(kinds, GPU_KINDS)
        masks = [(first, pc.and_(hit, gpu).combine_chunks()), (rest, pc.and_(hit, pc.invert(gpu)).combine_chunks())]
        masks = [(parts, mask, pc.sum(mask).as_py() or 0) for parts, mask in masks]
        for c in columns:
            col = kinds if c == "kind" else _row_group_column(pf, g, c)
            types[c] = col.type
            got = []
            for parts, mask, hits in masks:
                if hits == len(col):
                    got.append((parts, list(col.chunks)))
                elif hits:
                    got.append((parts, list(col.filter(mask).chunks)))
                else:  # no row, but the dictionary: text columns keep the categories a whole read has
                    got.append((parts, [chunk.slice(0, 0) for chunk in col.chunks[:1]]))
            del col
            if pa.types.is_dictionary(types[c]) and pf.metadata.num_row_groups <= ONE_DICTIONARY_MAX_GROUPS:
                # one dictionary for the column, not one per row group: the GPU rows and the ranges
                # of an import, stored apart, name mostly the same paths (held twice otherwise)
                got = _one_dictionary(first, rest, c, got, types[c])
            for parts, chunks in got:
                parts[c] += chunks
        pa.default_memory_pool().release_unused()  # the row group's decoded pages, as we go
    schema = pf.schema_arrow
    fields = [pa.field(c, types.get(c, schema.field(c).type)) for c in columns]
    return pa.table({f.name: pa.chunked_array(first[f.name] + rest[f.name], type=f.type) for f in fields},
                    schema=pa.schema(fields, metadata=schema.metadata))


# Up to this many row groups (an import writes one per 1Mi rows: 1M kernels make 3) the lazy read
# keeps one dictionary per column as it goes; each group costs a pass over the dictionary so far,
# so a file of more groups (other writers use small ones) is unified once, after the read.
ONE_DICTIONARY_MAX_GROUPS = 8


def _one_dictionary(first: dict, rest: dict, c: str, got: list, type_: pa.DataType) -> list:
    """A row group's chunks of dictionary column `c` (`got`: [(parts, chunks)]) over one dictionary
    with the chunks read before them, which share one already. The new chunks are unified behind an
    empty chunk carrying that dictionary, so a group costs its size and theirs, not a pass over
    every earlier chunk again (quadratic in the row groups). Arrow numbers the
    values in the order it meets them, so the unified dictionary begins with the earlier one and
    the earlier chunks keep their indices; checked, else everything is unified again."""
    before = first[c] + rest[c]
    new = [chunk for _, chunks in got for chunk in chunks]
    if not new:
        return got
    lead = [before[0].slice(0, 0)] if before else []
    both = pa.chunked_array(lead + new, type=type_).unify_dictionaries()
    dictionary = both.chunk(0).dictionary
    known = before[0].dictionary if before else dictionary
    if not dictionary.slice(0, len(known)).equals(known):  # (not seen)
        both = pa.chunked_array(before + new, type=type_).unify_dictionaries()
        first[c], rest[c] = both.chunks[:len(first[c])], both.chunks[len(first[c]):len(before)]
        out = iter(both.chunks[len(before):])
        return [(parts, [next(out) for _ in chunks]) for parts, chunks in got]

    def retag(chunk: pa.DictionaryArray, values: pa.Array) -> pa.DictionaryArray:
        return pa.DictionaryArray.from_arrays(chunk.indices, values, safe=False)  # (no copy)

    if len(dictionary) > len(known):  # grown: the earlier chunks take it, their indices unchanged
        first[c], rest[c] = [retag(x, dictionary) for x in first[c]], [retag(x, dictionary) for x in rest[c]]
    else:  # nothing new: the new chunks take the earlier one (not a second copy of the same values)
        dictionary = known
    out = iter([retag(x, dictionary) for x in both.chunks[len(lead):]])
    return [(parts, [next(out) for _ in chunks]) for parts, chunks in got]


def _row_group_column(pf: pq.ParquetFile, group: int, name: str) -> pa.ChunkedArray:
    """One column of one row group. Text is read whole (one dictionary for the row group: read in
    batches, each batch carried its own copy of it); other columns in 64k-row batches (decoding a
    launch shape of a 1M-row group at once held many times its result in levels and builders)."""
    want = pf.schema_arrow.field(name).type
    if _is_text(want):
        return pf.read_row_group(group, columns=[name], use_threads=False).column(0)
    batches = pf.iter_batches(batch_size=1 << 16, row_groups=[group], columns=[name], use_threads=False)
    return pa.chunked_array([b.column(0) for b in batches], type=want)


def _read_file(path: Path, skip_runtime: bool = False) -> tuple[pa.Table, dict[str, Any]]:
    size = check_input(path, allow_dir=False).st_size
    if size == 0:
        raise TraceError(path, "empty file")
    if not is_parquet(path):
        raise TraceError(path, "not a Parquet file", "import other formats with `rooftop import`")
    try:
        # Names and paths repeat (a decode step launches the same kernels in every layer): read them
        # dictionary-encoded, as pandas categoricals: ~6x faster to load and smaller than strings.
        pf = pq.ParquetFile(path)
        schema = pf.schema_arrow
        meta = _parse_meta(path, schema.metadata)
        rows, cap = pf.metadata.num_rows, limits.max_rows()
        if rows > cap:
            raise TraceError(path, limits.over_budget(f"{rows:,} rows", limits.MAX_ROWS_ENV, cap))
        text = [c for c in TEXT_COLUMNS if c in schema.names and pa.types.is_string(schema.field(c).type)]
        columns = _columns_with_values(pf)
        if skip_runtime and "kind" in schema.names:
            # filtered row group by row group: the runtime rows (one per kernel in a Kineto import)
            # are never held beside the events, and never split off a 2M-row table
            table = _read_filtered(pq.ParquetFile(path, read_dictionary=text), columns, "runtime", keep=False)
        else:
            table = pq.ParquetFile(path, read_dictionary=text).read(columns=columns)
        table.validate(full=True)  # a flipped byte can leave dictionary indices out of range
    except TraceError:
        raise
    except (pa.ArrowException, OSError, ValueError, IndexError, TypeError) as exc:
        reason = "truncated or corrupt Parquet"
        with open(path, "rb") as fh:
            fh.seek(max(0, size - 4))
            if fh.read(4) != b"PAR1":
                reason = "truncated Parquet file (no footer)"
        raise TraceError(path, f"{reason}: {one_line(exc, 160)}") from None
    return table, meta


def _columns_with_values(pf: pq.ParquetFile) -> list[str]:
    """The file's columns less the optional schema columns its statistics say hold no value at
    all (a trace without ncu leaves ~30 counter and stall columns empty; read, each would still
    fill a buffer per row). `_to_frame` gives them back as nulls."""
    md, names = pf.metadata, pf.schema_arrow.names
    empty = set()
    if md.num_row_groups:
        flat = {md.schema.column(j).path: j for j in range(md.num_columns)}
        for name in names:
            j = flat.get(name)
            if name in REQUIRED or name not in SCHEMA.names or j is None:
                continue
            stats = [md.row_group(g).column(j).statistics for g in range(md.num_row_groups)]
            if all(st is not None and st.has_null_count and st.null_count == md.row_group(g).num_rows
                   for g, st in enumerate(stats)):
                empty.add(name)
    return [n for n in names if n not in empty]
