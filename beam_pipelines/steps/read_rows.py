"""Reading table rows into the pipeline as dicts keyed by column name, in parallel parts.

A source is cut into parts that workers read independently:
- a CSV into byte slices that hold whole records (tfrecorder.sources.csv_slicing: one parallel pass finds
  where records start, even when quoted fields hold newlines), each parsed with Python's csv module
  exactly as one sequential parse would (tables.CsvRecords);
- Parquet files (a user's, or a DataFrame staged by the driver as one file, tfrecorder.sources.dataframe_staging) into
  their row groups (tfrecorder.sources.parquet_parts.ParquetPart), each read as Arrow record batches.
Parts are small descriptors, reshuffled so that every worker gets some; rows are never materialised
between steps. gs:// files go through tfrecorder.io.storage, never through Beam's GCS filesystem (whose
credential lookup stalls when there are none).
"""
from __future__ import annotations

from typing import Any, Iterator, Mapping, Optional, Sequence, Union

import apache_beam as beam
from apache_beam.pvalue import AsDict, AsList

from tfrecorder.sources import csv_slicing
from tfrecorder.io import storage
from tfrecorder.sources.annotation_files import KIND_PREFIX, iter_rows as iter_annotation_rows
from beam_pipelines.job_config import JobConfig
from tfrecorder.sources.csv_columns import csv_bytes_batches
from tfrecorder.sources.parquet_parts import ParquetPart, read_row_group_batches
from tfrecorder.sources.parquet_values import conform_batch
from tfrecorder.sources.source_tables import CsvRecords, malformed_reason, open_csv_slice
from tfrecorder.core.types import ColumnType

BATCH_ROWS = 16_384  # rows per Arrow batch when a part is read column-wise
MALFORMED = "malformed"
RECORDS = "records"  # (slice index, records in it): numbers malformed lines once every slice is read
REASONED = "reasoned"  # (row, reason) of a bad annotation-file line, its line number already in the reason


class SourceParts:
    """The parts of the job's source (csv_slicing.Slice for a CSV, a ParquetPart for Parquet), as
    independent copies: one per branch of the graph that reads the rows.

    Each branch must start from its own root: Beam's in-process runner fuses a consumer with its
    producer only when nothing downstream of the producer feeds the consumer's side inputs, so an
    encoding branch sharing its root with the branch that computes the table stats would have its rows
    held back (materialised) until the stats are ready. The CSV range scans are computed once.
    """

    def __init__(self, pipeline: beam.Pipeline, config: JobConfig) -> None:
        self.pipeline, self.config = pipeline, config
        self.ranges = []
        if config.source_kind == "csv":
            self.ranges = csv_slicing.byte_ranges(config.source_data_start, config.source_size)
        self._scans = None

    def branch(self, label: str) -> beam.PCollection:
        config, root = self.config, self.pipeline
        if config.source_kind.startswith(KIND_PREFIX):  # an annotation file is read whole, as one part
            return root | f"{label}AnnotationFile" >> beam.Create([0])
        if config.source_kind == "parquet":  # Create reshuffles two or more elements itself
            return root | f"{label}RowGroups" >> beam.Create(list(config.source_parts))
        data_start, size = config.source_data_start, config.source_size
        if len(self.ranges) <= 1:
            return root | f"{label}Slices" >> beam.Create([csv_slicing.Slice(0, data_start, size)])
        return (
            root
            | f"{label}PlanSlices" >> beam.Create([None])
            | f"{label}Slices" >> beam.FlatMap(lambda _, found: csv_slicing.plan_slices(found, data_start, size),
                                               AsList(self._range_scans()))
            | f"{label}SpreadSlices" >> beam.Reshuffle()
        )

    def _range_scans(self) -> beam.PCollection:
        if self._scans is None:
            config = self.config
            self._scans = (
                self.pipeline
                | "ByteRanges" >> beam.Create(self.ranges)
                | "ScanRanges" >> beam.Map(scan_range, config.source_path, config.source_data_start, config.source_size)
            )
        return self._scans


def scan_range(byte_range: csv_slicing.ByteRange, path: str, data_start: int, size: int) -> csv_slicing.RangeScan:
    return csv_slicing.read_scan(lambda offset, length: storage.read_range(path, offset, length), byte_range,
                               data_start, size)


def read_part(config: JobConfig, part: Union[ParquetPart, csv_slicing.Slice, int]) -> Iterator[Any]:
    """Rows of one part; for a CSV slice, also (index, row, record, fields) for each malformed line, and
    finally (RECORDS, (index, record count)); for an annotation file, (REASONED, (row, reason)) for each
    bad line."""
    if config.source_kind == "parquet":
        yield from iter_row_group(part, config.schema, config.columns)
        return
    if config.source_kind.startswith(KIND_PREFIX):
        for item in iter_annotation_rows(config.source_path, config.source_kind[len(KIND_PREFIX):]):
            yield (REASONED, item) if isinstance(item, tuple) else item
        return
    records = CsvRecords(open_csv_slice(config.source_path, part.start, part.end), list(config.columns))
    for item in records:
        yield (part.index, *item) if isinstance(item, tuple) else item
    yield RECORDS, (part.index, records.records)


def iter_row_group(part: ParquetPart, schema: Mapping[str, ColumnType] = {},
                   columns: Optional[Sequence[str]] = None) -> Iterator[dict[str, Any]]:
    """Rows of one row group as {column: python value} (every column, or `columns`), missing values as
    None; `schema` maps column → role (JobConfig's Schema)."""
    for batch in read_row_group_batches(part, columns=list(columns) if columns else None):
        yield from rows_of_batch(batch, schema)


def rows_of_batch(batch: "pyarrow.RecordBatch", schema: Mapping[str, ColumnType] = {}) -> list[dict[str, Any]]:
    """A Parquet record batch as row dicts holding the python values a staged DataFrame's rows hold
    (tfrecorder.sources.parquet_values.conform_batch: the columnar reader conforms its batches the same way)."""
    return conform_batch(batch, schema).to_pylist()


class _ReadPart(beam.DoFn):
    def __init__(self, config: JobConfig, batch_rows: Optional[int]) -> None:
        self.config, self.batch_rows = config, batch_rows

    def process(self, part):
        batch: list[dict[str, Any]] = []
        for item in read_part(self.config, part):
            if isinstance(item, dict):
                if self.batch_rows is None:
                    yield item
                    continue
                batch.append(item)
                if len(batch) == self.batch_rows:
                    yield batch
                    batch = []
            elif item[0] == RECORDS:
                yield beam.pvalue.TaggedOutput(RECORDS, item[1])
            elif item[0] == REASONED:
                yield beam.pvalue.TaggedOutput(REASONED, item[1])
            else:
                yield beam.pvalue.TaggedOutput(MALFORMED, item)
        if batch:
            yield batch


def number_malformed(item: tuple, records: dict[int, int], expected: int) -> tuple[dict[str, Any], str]:
    """(slice index, row, record in slice, fields) → (row, reason) with the line number in the file."""
    index, row, record, fields = item
    line = 2 + record + sum(count for i, count in records.items() if i < index)  # line 1 is the header
    return row, malformed_reason(line, fields, expected)


class ReadRows(beam.PTransform):
    """Rows of the parts as dicts — or, with `batch_rows`, as lists of up to that many rows of one part,
    so that Beam's per-element cost is paid per batch from the start; the second output carries
    (row, reason) for unparseable CSV lines."""

    def __init__(self, config: JobConfig, batch_rows: Optional[int] = None) -> None:
        super().__init__()
        self.config, self.batch_rows = config, batch_rows

    def expand(self, parts):
        results = parts | "ReadParts" >> beam.ParDo(_ReadPart(self.config, self.batch_rows)).with_outputs(
            MALFORMED, RECORDS, REASONED, main="rows")
        numbered = results[MALFORMED] | "NumberLines" >> beam.Map(
            number_malformed, AsDict(results[RECORDS]), len(self.config.columns))
        if not self.config.source_kind.startswith(KIND_PREFIX):
            return results.rows, numbered
        return results.rows, (numbered, results[REASONED]) | "AllMalformed" >> beam.Flatten()


def reads_batches(config: JobConfig) -> bool:
    """Whether the job's source reads as Arrow batches: a CSV, Parquet files or a staged DataFrame (not
    an annotation file)."""
    return config.source_kind in ("csv", "parquet")


def read_batches(config: JobConfig, part: Any) -> Iterator[Any]:
    """Arrow batches of one part; for a CSV slice also (index, row, record, fields) per malformed line
    and finally (RECORDS, (index, record count)), as read_rows.read_part."""
    if config.source_kind == "parquet":
        for batch in read_row_group_batches(part, columns=list(config.columns), batch_size=BATCH_ROWS):
            yield conform_batch(batch, config.schema)
        return
    data = storage.read_range(config.source_path, part.start, part.end - part.start)  # a few MB (csv_split)
    batches = csv_bytes_batches(data, list(config.columns), BATCH_ROWS)
    for item in batches:
        yield (part.index, *item) if isinstance(item, tuple) else item
    yield RECORDS, (part.index, batches.records)
