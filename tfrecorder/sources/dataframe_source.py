"""A pandas DataFrame as a conversion source: checked in the driver, staged as an Arrow file for the workers.

A DataFrame is in memory, so its schema is inferred from every row and its table-level errors are
raised before any pipeline starts (`rows_for_driver_check`). Workers cannot see the driver's memory:
the frame is staged as typed row groups of an Arrow file under the job's scratch directory
(dataframe_staging) and read back one row group a part (staged_rows); its table stats are counted as
it is staged (staged_stats).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Iterator, Optional, Sequence

import pandas as pd

from tfrecorder.core.schema import Schema, infer_schema
from tfrecorder.io import storage
from tfrecorder.sources import dataframe_staging
from tfrecorder.sources.source_protocol import SAMPLE_ROWS, Table
from tfrecorder.sources.staged_rows import StagedRows, staged_parts
from tfrecorder.sources.staged_stats import StagedTableStats

SCAN_CHUNK_ROWS = 50_000  # DataFrame rows converted to dicts at a time by the driver scan
STAGED_FILE = "rows.arrow"  # under the job's scratch directory


@dataclasses.dataclass
class DataFrameTable(Table):
    """A DataFrame, held by the driver until it is staged."""

    frame: Optional[pd.DataFrame] = None
    staged: Optional[dataframe_staging.StagedFrame] = None  # staged before the job has a directory (`stage`)

    def infer_schema(self) -> Schema:
        return infer_schema(self.frame)

    def rows_for_driver_check(self) -> Iterator[dict[str, Any]]:
        """Every row as {column: value}, missing values as None: what the pipeline sees. Small chunks
        first: the driver's check stops at the first TRAIN row."""
        start, step = 0, 1000
        while start < len(self.frame):
            chunk = self.frame.iloc[start : start + step]
            yield from chunk.astype(object).where(chunk.notna(), None).to_dict("records")
            start, step = start + step, min(step * 4, SCAN_CHUNK_ROWS)

    def stage(self, schema: Schema, output_dir: str, split_ratios: Optional[Sequence[float]] = None,
              content_splits: bool = False) -> dataframe_staging.StagedFrame:
        """Stage the frame before its job has a directory, beside a local `output_dir` (for a remote one in
        a local temporary directory): the job's fingerprint names the frame by the staged file's digest.
        With the job's `split_ratios`, its table stats are counted as it is staged (staged_stats): the
        pipeline then does not count the staged file again."""
        counts = None if split_ratios is None else StagedTableStats(schema, split_ratios, content_splits)
        self.staged = dataframe_staging.stage_scratch(self.frame, schema, output_dir, counts)
        return self.staged

    def row_source(self, schema: Schema, work_dir: str) -> StagedRows:
        """The staged file under `work_dir`: the one `stage` wrote, moved there, or staged now."""
        path = storage.join(work_dir, STAGED_FILE)
        staged, self.staged = self.staged, None
        if staged is not None and staged.schema == schema:
            staged.move_to(path)
            return StagedRows(staged_parts(path, staged.row_groups), table_stats=staged.table_stats)
        if staged is not None:
            staged.discard()
        row_groups = dataframe_staging.stage_frame(self.frame, schema, path)
        return StagedRows(staged_parts(path, row_groups))


def frame_table(frame: pd.DataFrame, base_dir: str) -> DataFrameTable:
    """A DataFrame as a Table whose relative image paths resolve against `base_dir`."""
    columns = [str(c) for c in frame.columns]
    return DataFrameTable(columns, frame.head(SAMPLE_ROWS), base_dir, len(frame), frame=frame)


def open_dataframe(frame: pd.DataFrame) -> DataFrameTable:
    """A caller's DataFrame: relative image paths resolve against the working directory."""
    return frame_table(frame, os.getcwd())
