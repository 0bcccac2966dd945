"""A staged DataFrame's table stats, counted by the driver as it stages the frame.

A DataFrame is in the driver's memory and the driver stages every row of it (dataframe_staging); the
whole-table facts the encoding waits for (rows, nullable columns, TRAIN found, TRAIN labels:
tfrecorder.rows.table_stats) are counted from the same chunks, column-wise, while they are written. The
job then has no count pass over the staged file (beam_pipelines.steps.count_table): that pass forked
its processes and read the file's split and label columns back, ~0.2 s of a million-row job before
any row was encoded. The count is the pass's own, chunk by chunk: `columnar_encoder.count_batch` on the
split, label and image columns as the pipeline reads them back (parquet_values.conform_batch), every
column when a row's split is a hash of the whole row; missing values from each staged column's nulls,
which the staged file's footer records as they are.
"""
from __future__ import annotations

from typing import Sequence

import pyarrow as pa

from tfrecorder.core.schema import Schema
from tfrecorder.rows import columnar_encoder
from tfrecorder.rows.table_stats import TableStats
from tfrecorder.sources.parquet_values import conform_batch


class StagedTableStats:
    """Counts staged chunks into `stats` (`restart` when the frame is staged again)."""

    def __init__(self, schema: Schema, split_ratios: Sequence[float], content_splits: bool = False) -> None:
        self.schema, self.split_ratios, self.content_splits = schema, split_ratios, content_splits
        self.needed = sorted(columnar_encoder.columns_counting_needs(schema))
        self.restart()

    def restart(self) -> None:
        self.stats = TableStats()

    def add(self, chunk: pa.Table) -> None:
        """Count one staged chunk (a table of the staged columns)."""
        stats, schema = self.stats, self.schema
        for column, values in zip(chunk.column_names, chunk.columns):
            if column in schema and values.null_count:
                stats.nullable.add(column)
        for batch in chunk.to_batches():
            counted = conform_batch(batch.select(self.needed), schema) if schema.split_column else None
            if counted is None or columnar_encoder.splits_whole_rows(counted, schema, self.content_splits):
                counted = conform_batch(batch, schema)
            columnar_encoder.count_batch(counted, schema, self.split_ratios, stats, self.content_splits)
