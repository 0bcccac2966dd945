"""Annotation files as a conversion source: AutoML Vision CSVs and Vertex AI JSONL import files.

The driver reads a sample of the file to recognise its format (tfrecorder.sources.annotation_files);
the pipeline streams the whole file as one part, and a line that cannot be read becomes a discard
naming its line number. The format implies the schema (classification, multi-label, detection).
"""
from __future__ import annotations

import dataclasses
import itertools
import os
from typing import Any, Iterator, Optional, Sequence

import pandas as pd

from tfrecorder.core.schema import Schema
from tfrecorder.io import storage
from tfrecorder.sources import parquet_files
from tfrecorder.sources.annotation_files import FORMATS, columns_for, detect_format, iter_rows, schema_for, task_of
from tfrecorder.sources.source_protocol import REASONED, SAMPLE_ROWS, FileTable, OnePart, parent_dir


@dataclasses.dataclass(frozen=True)
class AnnotationRows(OnePart):
    """An annotation file as workers read it: the whole file is one part, streamed line by line."""

    path: str
    format: str  # one of annotation_files.FORMATS
    kind: str = "annotations"

    def read_part(self, part: int, columns: Sequence[str], schema: Schema) -> Iterator[Any]:
        for item in iter_rows(self.path, self.format):
            yield (REASONED, item) if isinstance(item, tuple) else item

    @property
    def reads_batches(self) -> bool:
        return False

    def read_batches(self, part: int, columns: Sequence[str], schema: Schema, batch_rows: int) -> Iterator[Any]:
        raise NotImplementedError("annotation files are read row by row")


@dataclasses.dataclass
class AnnotationTable(FileTable):
    """An annotation file opened from a sample of its lines (`rows`: its AnnotationRows)."""

    def default_schema(self) -> Optional[Schema]:
        return schema_for(task_of(self.rows.format, self.rows.path))

    def rows_for_driver_check(self) -> Iterator[dict[str, Any]]:
        """Streamed until the driver's check has seen a TRAIN row (the detection graph has no in-pipeline
        table check yet)."""
        yield from (row for row in iter_rows(self.rows.path, self.rows.format) if not isinstance(row, tuple))



def open_annotations(source: Any, annotation_format: Optional[str] = None) -> Optional[AnnotationTable]:
    """An AnnotationTable if `source` is an AutoML CSV or Vertex AI JSONL file (or the format is forced)."""
    if annotation_format is not None and annotation_format not in FORMATS:
        raise ValueError(f"annotation_format must be one of {FORMATS}, got {annotation_format!r}")
    if not isinstance(source, (str, os.PathLike)):
        if annotation_format is not None:
            raise ValueError("annotation_format applies to AutoML CSV and Vertex AI JSONL files, not to "
                             f"{type(source).__name__} sources")
        return None
    path = os.fspath(source)
    if (annotation_format is None and parquet_files.is_parquet_name(path)) or not storage.exists(path) \
            or storage.is_dir(path):  # exists() first: a gs:// folder is no object, and is_dir() would list it
        return None
    fmt = annotation_format or detect_format(path)
    if fmt is None:
        return None
    if not storage.is_remote(path):
        path = os.path.abspath(path)
    columns = columns_for(task_of(fmt, path))
    sample_rows = [r for r in itertools.islice(iter_rows(path, fmt), SAMPLE_ROWS) if not isinstance(r, tuple)]
    sample = pd.DataFrame(sample_rows, columns=columns)
    return AnnotationTable(columns, sample, parent_dir(path), len(sample_rows), rows=AnnotationRows(path, fmt))
