"""Open a conversion source (DataFrame, CSV path, or SPLIT/LABEL/image folder) as a `Table`.

The driver only samples a CSV for schema inference and scans it in chunks for table-level checks;
the pipeline itself streams the file. Image folders are listed into a small DataFrame of
split,image_uri,label rows.
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

from tfrecorder import storage

logger = logging.getLogger("tfrecorder")

SAMPLE_ROWS = 10_000
SCAN_CHUNK_ROWS = 50_000  # DataFrame rows converted to dicts at a time by the driver scan
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp")


@dataclasses.dataclass
class Table:
    kind: str  # "dataframe" or "csv"
    columns: list[str]
    sample: pd.DataFrame  # rows with pandas' dtype inference, for schema inference
    base_dir: str  # relative image paths are resolved against this
    frame: Optional[pd.DataFrame] = None
    csv_path: Optional[str] = None

    def iter_rows(self) -> Iterator[dict[str, Any]]:
        """Every well-formed row as {column: value}, missing values as None: what the pipeline sees."""
        if self.frame is None:
            yield from (row for row in iter_csv_rows(self.csv_path) if not isinstance(row, tuple))
            return
        for start in range(0, len(self.frame), SCAN_CHUNK_ROWS):
            chunk = self.frame.iloc[start : start + SCAN_CHUNK_ROWS]
            yield from chunk.astype(object).where(chunk.notna(), None).to_dict("records")


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


def iter_csv_rows(path: str) -> Iterator[Union[dict[str, Any], tuple[dict[str, Any], str]]]:
    """Stream a CSV's data rows as {column: str, or None for an empty field}; malformed rows as (row, reason).

    Python's csv module handles quoted fields holding commas, quotes and newlines; the driver's checks
    and the pipeline both read rows through this one function, so they always agree.
    """
    with storage.open_read(path) as raw:
        reader = csv.reader(io.TextIOWrapper(raw, encoding="utf-8-sig", newline=""))
        header = next(reader, None)
        if header is None:
            return
        for line_number, fields in enumerate(reader, start=2):
            if not fields:
                continue  # blank line
            row = {name: (value if value != "" else None) for name, value in zip(header, fields)}
            if len(fields) != len(header):
                yield row, f"malformed CSV row: line {line_number} has {len(fields)} fields, expected {len(header)}"
            else:
                yield row


def _csv_header(path: str) -> list[str]:
    with storage.open_read(path) as raw:
        header = next(csv.reader(io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")), None)
    if not header:
        raise ValueError(f"CSV file {path} is empty (no header row)")
    return header


def _parent(path: str) -> str:
    if storage.is_remote(path):
        return posixpath.dirname(path.rstrip("/"))
    return os.path.dirname(os.path.abspath(path))


def list_image_directory(root: str) -> pd.DataFrame:
    """Rows split,image_uri,label for every image file at ROOT/SPLIT/LABEL/file."""
    root = root.rstrip("/") if storage.is_remote(root) else os.path.abspath(root)
    rows, skipped = [], 0
    for path in storage.list_files(root):
        parts = path[len(root):].strip("/").split("/")
        if len(parts) == 3 and not any(p.startswith(".") for p in parts):
            rows.append({"split": parts[0], "image_uri": path, "label": parts[1]})
        else:
            skipped += 1
    if skipped:
        logger.warning("ignored %d file(s) not laid out as SPLIT/LABEL/FILE under %s", skipped, root)
    if not rows:
        raise ValueError(f"image directory {root} holds no files laid out as SPLIT/LABEL/image")
    return pd.DataFrame(rows, columns=["split", "image_uri", "label"])


def open_table(source: Union[pd.DataFrame, str, os.PathLike]) -> Table:
    """Recognise the source and return a Table; raise ValueError for anything unusable."""
    if isinstance(source, pd.DataFrame):
        columns = [str(c) for c in source.columns]
        return Table("dataframe", columns, source.head(SAMPLE_ROWS), os.getcwd(), frame=source)
    if not isinstance(source, (str, os.PathLike)):
        raise ValueError(f"source must be a DataFrame, a CSV path or an image directory, not {type(source).__name__}")
    path = os.fspath(source)
    if storage.is_dir(path):
        frame = list_image_directory(path)
        return Table("dataframe", list(frame.columns), frame.head(SAMPLE_ROWS), "", frame=frame)
    if not storage.exists(path):
        raise ValueError(f"source {path} does not exist")
    header = _csv_header(path)
    with storage.open_read(path) as stream:
        sample = read_csv_sample(stream)
    return Table("csv", header, sample, _parent(path), csv_path=path)
