"""Record index sidecars: `index/<shard file>.index`, one `offset length` text line per record.

This is the index format NVIDIA DALI's TFRecord reader and the `tfrecord` PyPI package read: `offset`
is where a framed record starts in the shard, `length` its whole framed size (12-byte header + data +
4-byte footer). `tfrecorder.data_source` uses it for random access.

The index is derived from the bytes as they are written (`IndexingWriter` wraps the shard's output
stream and follows the record framing across arbitrary chunk boundaries) and streamed to the index
file, so no pass re-reads a shard's data to index it and nothing accumulates per record. (A shard that
is one piece renamed into place was never copied: `ShardIndexWriter.scan` reads its record headers
only, seeking over the data.) Gzip shards get no index: there is no random access into a gzip stream.
"""
from __future__ import annotations

import itertools
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
    """Follows TFRecord framing through bytes fed in any chunking; `feed` returns the (offset, length)
    of each record whose header it completed, so nothing accumulates per record.

    Only record headers are looked at (the 8 length bytes); record data is skipped over by counting.
    `finish()` raises ValueError if the bytes stopped in the middle of a record.
    """

    def __init__(self) -> None:
        self.records = 0
        self._position = 0  # bytes fed so far
        self._record_start = 0
        self._header = b""  # the part of the current header seen so far
        self._skip = 0  # data + footer bytes of the current record still to pass

    def feed(self, data: bytes) -> list[tuple[int, int]]:
        found = []
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
            taken = min(_HEADER - len(self._header), len(view))
            self._header += bytes(view[:taken])
            view = view[taken:]
            self._position += taken
            if len(self._header) == _HEADER:
                (length,) = struct.unpack("<Q", self._header[:8])
                found.append((self._record_start, _HEADER + length + _FOOTER))
                self._header = b""
                self._skip = length + _FOOTER
        self.records += len(found)
        return found

    def finish(self) -> None:
        if self._header or self._skip:
            raise ValueError(f"record stream ends inside the record starting at byte {self._record_start}")


class IndexingWriter:
    """A write-only stream wrapper: passes bytes on to `stream` and the index lines of the records in
    them to `index_stream`, as they go."""

    def __init__(self, stream: BinaryIO, index_stream: BinaryIO) -> None:
        self.stream = stream
        self.index_stream = index_stream
        self.indexer = RecordIndexer()

    def write(self, data: bytes) -> int:
        found = self.indexer.feed(data)
        if found:
            self.index_stream.write(format_index(found))
        return self.stream.write(data)


class ShardIndexWriter:
    """Writes `index/<shard file>.index` of one shard of `job_dir`: from the shard's bytes as they are
    written (`wrap` its output stream), or from a finished shard's record headers (`scan`).
    `close()` checks the bytes ended on a record boundary; `name` is the file's path in the job."""

    def __init__(self, job_dir: str, shard_file: str) -> None:
        from tfrecorder import storage

        self.name = index_file_name(shard_file)
        self._out = storage.open_write(storage.join(job_dir, *self.name.split("/")))
        self._writer: IndexingWriter | None = None

    def wrap(self, stream: BinaryIO) -> IndexingWriter:
        self._writer = IndexingWriter(stream, self._out)
        return self._writer

    def scan(self, shard: BinaryIO) -> None:
        self.extend(scan_index(shard))

    def extend(self, entries: Iterable[tuple[int, int]]) -> None:
        """Append entries known without reading the shard (e.g. `entries_from_ends` of piece offsets)."""
        entries = iter(entries)
        while block := list(itertools.islice(entries, 4096)):
            self._out.write(format_index(block))

    def close(self) -> None:
        if self._writer is not None:
            self._writer.indexer.finish()
        self._out.close()


def entries_from_ends(ends: Iterable[int], start: int, shard_offset: int) -> Iterator[tuple[int, int]]:
    """(offset, length) in the shard of consecutive records of a piece, from their end offsets in the piece.

    `start` is the piece offset where the first of them begins, `shard_offset` where that byte lands in
    the shard. For writers that record each record's end as they write a piece: the index of a shard
    assembled from piece ranges then needs no read of record bytes at all.
    """
    previous = start
    for end in ends:
        yield shard_offset + previous - start, end - previous
        previous = end


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


def index_array(text: bytes) -> "numpy.ndarray":
    """An index file as an int64 array [records, 2] of (offset, length): 16 bytes a record in memory."""
    import numpy as np

    try:
        values = np.array(text.split(), dtype=np.int64)
    except ValueError:
        values = None
    if values is None or values.size % 2 or (values < 0).any():
        parse_index(text)  # names the first bad line
        raise ValueError("index file is not 'offset length' lines")
    return values.reshape(-1, 2)


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

