"""Open a conversion source (DataFrame, CSV path, Parquet files, or SPLIT/LABEL/image folder) as a `Table`.

The driver reads at most the first SAMPLE_BYTES of a CSV (header, sample for schema inference, row
estimate), and only the footers and first rows of Parquet files (tfrecorder.sources.parquet_files); the
pipeline reads the whole source in parallel parts and computes every whole-table fact.
Image folders are listed (once) into a small DataFrame of split,image_uri,label rows.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import logging
import os
import posixpath
import re
from typing import Any, Iterator, Optional, Union

import pandas as pd

from tfrecorder.sources import csv_slicing

from tfrecorder.sources import parquet_files
from tfrecorder.io import storage

logger = logging.getLogger("tfrecorder")

SAMPLE_ROWS = 10_000
SAMPLE_BYTES = 32 * 1024 * 1024  # the most of a CSV the driver reads (header, sample, row estimate)
HEAD_STEP_BYTES = 1024 * 1024  # the driver reads a CSV's head in growing steps until it holds the sample
SCAN_CHUNK_ROWS = 50_000  # DataFrame rows converted to dicts at a time by the driver scan


@dataclasses.dataclass
class Table:
    kind: str  # "dataframe", "csv" or "parquet"
    columns: list[str]
    sample: pd.DataFrame  # rows with pandas' dtype inference, for schema inference
    base_dir: str  # relative image paths are resolved against this
    rows_estimate: int  # exact for a DataFrame and Parquet; for a CSV, from the records of its first SAMPLE_BYTES
    frame: Optional[pd.DataFrame] = None
    csv_path: Optional[str] = None
    csv_data_start: int = 0  # byte offset of the CSV's first data record
    csv_size: int = 0
    parquet: Optional[parquet_files.ParquetSource] = None  # Parquet files: their parts and Arrow schema

    def iter_rows(self) -> Iterator[dict[str, Any]]:
        """Every row of the DataFrame as {column: value}, missing values as None: what the pipeline sees."""
        start, step = 0, 1000  # small first: the driver's check stops at the first TRAIN row
        while start < len(self.frame):
            chunk = self.frame.iloc[start : start + step]
            yield from chunk.astype(object).where(chunk.notna(), None).to_dict("records")
            start, step = start + step, min(step * 4, SCAN_CHUNK_ROWS)


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


SLICE_READ_BYTES = 4 * 1024 * 1024  # one ranged read per this much of a CSV slice


def open_csv_slice(path: str, start: int, end: int) -> io.TextIOBase:
    """The text of bytes [start, end) of a CSV (whole records, see tfrecorder.sources.csv_slicing)."""
    window = io.BufferedReader(_ByteWindow(path, start, end), buffer_size=SLICE_READ_BYTES)
    return io.TextIOWrapper(window, encoding="utf-8", newline="")


def parent_dir(path: str) -> str:
    """The directory a table file sits in (absolute when local): where its relative image URIs are resolved."""
    if storage.is_remote(path):
        return posixpath.dirname(path.rstrip("/"))
    return os.path.dirname(os.path.abspath(path))


def list_image_directory(root: str, files: Optional[list[str]] = None) -> pd.DataFrame:
    """Rows split,image_uri,label for every image file at ROOT/SPLIT/LABEL/file (`files`: the listing
    of root, when the caller already has it)."""
    root = root.rstrip("/") if storage.is_remote(root) else os.path.abspath(root)
    rows, skipped = [], 0
    for path in files if files is not None else storage.list_files(root):
        parts = path[len(root):].strip("/").split("/")
        if len(parts) == 3 and not any(p.startswith(".") for p in parts):
            rows.append({"split": parts[0], "image_uri": path, "label": parts[1]})
        else:
            skipped += 1
    if skipped:
        logger.warning("ignored %d file(s) not laid out as SPLIT/LABEL/FILE under %s", skipped, root)
    if not rows:
        raise ValueError(f"directory {root} holds no Parquet files and no images laid out as SPLIT/LABEL/image")
    return pd.DataFrame(rows, columns=["split", "image_uri", "label"])


def open_table(source: Union[pd.DataFrame, str, os.PathLike]) -> Table:
    """Recognise the source and return a Table; raise ValueError for anything unusable."""
    if isinstance(source, pd.DataFrame):
        columns = [str(c) for c in source.columns]
        return Table("dataframe", columns, source.head(SAMPLE_ROWS), os.getcwd(), len(source), frame=source)
    if not isinstance(source, (str, os.PathLike)):
        raise ValueError(f"source must be a DataFrame, a CSV or Parquet path or an image directory, "
                         f"not {type(source).__name__}")
    path = os.fspath(source)
    if storage.is_remote(path):  # one listing tells a folder (of Parquet files or images) from a missing object
        listed = None if storage.exists(path.rstrip("/")) else storage.list_files(path)
        if listed is not None and parquet_files.is_glob(path):
            return _open_parquet(path)
        if listed:
            return _open_directory(path, listed)
        if listed is not None:
            raise ValueError(f"source {path} does not exist")
    elif os.path.isdir(path):
        return _open_directory(os.path.abspath(path), storage.list_files(os.path.abspath(path)))
    elif not os.path.exists(path):
        if parquet_files.is_glob(path):
            return _open_parquet(path)
        raise ValueError(f"source {path} does not exist")
    return _open_parquet(path) if parquet_files.is_parquet_name(path) else _open_csv(path)


def _open_directory(path: str, listed: list[str]) -> Table:
    """A directory (its absolute path or URL, and every file under it) holding Parquet files is a
    Parquet source; otherwise a SPLIT/LABEL image folder."""
    if parquet_files.parquet_files_in(path.rstrip("/"), listed):
        return _open_parquet(path, listed)
    return _image_table(list_image_directory(path, listed))


def _open_parquet(path: str, listed: Optional[list[str]] = None) -> Table:
    """Footers (schema, row groups, exact row count) and the first SAMPLE_ROWS rows: nothing more is read."""
    source = parquet_files.open_parquet_source(path, listed)
    sample = parquet_files.read_sample(source, SAMPLE_ROWS)
    return Table("parquet", list(source.schema.names), sample, source.base_dir, source.rows, parquet=source)


def _image_table(frame: pd.DataFrame) -> Table:
    return Table("dataframe", list(frame.columns), frame.head(SAMPLE_ROWS), "", len(frame), frame=frame)


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


def _open_csv(path: str) -> Table:
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
    return Table("csv", header, sample, parent_dir(path), estimate, csv_path=path, csv_data_start=data_start,
                 csv_size=size)
