"""CSV text → Arrow record batches of text columns (empty fields as nulls), for the columnar encoder.

Parses exactly as `csv_source.CsvRecords` does (Python's csv module, same records, same malformed lines,
invalid text and record numbering), but hands the well-formed rows over column by column: no dict per
row. `csv_bytes_batches` parses a whole slice with Arrow's CSV reader (many times faster) when every
record of it is well formed and valid text, and falls back to Python's csv module for slices with a
blank or malformed line or bytes invalid in the encoding (or anything else Arrow refuses), so lines are
numbered and reasoned as before.
"""
from __future__ import annotations

import codecs
import csv
import io
from typing import Iterable, Iterator, Optional, Union

import pyarrow as pa
import pyarrow.compute as pc

from tfrecorder.sources import csv_text

BATCH_ROWS = 16_384
BATCH_CHARS = 4 * 1024 * 1024  # a batch of a stream is cut here too: its memory stays that of a slice


def _column(values: tuple) -> pa.Array:
    array = pa.array(values, pa.string())
    return pc.if_else(pc.equal(array, ""), pa.scalar(None, pa.string()), array)


class CsvBatches:
    """Data records of CSV text (no header) as batches of text columns.

    Iterating yields a pa.RecordBatch per `batch_rows` well-formed rows (or fewer, holding BATCH_CHARS of
    text: a whole file streamed never sits in memory) and each other record as
    (row, record index, problem), as CsvRecords does; `records` is the number of records read (blank
    lines included). The text is decoded with csv_text.INVALID.
    """

    def __init__(self, text: Iterable[str], header: list[str], batch_rows: int = BATCH_ROWS,
                 encoding: str = csv_text.DEFAULT_ENCODING) -> None:
        self.text, self.header, self.batch_rows, self.encoding, self.records = text, header, batch_rows, encoding, 0

    def _batch(self, rows: list[list[str]]) -> pa.RecordBatch:
        columns = list(zip(*rows))
        return pa.RecordBatch.from_arrays([_column(values) for values in columns], names=self.header)

    def __iter__(self) -> Iterator[Union[pa.RecordBatch, tuple[dict, int, Union[int, str]]]]:
        header, width, rows, chars = self.header, len(self.header), [], 0
        for fields in csv.reader(self.text):
            index = self.records
            self.records += 1
            invalid = None if "".join(fields).isascii() else csv_text.invalid_fields(fields, header, self.encoding)
            if invalid is not None:
                yield csv_text.readable_row(header, fields), index, invalid
            elif len(fields) == width:
                rows.append(fields)
                chars += sum(map(len, fields))
                if len(rows) >= self.batch_rows or chars >= BATCH_CHARS:
                    yield self._batch(rows)
                    rows, chars = [], 0
            elif fields:  # not a blank line
                yield {name: (value if value != "" else None) for name, value in zip(header, fields)}, index, len(fields)
        if rows:
            yield self._batch(rows)


def _arrow_table(data: bytes, header: list[str]) -> pa.Table | None:
    """The slice (valid UTF-8: `_utf8`'s bytes, so Arrow does not check them again, ~9% of its parse) as a
    table of text columns, or None when a record is blank or malformed.

    Arrow reads a blank line as a row of nulls where Python's csv module skips it: a slice with a row
    whose every field is empty is left to Python's csv module (rarely a real row of empty fields).
    The slice is parsed on the calling thread: the job's parallelism is its parts (a process per core),
    and Arrow's own threads beside them only added work (a 30 MB slice: 77 ms of CPU on one thread,
    174 ms on its pool of two, and longer in wall time too).
    """
    import pyarrow.csv as pacsv

    invalid = []

    def on_invalid(row) -> str:
        invalid.append(row)
        return "skip"

    try:
        table = pacsv.read_csv(
            io.BytesIO(data),
            read_options=pacsv.ReadOptions(column_names=header, block_size=1 << 24, use_threads=False),
            parse_options=pacsv.ParseOptions(newlines_in_values=True, ignore_empty_lines=False,
                                              invalid_row_handler=on_invalid),
            convert_options=pacsv.ConvertOptions(column_types={name: pa.string() for name in header},
                                                 null_values=[""], strings_can_be_null=True,
                                                 quoted_strings_can_be_null=True, check_utf8=False))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if invalid or not table.num_rows:
        return None
    empty = table.column(0).is_null()
    for column in table.columns[1:]:
        empty = pc.and_(empty, column.is_null())
    return None if pc.any(empty).as_py() else table


_ASCII_AS_UTF8 = ("utf-8", "utf-8-sig", "ascii", "iso8859-1")  # codecs whose ASCII bytes are the same UTF-8 text


def _utf8(data: bytes, encoding: str) -> Optional[bytes]:
    """The slice as UTF-8 for Arrow's reader, or None when it holds bytes invalid in its encoding (checked
    here: Arrow's own UTF-8 check ends in an unraisable error inside its invalid-row handler). ASCII bytes
    are checked without decoding them (a 16 MB slice: ~1 ms, not ~15 ms and a copy)."""
    if data.isascii() and codecs.lookup(encoding).name in _ASCII_AS_UTF8:
        return data
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError:
        return None
    return data if codecs.lookup(encoding).name == "utf-8" else text.encode("utf-8")


def csv_bytes_batches(data: bytes, header: list[str], batch_rows: int = BATCH_ROWS,
                      encoding: str = csv_text.DEFAULT_ENCODING) -> CsvBatches:
    """CsvBatches over a slice's bytes: Arrow's reader when the slice is clean, else Python's csv module."""
    utf8 = _utf8(data, encoding) if len(header) > 1 and data and not data.isspace() else None  # (no stripped copy)
    table = _arrow_table(utf8, header) if utf8 is not None else None
    if table is None:
        text = io.TextIOWrapper(io.BytesIO(data), encoding=encoding, errors=csv_text.INVALID, newline="")
        return CsvBatches(text, header, batch_rows, encoding)
    return ParsedBatches(table, batch_rows)


class ParsedBatches(CsvBatches):
    """A slice's batches from its Arrow table (every record well formed: nothing else to yield)."""

    def __init__(self, table: pa.Table, batch_rows: int) -> None:
        self.table, self.batch_rows, self.records = table, batch_rows, table.num_rows

    def __iter__(self):
        yield from self.table.to_batches(max_chunksize=self.batch_rows)
