"""CSV files as a conversion source: the driver reads the head, workers parse byte slices in parallel.

The driver reads at most the first SAMPLE_BYTES of the file (header, sample for schema inference, row
estimate). The pipeline scans byte ranges in parallel to find where records start (even when quoted
fields hold newlines, tfrecorder.sources.csv_slicing), then parses each slice with Python's csv module
exactly as one sequential parse would (`CsvRecords`), or column-wise with Arrow (csv_columns).
"""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
from typing import Any, Iterator, Optional, Sequence, Union

import pandas as pd

from tfrecorder.core.schema import Schema
from tfrecorder.io import storage
from tfrecorder.sources import csv_slicing
from tfrecorder.sources.csv_columns import csv_bytes_batches
from tfrecorder.sources.source_protocol import RECORDS, SAMPLE_ROWS, Table, parent_dir

SAMPLE_BYTES = 32 * 1024 * 1024  # the most of a CSV the driver reads (header, sample, row estimate)
HEAD_STEP_BYTES = 1024 * 1024  # the driver reads a CSV's head in growing steps until it holds the sample
SLICE_READ_BYTES = 4 * 1024 * 1024  # one ranged read per this much of a CSV slice

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


def read_csv_sample(stream) -> pd.DataFrame:
    """The first SAMPLE_ROWS rows with pandas' dtype inference, for schema inference.

    Nullable dtypes keep integer and boolean columns with gaps as integers (not float64), and only an
    empty field counts as missing — exactly what the pipeline's CSV reader treats as missing (malformed
    lines are skipped here; the pipeline discards them with a reason). Text
    columns whose values are all ISO-8601 datetimes or all JSON arrays become datetimes or lists.
    """
    sample = pd.read_csv(stream, nrows=SAMPLE_ROWS, encoding="utf-8-sig", keep_default_na=False, na_values=[""],
                         dtype_backend="numpy_nullable", on_bad_lines="skip")
    for column in sample.columns:
        if pd.api.types.is_string_dtype(sample[column]) and not pd.api.types.is_object_dtype(sample[column]):
            sample[column] = _refine_text_column(sample[column])
    return sample


def malformed_reason(line_number: int, fields: int, expected: int) -> str:
    return f"malformed CSV row: line {line_number} has {fields} fields, expected {expected}"


class CsvRecords:
    """Data records of CSV text (no header) as {column: str, or None for an empty field}.

    Iterating yields each well-formed row as a dict, and each malformed one as (row, record index,
    field count), the index counting every record of this text from 0 (blank lines included).
    `records` is the number of records read so far. Python's csv module handles quoted fields holding
    commas, quotes and newlines; the pipeline's slice reader and the sequential whole-file reader
    (`iter_csv_rows`) parse through this one class, so they always agree.
    """

    def __init__(self, text: io.TextIOBase, header: list[str]) -> None:
        self.text, self.header, self.records = text, header, 0

    def __iter__(self) -> Iterator[Union[dict[str, Any], tuple[dict[str, Any], int, int]]]:
        header = self.header
        for fields in csv.reader(self.text):
            index = self.records
            self.records += 1
            if not fields:
                continue  # blank line
            row = {name: (value if value != "" else None) for name, value in zip(header, fields)}
            if len(fields) != len(header):
                yield row, index, len(fields)
            else:
                yield row


def iter_csv_rows(path: str) -> Iterator[Union[dict[str, Any], tuple[dict[str, Any], str]]]:
    """Stream a whole CSV sequentially: data rows as dicts; malformed rows as (row, reason)."""
    with storage.open_read(path) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")
        header = next(csv.reader(text), None)
        if header is None:
            return
        for item in CsvRecords(text, header):
            if isinstance(item, tuple):
                row, index, fields = item
                yield row, malformed_reason(index + 2, fields, len(header))
            else:
                yield item


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


def open_csv_slice(path: str, start: int, end: int) -> io.TextIOBase:
    """The text of bytes [start, end) of a CSV (whole records, see tfrecorder.sources.csv_slicing)."""
    window = io.BufferedReader(_ByteWindow(path, start, end), buffer_size=SLICE_READ_BYTES)
    return io.TextIOWrapper(window, encoding="utf-8", newline="")


@dataclasses.dataclass(frozen=True)
class CsvRows:
    """A CSV file as workers read it: byte slices found by a parallel scan of byte ranges."""

    path: str
    size: int  # the file's size in bytes
    data_start: int  # byte offset of the first data record
    kind: str = "csv"

    def known_parts(self) -> Optional[list[csv_slicing.Slice]]:
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

    def read_part(self, part: csv_slicing.Slice, columns: Sequence[str], schema: Schema) -> Iterator[Any]:
        records = CsvRecords(open_csv_slice(self.path, part.start, part.end), list(columns))
        for item in records:
            yield (part.index, *item) if isinstance(item, tuple) else item
        yield RECORDS, (part.index, records.records)

    @property
    def reads_batches(self) -> bool:
        return True

    def read_batches(self, part: csv_slicing.Slice, columns: Sequence[str], schema: Schema,
                     batch_rows: int) -> Iterator[Any]:
        data = storage.read_range(self.path, part.start, part.end - part.start)  # a few MB (csv_slicing)
        batches = csv_bytes_batches(data, list(columns), batch_rows)
        for item in batches:
            yield (part.index, *item) if isinstance(item, tuple) else item
        yield RECORDS, (part.index, batches.records)


@dataclasses.dataclass
class CsvTable(Table):
    """A CSV file opened from its head."""

    rows: Optional[CsvRows] = None

    def worker_files(self) -> list[str]:
        return [self.rows.path]

    def row_source(self, schema: Schema, work_dir: str) -> CsvRows:
        return self.rows


def _read_head(path: str, size: int) -> bytes:
    """The file's first bytes: enough for the header and SAMPLE_ROWS records, at most SAMPLE_BYTES."""
    head, want = b"", HEAD_STEP_BYTES
    while len(head) < min(size, SAMPLE_BYTES):
        head += storage.read_range(path, len(head), min(want, SAMPLE_BYTES, size) - len(head))
        data_start = csv_slicing.header_end(head, len(head) >= size)
        if data_start is not None and csv_slicing.record_count(head, data_start) > SAMPLE_ROWS + 1:
            break
        want *= 2
    return head


def open_csv(path: str) -> CsvTable:
    """Header, sample and row estimate from the file's first bytes (see _read_head): nothing more is read."""
    size = storage.size(path)
    head = _read_head(path, size)
    complete = len(head) >= size
    data_start = csv_slicing.header_end(head, complete)
    if data_start is None:
        raise ValueError(f"CSV file {path}: the header row does not end within its first {SAMPLE_BYTES:,} bytes")
    header = next(csv.reader(io.StringIO(head[:data_start].decode("utf-8-sig"), newline="")), None)
    if not header:
        raise ValueError(f"CSV file {path} is empty (no header row)")
    sample_end = size if complete else csv_slicing.last_record_end(head, data_start)
    records = csv_slicing.record_count(head[:sample_end], data_start)
    estimate = records if complete else round(records * (size - data_start) / max(sample_end - data_start, 1))
    sample = read_csv_sample(io.BytesIO(head[:sample_end]))
    return CsvTable(header, sample, parent_dir(path), estimate, rows_estimated=True,
                    rows=CsvRows(path, size, data_start))
