"""gzip-compressed CSV files (`.csv.gz`, recognised by their first bytes) as a conversion source.

A gzip stream cannot be entered in the middle, so a file is one part, decompressed as it streams (never
whole in memory) and parsed by the CSV source's own readers: exactly the rows, discards and reasons of
the uncompressed file. Compressed data that ends early or is corrupt ends the part with one discard
naming the last line read, instead of failing the job. The driver decompresses only the head (header,
sample) and estimates rows from how much of the compressed file that head took.
"""
from __future__ import annotations

import dataclasses
import gzip
import zlib
from typing import Any, Iterator, Optional, Sequence

from tfrecorder.core.schema import Schema
from tfrecorder.io import storage
from tfrecorder.sources import csv_source, csv_text
from tfrecorder.sources.source_protocol import FileTable, OnePart, parent_dir

GZIP_MAGIC = b"\x1f\x8b"
DAMAGED = (EOFError, gzip.BadGzipFile, zlib.error)  # what gzip raises for compressed data that ends early or is corrupt


def is_gzip(path: str) -> bool:
    """Whether the file starts with gzip's magic bytes (whatever its name)."""
    return storage.read_range(path, 0, len(GZIP_MAGIC)) == GZIP_MAGIC


@dataclasses.dataclass(frozen=True)
class GzipCsvRows(OnePart):
    """A gzip-compressed CSV as workers read it: the whole file as one part (part 0), streamed."""

    path: str
    encoding: str = csv_text.DEFAULT_ENCODING  # a codec name checked by conversion_options
    record_bytes: int = 0  # mean decompressed bytes per record of the driver's sample (csv_source.batches_pay)
    kind: str = "gzip csv"

    def read_part(self, part: int, columns: Sequence[str], schema: Schema) -> Iterator[Any]:
        return self._items(part, columns, None)

    @property
    def reads_batches(self) -> bool:
        return csv_source.batches_pay(self.record_bytes)

    def read_batches(self, part: int, columns: Sequence[str], schema: Schema, batch_rows: int) -> Iterator[Any]:
        return self._items(part, columns, batch_rows)

    def _items(self, part: int, columns: Sequence[str], batch_rows: Optional[int]) -> Iterator[Any]:
        """The CSV source's items of the decompressed stream (damaged data ends them with one discard)."""
        with storage.open_read(self.path) as raw, gzip.GzipFile(fileobj=raw, mode="rb") as unzipped:
            text = csv_source.open_text(unzipped, self.encoding)
            yield from csv_source.part_items(csv_source.stream_records(text, columns, self.encoding, batch_rows),
                                             part, DAMAGED)


@dataclasses.dataclass
class GzipCsvTable(FileTable):
    """A gzip-compressed CSV file opened from its decompressed head (`rows`: its GzipCsvRows)."""


def open_gzip_csv(path: str, encoding: str = csv_text.DEFAULT_ENCODING) -> GzipCsvTable:
    """Header, sample and row estimate from the decompressed head (at most csv_source.SAMPLE_BYTES of it)."""
    with storage.open_read(path) as raw, gzip.GzipFile(fileobj=raw, mode="rb") as unzipped:
        try:
            head, complete = csv_source.read_head(lambda offset, length: unzipped.read(length), encoding)
        except DAMAGED as exc:
            raise ValueError(f"gzip file {path} cannot be decompressed: {exc}") from None
        compressed_read = raw.tell()  # within gzip's read buffer of where the head ends
    opened = csv_source.open_head(head, complete, encoding, path)
    decompressed_size = round(len(head) * storage.size(path) / max(compressed_read, 1))
    return GzipCsvTable(opened.header, opened.sample, parent_dir(path), opened.estimate(decompressed_size),
                        rows_estimated=True, rows=GzipCsvRows(path, encoding, opened.record_bytes))
