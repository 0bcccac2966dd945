"""The unit of parallel Parquet reading: one row group of one file (local or gs://), or a slice of one.

A DataFrame staged by the driver is one Parquet file (tfrecorder.sources.dataframe_staging); a Parquet source is one
or more files. Either way the pipeline reads `ParquetPart`s, each on its own worker: small, plain
descriptors that Beam ships to remote workers and Dataflow embeds in the job. A row group of more than
SLICE_ROWS rows (pandas writes up to a million rows in one) is read as slices, each a part of its own,
so that one large row group is still work for every core, sized so that each takes the same time.
"""
from __future__ import annotations

import dataclasses
import mmap
from typing import Iterator, Optional, Sequence

from tfrecorder.io import storage

BATCH_ROWS = 10_000  # rows per Arrow record batch read from a row group (bounds memory per reader)
STREAM_BUFFER_BYTES = 1 << 20  # a streamed read's buffer per column (read_row_group_batches)
SLICE_ROWS = 500_000  # larger row groups are read as slices, a part each, as many as slices of this many rows
# need. A slice decodes the rows of its row group before its own to skip them (Parquet has no row offset;
# pyarrow reads no page index): 0.18 s of CPU a million rows of eight columns. A million-row group (pandas'
# default) in two slices decodes 1.5M rows, in four 2.5M: two slices of 500k rows converted it 10% faster
# on two cores (2.90 → 2.62 s, fewer parts to commit and group too), and still give each core a part
SKIPPED_ROW_COST = 1 / 16  # a row decoded to be skipped, against a row read and encoded (skipping half a
# million-row group of the benchmark's eight columns took 0.06 s of CPU, encoding a row ~2.7 µs; the ratio is
# rounded up: at 1/16 the process given the later slice still finished last): see slice_bounds


@dataclasses.dataclass(frozen=True, order=True)
class ParquetPart:
    path: str  # local path or gs:// URL of the Parquet file
    row_group: int  # index of the row group inside that file
    first_row: int = 0  # a slice of the row group: its rows from this one (numbered within the row group)
    rows: Optional[int] = None  # ... and at most this many (None: to the row group's end)


def file_parts(path: str, row_groups: int) -> tuple[ParquetPart, ...]:
    """Every row group of one file, in order."""
    return tuple(ParquetPart(path, index) for index in range(row_groups))


def row_group_parts(path: str, row_group: int, rows: int) -> tuple[ParquetPart, ...]:
    """A row group of `rows` rows as parts: whole, or as slices (as many as slices of SLICE_ROWS rows
    need) that cost alike (slice_bounds)."""
    slices = -(-rows // SLICE_ROWS)
    if slices <= 1:
        return (ParquetPart(path, row_group),)
    bounds = slice_bounds(rows, slices)
    return tuple(ParquetPart(path, row_group, first, end - first) for first, end in zip(bounds, bounds[1:]))


def slice_bounds(rows: int, slices: int) -> list[int]:
    """First rows of `slices` slices of `rows` rows, then `rows`: each slice a row group's reader
    finishes in the same time, counting the rows it decodes to skip (SKIPPED_ROW_COST each), so that the
    cores the slices go to finish together. Slice k ends at T·(1 + kept + … + kept^k), kept =
    1 − SKIPPED_ROW_COST, T scaled so that the last ends at `rows` (a million rows in two: 516,129 and
    483,871)."""
    kept = 1 - SKIPPED_ROW_COST
    scale = rows * (1 - kept) / (1 - kept ** slices)
    ends = [round(scale * (1 - kept ** k) / (1 - kept)) for k in range(1, slices)]
    return [0, *ends, rows]


def read_row_group_batches(part: ParquetPart, columns: Optional[Sequence[str]] = None, batch_size: Optional[int] = None,
                           streamed: bool = False) -> Iterator["pyarrow.RecordBatch"]:
    """One row group of a Parquet file (local or gs://, through tfrecorder.io.storage, never Beam's or
    TensorFlow's file systems), or the part's slice of it, as Arrow record batches of at most
    `batch_size` rows (default BATCH_ROWS), with every column or only `columns`. A forked worker maps a
    local file instead of reading it (storage.open_source: 5% off the benchmark's Parquet job).

    The row group's column chunks are read whole and at once (Arrow's pre-buffering: few, large reads),
    or, `streamed`, page by page as the batches need them, through a buffer of STREAM_BUFFER_BYTES per
    column: for the first rows of a row group of any size (the driver's sample), which would otherwise
    read all of it (a million-row group's 64 MB for a 10,000-row sample: 67–98 ms; streamed 15–38 ms)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    options = {"pre_buffer": False, "buffer_size": STREAM_BUFFER_BYTES} if streamed else {}
    with storage.open_source(part.path) as raw:
        source = pa.py_buffer(raw) if isinstance(raw, mmap.mmap) else raw
        batches = pq.ParquetFile(source, **options).iter_batches(row_groups=[part.row_group], columns=columns,
                                                                 batch_size=batch_size or BATCH_ROWS)
        yield from _rows_of(batches, part.first_row, part.rows)


def row_group_nulls(part: ParquetPart, columns: Sequence[str]) -> dict[str, bool]:
    """Whether each of `columns` holds a missing value in the part's row group, for the columns its footer
    settles (the others are left out: they must be read). A plain column is settled by its null count; a
    list column only when it has no null slot at all (the count does not tell a missing list from an empty
    one or a missing element); a float column never (NaN is a missing value once read:
    parquet_values.conform_column). A slice answers for its whole row group: the other slices are parts of
    the same job, so the union over a row group's parts is the same."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with storage.open_read(part.path) as raw:
        parquet = pq.ParquetFile(raw)
        group, arrow = parquet.metadata.row_group(part.row_group), parquet.schema_arrow
    nested = [name for name in arrow.names if pa.types.is_nested(arrow.field(name).type)]
    counts: dict[str, list] = {}
    for index in range(group.num_columns):
        chunk = group.column(index)
        path, statistics = chunk.path_in_schema, chunk.statistics
        owner = path if path in arrow.names else next((name for name in nested if path.startswith(name + ".")), None)
        counts.setdefault(owner, []).append(
            statistics.null_count if statistics is not None and statistics.has_null_count else None)
    settled = {}
    for column in columns:
        found = counts.get(column)
        if arrow.get_field_index(column) < 0 or not found or None in found:
            continue
        kind = arrow.field(column).type
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        if pa.types.is_floating(kind) or pa.types.is_nested(kind) and (
                not (pa.types.is_list(kind) or pa.types.is_large_list(kind)) or sum(found)):
            continue
        settled[column] = sum(found) > 0
    return settled


def _rows_of(batches: Iterator["pyarrow.RecordBatch"], first: int, count: Optional[int]) -> Iterator["pyarrow.RecordBatch"]:
    """The batches' rows [first, first + count) (count None: to the end), cut at batch boundaries."""
    seen, end = 0, None if count is None else first + count
    for batch in batches:
        start, stop = max(first - seen, 0), batch.num_rows if end is None else min(end - seen, batch.num_rows)
        seen += batch.num_rows
        if stop > start:
            yield batch if (start, stop) == (0, batch.num_rows) else batch.slice(start, stop - start)
        if end is not None and seen >= end:
            return
