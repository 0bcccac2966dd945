"""Parquet files as a conversion source: one file, a directory of them or a glob, read by row groups.

The driver reads the files' footers (schema, row groups, exact row count; tfrecorder.sources.
parquet_files) and the first SAMPLE_ROWS rows; each row group is one part of the pipeline, read as
Arrow batches conformed to the types a staged DataFrame holds (parquet_values). A DataFrame is staged
as an Arrow file whose record batches are read as row groups are (staged_rows).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterator, Mapping, Optional, Sequence

from tfrecorder.core.schema import Schema, infer_arrow_schema
from tfrecorder.core.types import ColumnType
from tfrecorder.rows.table_stats import TableStats
from tfrecorder.sources import parquet_files
from tfrecorder.sources.parquet_parts import ParquetPart, read_row_group_batches, row_group_nulls
from tfrecorder.sources.parquet_values import conform_batch
from tfrecorder.sources.source_protocol import SAMPLE_ROWS, Table


def rows_of_batch(batch: "pyarrow.RecordBatch", schema: Mapping[str, ColumnType] = {}) -> list[dict[str, Any]]:
    """A Parquet record batch as row dicts holding the python values a staged DataFrame's rows hold
    (tfrecorder.sources.parquet_values.conform_batch: the columnar reader conforms its batches the same way)."""
    return conform_batch(batch, schema).to_pylist()


@dataclasses.dataclass(frozen=True)
class ParquetRows:
    """Parquet files as workers read them: each non-empty row group is a part. `table_stats`: a staged
    DataFrame's, counted as it was staged (staged_stats); the pipeline then does not count the file."""

    parts: tuple[ParquetPart, ...]
    kind: str = "parquet"
    table_stats: Optional[TableStats] = dataclasses.field(default=None, compare=False)  # (sets: not hashable)

    def known_parts(self) -> list[ParquetPart]:
        return list(self.parts)

    def scan_units(self) -> list:
        return []

    def scan(self, unit: Any) -> Any:
        raise NotImplementedError("Parquet parts are known from the footers: nothing to scan")

    def plan_parts(self, scans: Sequence[Any]) -> list[ParquetPart]:
        return list(self.parts)

    def read_part(self, part: ParquetPart, columns: Sequence[str], schema: Schema) -> Iterator[dict[str, Any]]:
        """Rows of one row group as {column: python value}, missing values as None."""
        for batch in self.row_group_batches(part, list(columns) if columns else None):
            yield from rows_of_batch(batch, schema)

    def row_group_batches(self, part: ParquetPart, columns: Optional[list[str]],
                          batch_rows: Optional[int] = None) -> Iterator[Any]:
        """The part's Arrow record batches as stored (every column, or only `columns`)."""
        return read_row_group_batches(part, columns=columns, batch_size=batch_rows)

    @property
    def reads_batches(self) -> bool:
        return True

    def read_batches(self, part: ParquetPart, columns: Sequence[str], schema: Schema,
                     batch_rows: int) -> Iterator[Any]:
        for batch in self.row_group_batches(part, list(columns), batch_rows):
            yield conform_batch(batch, schema)

    def null_facts(self, part: ParquetPart, columns: Sequence[str]) -> dict[str, bool]:
        """Whether each of `columns` the part's footer settles holds a missing value (parquet_parts.row_group_nulls):
        the count pass then reads only the columns it needs besides."""
        return row_group_nulls(part, columns)


@dataclasses.dataclass
class ParquetTable(Table):
    """Parquet files opened from their footers and first rows."""

    files: Optional[parquet_files.ParquetFiles] = None

    def infer_schema(self) -> Schema:
        return infer_arrow_schema(self.files.schema, self.sample)

    def worker_files(self) -> list[str]:
        return list(self.files.files)

    def row_source(self, schema: Schema, work_dir: str) -> ParquetRows:
        return ParquetRows(self.files.parts)


def open_parquet(path: str, listed: Optional[list[str]] = None) -> ParquetTable:
    """Footers (schema, row groups, exact row count) and the first SAMPLE_ROWS rows: nothing more is read."""
    files = parquet_files.open_parquet_files(path, listed)
    sample = parquet_files.read_sample(files, SAMPLE_ROWS)
    return ParquetTable(list(files.schema.names), sample, files.base_dir, files.rows, files=files)
