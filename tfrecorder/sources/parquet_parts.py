"""The unit of parallel Parquet reading: one row group of one file (local or gs://).

A DataFrame staged by the driver is one Parquet file (tfrecorder.sources.dataframe_staging); a Parquet source is one
or more files. Either way the pipeline reads `ParquetPart`s, each on its own worker: small, plain
descriptors that Beam ships to remote workers and Dataflow embeds in the job.
"""
from __future__ import annotations

import dataclasses
from typing import Iterator, Optional, Sequence

from tfrecorder.io import storage

BATCH_ROWS = 10_000  # rows per Arrow record batch read from a row group (bounds memory per reader)


@dataclasses.dataclass(frozen=True, order=True)
class ParquetPart:
    path: str  # local path or gs:// URL of the Parquet file
    row_group: int  # index of the row group inside that file


def file_parts(path: str, row_groups: int) -> tuple[ParquetPart, ...]:
    """Every row group of one file, in order."""
    return tuple(ParquetPart(path, index) for index in range(row_groups))


def read_row_group_batches(part: ParquetPart, columns: Optional[Sequence[str]] = None,
                           batch_size: Optional[int] = None) -> Iterator["pyarrow.RecordBatch"]:
    """One row group of a Parquet file (local or gs://, through tfrecorder.io.storage, never Beam's or
    TensorFlow's file systems) as Arrow record batches of at most `batch_size` rows (default
    BATCH_ROWS), with every column or only `columns`."""
    import pyarrow.parquet as pq

    with storage.open_read(part.path) as raw:
        yield from pq.ParquetFile(raw).iter_batches(row_groups=[part.row_group], columns=columns,
                                                    batch_size=batch_size or BATCH_ROWS)
