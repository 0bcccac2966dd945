"""Record index sidecars: `index/<shard file>.index`, one `offset length` text line per record.

This is the index format NVIDIA DALI's TFRecord reader and the `tfrecord` PyPI package read: `offset`
is where a framed record starts in the shard, `length` its whole framed size (12-byte header + data +
4-byte footer). `tfrecorder.data_source` uses it for random access.

Shard assembly knows every record's place without reading record bytes: pieces carry an offsets
sidecar (each record's end offset), and `entries_from_ends` turns a range of those into the shard's
index lines, which `write_index` streams to the file (nothing accumulates per record). `scan_index`
indexes an existing shard from its record headers (readers' fallback for shards without an index).
Gzip shards get no index: there is no random access into a gzip stream.
"""
from __future__ import annotations

import struct
from typing import BinaryIO, Iterable, Iterator

from tfrecorder.errors import CorruptDataError, CorruptRecordError
from tfrecorder.format.file_names import index_file_name

_HEADER = 12  # uint64 length + uint32 masked crc of the length
_FOOTER = 4  # uint32 masked crc of the data


def write_index(job_dir: str, shard_file: str, entries: Iterable) -> str:
    """Stream a shard's index file into `job_dir` (replaced whole if it exists); returns its name there.

    `entries` yields (offset, length) pairs, or int arrays [n, 2] of them (`entry_block`)."""
    import numpy as np

    from tfrecorder.io import storage

    name = index_file_name(shard_file)
    entries = iter(entries)
    with storage.open_write(storage.join(job_dir, *name.split("/"))) as out:
        pending: list = []
        for item in entries:
            if isinstance(item, np.ndarray):
                if pending:
                    out.write(format_index(pending))
                    pending = []
                for at in range(0, len(item), _BLOCK):
                    out.write(format_index(item[at:at + _BLOCK]))
                continue
            pending.append(item)
            if len(pending) >= _BLOCK:
                out.write(format_index(pending))
                pending = []
        if pending:
            out.write(format_index(pending))
    return name


_BLOCK = 65_536  # index lines formatted at a time


def entry_block(ends: Iterable[int], start: int, shard_offset: int) -> "numpy.ndarray":
    """(offset, length) in the shard of consecutive records of a piece, from their end offsets in the
    piece, as an int64 array [n, 2].

    `start` is the piece offset where the first of them begins, `shard_offset` where that byte lands in
    the shard. For writers that record each record's end as they write a piece: the index of a shard
    assembled from piece ranges then needs no read of record bytes at all.
    """
    import numpy as np

    ends = np.asarray(ends, dtype=np.int64).reshape(-1)
    previous = np.concatenate(([start], ends))[:-1].astype(np.int64)
    return np.stack([shard_offset + previous - start, ends - previous], axis=1)


def entries_from_ends(ends: Iterable[int], start: int, shard_offset: int) -> Iterator[tuple[int, int]]:
    """`entry_block`, one (offset, length) pair at a time."""
    yield from map(tuple, entry_block(ends, start, shard_offset).tolist())


def format_index(entries) -> bytes:
    """Index lines of (offset, length) pairs (a sequence of pairs or an int array [n, 2]). Arrow writes
    the decimal text in C (a `%d` format of a million lines took ~0.15 s of the job's last step)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    pairs = np.asarray(entries, dtype=np.int64).reshape(-1, 2)
    if not len(pairs):
        return b""
    space, newline = pa.scalar(" ", pa.large_string()), pa.scalar("\n", pa.large_string())
    lines = pc.binary_join_element_wise(pc.cast(pa.array(pairs[:, 0]), pa.large_string()), space,
                                        pc.cast(pa.array(pairs[:, 1]), pa.large_string()), newline,
                                        pa.scalar("", pa.large_string()))
    ends = np.frombuffer(lines.buffers()[1], dtype=np.int64)
    return lines.buffers()[2].slice(int(ends[0]), int(ends[-1] - ends[0])).to_pybytes()


def parse_index(text: bytes) -> list[tuple[int, int]]:
    """Parse an index file; CorruptDataError naming the line if one is not two non-negative integers."""
    entries = []
    for number, line in enumerate(text.decode("ascii").splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise CorruptDataError(f"index line {number} is not 'offset length': {line!r}")
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
        raise CorruptDataError("index file is not 'offset length' lines")
    return values.reshape(-1, 2)


def scan_index(stream: BinaryIO) -> Iterator[tuple[int, int]]:
    """(offset, length) of each record of a seekable uncompressed shard, reading only the headers."""
    offset = 0
    while True:
        header = stream.read(_HEADER)
        if not header:
            return
        if len(header) < _HEADER:
            raise CorruptRecordError("truncated record header", offset)
        (length,) = struct.unpack("<Q", header[:8])
        yield offset, _HEADER + length + _FOOTER
        offset += _HEADER + length + _FOOTER
        stream.seek(offset)

