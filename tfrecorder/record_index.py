"""Record index sidecars: `index/<shard file>.index`, one `offset length` text line per record.

This is the index format NVIDIA DALI's TFRecord reader and the `tfrecord` PyPI package read: `offset`
is where a framed record starts in the shard, `length` its whole framed size (12-byte header + data +
4-byte footer). `tfrecorder.data_source` uses it for random access.

The index is derived from the bytes as they are written (`IndexingWriter` wraps the shard's output
stream and follows the record framing across arbitrary chunk boundaries), so no pass re-reads a shard
to index it. Gzip shards get no index: there is no random access into a gzip stream.
"""
from __future__ import annotations

import posixpath
import struct
from typing import BinaryIO, Iterable, Iterator

INDEX_DIR = "index"
INDEX_SUFFIX = ".index"
_HEADER = 12  # uint64 length + uint32 masked crc of the length
_FOOTER = 4  # uint32 masked crc of the data


def index_file_name(shard_file: str) -> str:
    """The index file of a shard, relative to the job directory: `index/train-00000-of-00004.tfrecord.index`."""
    return posixpath.join(INDEX_DIR, posixpath.basename(shard_file) + INDEX_SUFFIX)


class RecordIndexer:
    """Follows TFRecord framing through bytes fed in any chunking; collects (offset, length) per record.

    Only record headers are looked at (the 8 length bytes); record data is skipped over by counting.
    `finish()` raises ValueError if the bytes stopped in the middle of a record.
    """

    def __init__(self) -> None:
        self.entries: list[tuple[int, int]] = []
        self._position = 0  # bytes fed so far
        self._record_start = 0
        self._header = b""  # the part of the current header seen so far
        self._skip = 0  # data + footer bytes of the current record still to pass

    def feed(self, data: bytes) -> None:
        view = memoryview(data)
        while len(view):
            if self._skip:
                step = min(self._skip, len(view))
                self._skip -= step
                view = view[step:]
                self._position += step
                continue
            if not self._header:
                self._record_start = self._position
            need = _HEADER - len(self._header)
            self._header += bytes(view[:need])
            taken = min(need, len(view))
            view = view[taken:]
            self._position += taken
            if len(self._header) == _HEADER:
                (length,) = struct.unpack("<Q", self._header[:8])
                self.entries.append((self._record_start, _HEADER + length + _FOOTER))
                self._header = b""
                self._skip = length + _FOOTER

    def finish(self) -> list[tuple[int, int]]:
        if self._header or self._skip:
            raise ValueError(f"record stream ends inside the record starting at byte {self._record_start}")
        return self.entries


class IndexingWriter:
    """A write-only stream wrapper: passes bytes to `stream` and indexes the records in them."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.indexer = RecordIndexer()

    def write(self, data: bytes) -> int:
        self.indexer.feed(data)
        return self.stream.write(data)

    def entries(self) -> list[tuple[int, int]]:
        return self.indexer.finish()


def format_index(entries: Iterable[tuple[int, int]]) -> bytes:
    return "".join(f"{offset} {length}\n" for offset, length in entries).encode("ascii")


def parse_index(text: bytes) -> list[tuple[int, int]]:
    """Parse an index file; ValueError naming the line if one is not two non-negative integers."""
    entries = []
    for number, line in enumerate(text.decode("ascii").splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise ValueError(f"index line {number} is not 'offset length': {line!r}")
        entries.append((int(parts[0]), int(parts[1])))
    return entries


def scan_index(stream: BinaryIO) -> Iterator[tuple[int, int]]:
    """(offset, length) of each record of a seekable uncompressed shard, reading only the headers."""
    offset = 0
    while True:
        header = stream.read(_HEADER)
        if not header:
            return
        if len(header) < _HEADER:
            raise ValueError(f"truncated record header at byte offset {offset}")
        (length,) = struct.unpack("<Q", header[:8])
        yield offset, _HEADER + length + _FOOTER
        offset += _HEADER + length + _FOOTER
        stream.seek(offset)


def write_index(job_dir: str, shard_file: str, entries: Iterable[tuple[int, int]]) -> str:
    """Write a shard's index file under `job_dir`; returns its name relative to the job directory."""
    from tfrecorder import storage

    name = index_file_name(shard_file)
    storage.write_bytes(storage.join(job_dir, *name.split("/")), format_index(entries))
    return name
