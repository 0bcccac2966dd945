"""The unit of parallel Parquet reading: one row group of one file (local or gs://).

A DataFrame staged by the driver is one Parquet file (tfrecorder.staging); a Parquet source is one
or more files. Either way the pipeline reads `ParquetPart`s, each on its own worker: small, plain
descriptors that Beam ships to remote workers and Dataflow embeds in the job.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, order=True)
class ParquetPart:
    path: str  # local path or gs:// URL of the Parquet file
    row_group: int  # index of the row group inside that file


def file_parts(path: str, row_groups: int) -> tuple[ParquetPart, ...]:
    """Every row group of one file, in order."""
    return tuple(ParquetPart(path, index) for index in range(row_groups))
