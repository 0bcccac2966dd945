"""CSV files as a conversion source: the driver reads the head, workers parse byte slices in parallel.

The driver reads at most the first SAMPLE_BYTES of the file (header, sample for schema inference, row
estimate). The pipeline scans byte ranges in parallel to find where records start (even when quoted
fields hold newlines, tfrecorder.sources.csv_slicing), then parses each slice with Python's csv module
exactly as one sequential parse would (`CsvRecords`), or column-wise with Arrow (csv_columns). Text is
decoded in the source's encoding with bytes invalid in it marked (csv_text), so such a record is one
discard with its line; a file in an encoding whose separators cannot be found by scanning bytes
(UTF-16, ...) is one part read from its first byte, as a gzip file is (gzip_csv_source reuses this
module's readers for it).
"""
from __future__ import annotations

import codecs
import csv
import dataclasses
import io
import json
import re
from typing import Any, BinaryIO, Callable, Iterable, Iterator, Optional, Sequence, Union

import pandas as pd

from tfrecorder.core.schema import Schema, check_column_names
from tfrecorder.io import storage
from tfrecorder.sources import csv_slicing, csv_text
from tfrecorder.sources.csv_columns import CsvBatches, ParsedBatches, csv_bytes_batches
from tfrecorder.sources.kept_tables import KeptTables
from tfrecorder.sources.source_protocol import RECORDS, REASONED, SAMPLE_ROWS, FileTable, parent_dir

SAMPLE_BYTES = 32 * 1024 * 1024  # the most of a CSV the driver reads (header, sample, row estimate)
HEAD_STEP_BYTES = 1024 * 1024  # the driver reads a CSV's head in growing steps until it holds the sample
SLICE_READ_BYTES = 4 * 1024 * 1024  # one ranged read per this much of a CSV slice
MIN_BATCH_RECORDS = 64  # fewer records per slice: read row by row (see batches_pay)
COLUMNAR_SLICE_BYTES = 4 * 1024 * 1024  # batches_pay's slice: records over 64 KB go row by row

_ISO_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?)?(Z|[+-]\d{2}:?\d{2})?$")


def _json_array(text: str) -> Optional[list]:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, list) else None


def _refine_text_column(values: pd.Series) -> pd.Series:
    """Text that is all ISO-8601 datetimes → datetimes (UTC); all JSON arrays → lists; else unchanged.

    The sample only decides the column's type: a datetime pandas cannot hold (beyond 1677–2262) becomes
    NaT here and is discarded with its reason when the pipeline encodes that row.
    """
    present = values.dropna()
    if len(present) and all(_ISO_DATETIME.match(v) for v in present):
        return pd.to_datetime(values, utc=True, format="ISO8601", errors="coerce")
    if len(present) and all(v.startswith("[") for v in present):
        parsed = values.astype(object).map(_json_array, na_action="ignore")
        if parsed.notna().sum() == len(present):  # every present value parsed as an array
            return parsed
    return values


def read_csv_sample(text: str) -> pd.DataFrame:
    """The first SAMPLE_ROWS rows of CSV text (header first) with pandas' dtype inference, for schema inference.

    Nullable dtypes keep integer and boolean columns with gaps as integers (not float64), and only an
    empty field counts as missing — exactly what the pipeline's CSV reader treats as missing (malformed
    lines are skipped here; the pipeline discards them with a reason). Text
    columns whose values are all ISO-8601 datetimes or all JSON arrays become datetimes or lists.
    """
    sample = pd.read_csv(io.StringIO(text), nrows=SAMPLE_ROWS, keep_default_na=False, na_values=[""],
                         dtype_backend="numpy_nullable", on_bad_lines="skip")
    for column in sample.columns:
        if pd.api.types.is_string_dtype(sample[column]) and not pd.api.types.is_object_dtype(sample[column]):
            sample[column] = _refine_text_column(sample[column])
    return sample


def record_reason(line_number: int, problem: Union[int, str], expected: int) -> str:
    """Why the record at `line_number` is discarded: `problem` is its field count when that is wrong (an
    int), else what csv_text.invalid_fields found."""
    if isinstance(problem, int):
        return f"malformed CSV row: line {line_number} has {problem} fields, expected {expected}"
    return f"invalid text: line {line_number}: {problem}"


class CsvRecords:
    """Data records of CSV text (no header) as {column: str, or None for an empty field}.

    Iterating yields each well-formed row as a dict, and each other one as (row, record index, problem),
    the index counting every record of this text from 0 (blank lines included) and the problem being
    its field count when that is wrong, or what csv_text.invalid_fields says about bytes not valid in
    `encoding` (the text was decoded with csv_text.INVALID; the row shows them as \\xNN). `records` is
    the number of records read so far. Python's csv module handles quoted fields holding commas, quotes
    and newlines; the pipeline's slice reader and the sequential whole-file reader (`iter_csv_rows`)
    parse through this one class, so they always agree.
    """

    def __init__(self, text: Iterable[str], header: list[str], encoding: str = csv_text.DEFAULT_ENCODING) -> None:
        self.text, self.header, self.encoding, self.records = text, header, encoding, 0

    def __iter__(self) -> Iterator[Union[dict[str, Any], tuple[dict[str, Any], int, Union[int, str]]]]:
        header = self.header
        for fields in csv.reader(self.text):
            index = self.records
            self.records += 1
            if not fields:
                continue  # blank line
            invalid = None if "".join(fields).isascii() else csv_text.invalid_fields(fields, header, self.encoding)
            if invalid is not None:
                yield csv_text.readable_row(header, fields), index, invalid
                continue
            row = {name: (value if value != "" else None) for name, value in zip(header, fields)}
            if len(fields) != len(header):
                yield row, index, len(fields)
            else:
                yield row


def open_text(raw: BinaryIO, encoding: str) -> io.TextIOWrapper:
    """A CSV's bytes (from its first byte) as text for the csv module, invalid bytes marked (csv_text)."""
    return io.TextIOWrapper(raw, encoding=csv_text.stream_codec(encoding), errors=csv_text.INVALID, newline="")


def iter_csv_rows(path: str, encoding: str = csv_text.DEFAULT_ENCODING
                  ) -> Iterator[Union[dict[str, Any], tuple[dict[str, Any], str]]]:
    """Stream a whole CSV sequentially: data rows as dicts; malformed rows as (row, reason)."""
    with storage.open_read(path) as raw:
        text = open_text(raw, encoding)
        header = next(csv.reader(text), None)
        if header is None:
            return
        for item in CsvRecords(text, header, encoding):
            if isinstance(item, tuple):
                row, index, problem = item
                yield row, record_reason(index + 2, problem, len(header))
            else:
                yield item


def part_items(records: Union[CsvRecords, CsvBatches], index: int,
               damaged: tuple[type[Exception], ...] = ()) -> Iterator[Any]:
    """A part's items as the read stage takes them: rows (or batches), (index, row, record, problem) per
    discarded record, and finally (RECORDS, (index, records in the part)) to number them in the file.

    An exception of a `damaged` type (compressed data that ends early or is corrupt) ends the part with
    one (REASONED, (row, reason)) naming the last record read: for parts read from the header on only.
    """
    try:
        for item in records:
            yield (index, *item) if isinstance(item, tuple) else item
    except damaged as exc:
        yield REASONED, ({}, f"corrupt data: after line {records.records + 1}: {exc}")
    yield RECORDS, (index, records.records)


def stream_records(text: io.TextIOBase, columns: Sequence[str], encoding: str,
                   batch_rows: Optional[int] = None) -> Union[CsvRecords, CsvBatches]:
    """The records of a text stream that starts with the header row (a whole file in an encoding that is
    not byte-scannable, a gzip file): rows, or Arrow batches of `batch_rows`. The header is skipped here."""
    next(csv.reader(text), None)  # opened and checked by the driver
    if batch_rows is None:
        return CsvRecords(text, list(columns), encoding)
    return CsvBatches(text, list(columns), batch_rows, encoding)


class _ByteWindow(io.RawIOBase):
    """Bytes [start, end) of a file as a raw stream, read with ranged reads (nothing past `end`)."""

    def __init__(self, path: str, start: int, end: int) -> None:
        super().__init__()
        self._path, self._position, self._end = path, start, end

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._position >= self._end:
            return 0
        data = storage.read_range(self._path, self._position, min(len(buffer), self._end - self._position))
        buffer[: len(data)] = data
        self._position += len(data)
        return len(data)


def batches_pay(record_bytes: int) -> bool:
    """Whether records of this mean size are worth reading column-wise: the columnar encoder pays a fixed
    cost per column and batch, so a batch (a slice, or BATCH_CHARS of a stream) must hold MIN_BATCH_RECORDS
    of them; wider records go row by row, whose cost is per value (otherwise a wide table's cost grows with
    the square of its width)."""
    return record_bytes * MIN_BATCH_RECORDS <= min(csv_slicing.RANGE_BYTES, COLUMNAR_SLICE_BYTES)


def _window(path: str, start: int, end: int) -> io.BufferedReader:
    return io.BufferedReader(_ByteWindow(path, start, end), buffer_size=SLICE_READ_BYTES)


def open_csv_slice(path: str, start: int, end: int, encoding: str = csv_text.DEFAULT_ENCODING) -> io.TextIOBase:
    """The text of bytes [start, end) of a CSV (whole records, see tfrecorder.sources.csv_slicing)."""
    return io.TextIOWrapper(_window(path, start, end), encoding=encoding, errors=csv_text.INVALID, newline="")


@dataclasses.dataclass(frozen=True)
class CsvRows:
    """A CSV file as workers read it: byte slices found by a parallel scan of byte ranges, or the whole
    file as one part (starting at byte 0, header included) when its encoding is not byte-scannable."""

    path: str
    size: int  # the file's size in bytes
    data_start: int  # byte offset of the first data record
    encoding: str = csv_text.DEFAULT_ENCODING  # a codec name checked by conversion_options
    record_bytes: int = 0  # mean bytes per record of the driver's sample: whether column-wise reading pays
    kind: str = "csv"

    def known_parts(self) -> Optional[list[csv_slicing.Slice]]:
        if not csv_text.byte_scannable(self.encoding):
            return [csv_slicing.Slice(0, 0, self.size)]
        if len(self.scan_units()) <= 1:
            return [csv_slicing.Slice(0, self.data_start, self.size)]
        return None

    def scan_units(self) -> list[csv_slicing.ByteRange]:
        return csv_slicing.byte_ranges(self.data_start, self.size)

    def scan(self, unit: csv_slicing.ByteRange) -> csv_slicing.RangeScan:
        return csv_slicing.read_scan(lambda offset, length: storage.read_range(self.path, offset, length), unit,
                                     self.data_start, self.size)

    def plan_parts(self, scans: Sequence[csv_slicing.RangeScan]) -> list[csv_slicing.Slice]:
        return csv_slicing.plan_slices(scans, self.data_start, self.size)

    def likely_part(self, unit: csv_slicing.ByteRange, scan: csv_slicing.RangeScan) -> Optional[csv_slicing.Slice]:
        """The part `plan_parts` most likely makes of `unit` (csv_slicing.outside_quotes_slice), or None."""
        return csv_slicing.outside_quotes_slice(lambda offset, length: storage.read_range(self.path, offset, length),
                                                unit, scan, self.data_start, self.size)

    def read_part(self, part: csv_slicing.Slice, columns: Sequence[str], schema: Schema) -> Iterator[Any]:
        if part.start == 0:  # the whole file, header first
            text = open_text(_window(self.path, 0, part.end), self.encoding)
            return part_items(stream_records(text, columns, self.encoding), part.index)
        text = open_csv_slice(self.path, part.start, part.end, self.encoding)
        return part_items(CsvRecords(text, list(columns), self.encoding), part.index)

    @property
    def reads_batches(self) -> bool:
        return batches_pay(self.record_bytes)

    keeps_tables = True  # a slice's Arrow table may serve the next pass (read_batches' `kept`)

    def read_batches(self, part: csv_slicing.Slice, columns: Sequence[str], schema: Schema,
                     batch_rows: int, kept: Optional[KeptTables] = None) -> Iterator[Any]:
        """A slice's batches: from the table an earlier pass kept (`kept`), else parsed (and kept, when the
        pass keeps tables and Arrow parsed the whole slice)."""
        if part.start == 0:  # the whole file, streamed
            text = open_text(_window(self.path, 0, part.end), self.encoding)
            return part_items(stream_records(text, columns, self.encoding, batch_rows), part.index)
        table = kept.take(part, columns) if kept is not None else None
        if table is not None:
            return part_items(ParsedBatches(table, batch_rows), part.index)
        data = storage.read_range(self.path, part.start, part.end - part.start)  # a few MB (csv_slicing)
        batches = csv_bytes_batches(data, list(columns), batch_rows, self.encoding)
        if kept is not None and isinstance(batches, ParsedBatches):
            kept.keep(part, batches.table)
        return part_items(batches, part.index)


@dataclasses.dataclass
class CsvTable(FileTable):
    """A CSV file opened from its head (`rows`: its CsvRows)."""


def read_head(read_at: Callable[[int, int], bytes], encoding: str) -> tuple[bytes, bool]:
    """A CSV's first bytes, read in growing steps until they hold the header and SAMPLE_ROWS records (at
    most SAMPLE_BYTES), and whether they are the whole file. `read_at(offset, length)` reads its bytes."""
    head, want = b"", HEAD_STEP_BYTES
    while len(head) < SAMPLE_BYTES:
        length = min(want, SAMPLE_BYTES) - len(head)
        chunk = read_at(len(head), length)
        head += chunk
        if len(chunk) < length:
            return head, True
        if _holds_sample(head, encoding):
            break
        want *= 2
    return head, False


def _holds_sample(head: bytes, encoding: str) -> bool:
    if csv_text.byte_scannable(encoding):
        data_start = csv_slicing.header_end(head, False)
        return data_start is not None and csv_slicing.record_count(head, data_start) > SAMPLE_ROWS + 1
    return csv_text.decode(head, csv_text.stream_codec(encoding), final=False).count("\n") > SAMPLE_ROWS + 1


def _record_texts(text: str) -> list[str]:
    """The text of each record (header first) as the csv module reads them: a quoted field may hold newlines."""
    stream = io.StringIO(text, newline="")
    ends = [0]
    for _ in csv.reader(stream):
        ends.append(stream.tell())
    return [text[start:end] for start, end in zip(ends, ends[1:])]


@dataclasses.dataclass
class CsvHead:
    """What the driver learns from a CSV's first bytes: never more than they hold."""

    header: list[str]
    sample: pd.DataFrame  # whole records only; those holding invalid bytes left out (the pipeline discards them)
    data_start: int  # byte offset of the first data record (0 when the encoding is not byte-scannable)
    records: int  # records (blank lines included) the sample's bytes hold
    sample_bytes: int  # how many bytes of the file (after data_start) those records span
    complete: bool  # the head was the whole file: `records` is exact

    @property
    def record_bytes(self) -> int:
        """The sample's mean bytes per record (how many records a slice of the file holds)."""
        return self.sample_bytes // max(self.records, 1)

    def estimate(self, size: int) -> int:
        """Rows in a file of `size` bytes, extrapolated from the sample (exact when it was the whole file)."""
        if self.complete:
            return self.records
        return round(self.records * (size - self.data_start) / max(self.sample_bytes, 1))


def open_head(head: bytes, complete: bool, encoding: str, name: str) -> CsvHead:
    """The header (ValueError when missing or not valid text), sample and record count of a CSV's head."""
    codec = csv_text.stream_codec(encoding)
    if csv_text.byte_scannable(encoding):
        data_start = csv_slicing.header_end(head, complete)
        if data_start is None:
            raise ValueError(f"CSV file {name}: the header row does not end within its first {SAMPLE_BYTES:,} bytes")
        sample_end = len(head) if complete else csv_slicing.last_record_end(head, data_start)
        text = csv_text.decode(head[:sample_end], codec)
        records = csv_slicing.record_count(head[:sample_end], data_start)
        texts = _record_texts(text) if csv_text.has_invalid(text) else None
        sample_bytes = sample_end - data_start
    else:  # records found by the csv module itself
        data_start, texts = 0, _record_texts(csv_text.decode(head, codec, final=complete))
        if not complete and len(texts) < 2:
            raise ValueError(f"CSV file {name}: the header row does not end within its first {SAMPLE_BYTES:,} bytes")
        if not complete:
            texts.pop()  # the last record may be cut off
        text, records = "".join(texts), max(len(texts) - 1, 0)
        sample_bytes = len("".join(texts[1:]).encode(encoding, "replace"))
    header = next(csv.reader(io.StringIO(text, newline="")), None)
    if not header:
        raise ValueError(f"CSV file {name} is empty (no header row)")
    if csv_text.has_invalid("".join(header)):
        raise ValueError(f"CSV file {name}: the header row is not valid {codecs.lookup(encoding).name} text "
                         f"({csv_text.readable(','.join(header))!r}); pass the file's encoding as encoding=")
    check_column_names(header)  # a table too wide is refused before pandas parses its sample
    if texts is not None:
        text = "".join(record for record in texts if not csv_text.has_invalid(record))
    return CsvHead(header, read_csv_sample(text), data_start, records, sample_bytes, complete)


def open_csv(path: str, encoding: str = csv_text.DEFAULT_ENCODING) -> CsvTable:
    """Header, sample and row estimate from the file's first bytes (see read_head): nothing more is read."""
    size = storage.size(path)
    head, complete = read_head(lambda offset, length: storage.read_range(path, offset, length), encoding)
    opened = open_head(head, complete or len(head) >= size, encoding, path)
    return CsvTable(opened.header, opened.sample, parent_dir(path), opened.estimate(size), rows_estimated=True,
                    rows=CsvRows(path, size, opened.data_start, encoding, opened.record_bytes))
