"""Writing framed records into piece files, and assembling record ranges of pieces into final shards.

A piece is one bundle attempt's output for one split, capped at max_shard_bytes, under a fresh random
name, with an offsets sidecar (each record's end offset, little-endian uint64). TFRecord files are
self-delimiting, so a shard made of record ranges is just the concatenation of their byte ranges
(compressed on the way when gzip is asked for). No image bytes are ever grouped by key.

Every record's place is known at assembly: the sidecar slice [first, last] of a range gives each
record's (offset, length) in its piece, shifted by where the range lands in the shard.

Retry safety: a piece is never renamed or changed once written; only pieces emitted by committed
bundles are planned, and the whole pieces directory (orphans of failed attempts included) is removed
when the job is finalized. Assembly only ever (re)creates its destination, so running it twice gives
the same shard. One exception, local jobs: once a shard is in place under its final name, the piece
files it holds whole (no other shard reads them) are removed at once (`remove_assembled_pieces`),
while their pages are likely still unwritten in the page cache and no disk blocks are allocated for
them yet (freeing written-out blocks is what costs, more so on a file system that discards them): on
the development machine removing 940 pieces of 1.6 GB at the end took 1–3.7 s, right after each
shard ~0.1 s. Their offsets and keys sidecars stay until finalize. A repeated assembly that finds
its shard in place and a piece of it gone keeps the shard (`assemble_shard`): it was made from the
same plan (plans depend only on the committed pieces) and only ever appears whole, through a
temporary name and one rename.
"""
from __future__ import annotations

import array
import gzip
import os
import shutil
import struct
import sys
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO, Iterator, Optional, Union

from tfrecorder.format import record_index
from tfrecorder.format.file_names import piece_file_name, temporary_file_name
from tfrecorder.format.image_keys import hashes_bytes, record_key_slots
from tfrecorder.io import storage
from beam_pipelines.steps.shard_planning import Piece, PieceRange, ShardPlan
from tfrecorder.format.framing import write_record_pieces

_COPY_CHUNK = 8 * 1024 * 1024
# a shard of this many records writes its index on a thread of its own while its bytes are copied (the
# index lines are formatted by Arrow and the copy is the kernel's: both without the GIL): a million
# records' index takes ~0.09 s, their copy ~0.05 s; a smaller shard's index costs less than a thread
INDEX_BESIDE_COPY_RECORDS = 65_536
_OFFSET = struct.Struct("<Q")


class PieceWriter:
    """Appends framed records to one new piece file of a split; `close()` writes its offsets, returns its Piece."""

    def __init__(self, pieces_dir: str, split: str, keys_prefix: Optional[str] = None) -> None:
        self.split = split
        self.keys_prefix = keys_prefix  # image rows: each record's image keys go to the piece's keys sidecar
        self._keys = array.array("Q")  # 16 bytes per record, bounded as the offsets are
        self.path = storage.join(pieces_dir, piece_file_name(split))
        self._stream = storage.open_write(self.path)
        self._ends = array.array("Q")  # 8 bytes per record, bounded by the piece's byte cap
        self._crc = 0
        self.bytes = 0
        self.unknown_labels = 0

    @property
    def records(self) -> int:
        return len(self._ends)

    def write(self, data: Union[bytes, list], unknown_labels: int = 0,
              keys: Optional[tuple[int, int]] = None) -> None:
        """Append one record: its bytes, or pieces that concatenate to them (never joined here). `keys`:
        its image keys (image_keys.image_key_slots) when the caller knows them; else, in a keyed piece,
        they are read from the record."""
        written, crc = write_record_pieces(self._stream, (data,) if isinstance(data, bytes) else data)
        if self.keys_prefix is not None:
            if keys is None:
                keys = record_key_slots(data if isinstance(data, bytes) else b"".join(data), self.keys_prefix)
            self._keys.extend(keys)
        self.bytes += written
        self._ends.append(self.bytes)
        self._crc = zlib.crc32(crc.to_bytes(4, "little"), self._crc)  # the records' own CRCs, in order
        self.unknown_labels += unknown_labels

    def write_framed(self, framed, ends, unknown_labels: int = 0) -> None:
        """Append records framed already (tfrecord_format.frame_records): `framed` their bytes, `ends`
        (a NumPy array) each record's end in `framed`. The digest takes the records' own CRCs, in order,
        from their footers, as write() does."""
        import numpy as np

        footers = np.frombuffer(framed, dtype=np.uint8)[(ends[:, None] - np.arange(4, 0, -1)).ravel()]
        self._stream.write(framed)
        self._ends.extend((ends + self.bytes).tolist())
        self.bytes += len(framed)
        self._crc = zlib.crc32(footers.tobytes(), self._crc)
        self.unknown_labels += unknown_labels

    def abandon(self) -> None:
        """Close the file without making it a piece (a failed bundle's output: removed with the directory)."""
        self._stream.close()

    def close(self) -> Piece:
        self._stream.close()
        piece = Piece(self.split, self.path, self.records, self.bytes, self.unknown_labels,
                      f"{self._crc:08x}-{self.records}-{self.bytes}", keyed=self.keys_prefix is not None)
        if sys.byteorder == "big":
            self._ends.byteswap()
            self._keys.byteswap()
        storage.write_bytes(piece.offsets_path, self._ends.tobytes())
        if piece.keyed:
            storage.write_bytes(piece.keys_path, self._keys.tobytes())
        return piece


def byte_range(piece_range: PieceRange) -> tuple[int, int]:
    """(start, end) byte offsets of a record range within its piece (reads two offsets of the sidecar)."""
    if piece_range.whole:
        return 0, piece_range.piece.bytes
    with storage.open_read(piece_range.piece.offsets_path) as offsets:
        start = 0
        if piece_range.first:
            offsets.seek(_OFFSET.size * (piece_range.first - 1))
            (start,) = _OFFSET.unpack(offsets.read(_OFFSET.size))
        offsets.seek(_OFFSET.size * (piece_range.last - 1))
        (end,) = _OFFSET.unpack(offsets.read(_OFFSET.size))
    return start, end


def _kernel_copy(source: BinaryIO, out: BinaryIO, start: int, end: int) -> bool:
    """Copy bytes [start, end) of a local piece to a local shard inside the kernel (copy_file_range:
    no trip through Python, a reflink where the file system shares extents); False when the files or
    the system do not allow it (nothing copied then)."""
    copy = getattr(os, "copy_file_range", None)
    try:
        source_fd, out_fd = source.fileno(), out.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    if copy is None:
        return False
    out.flush()  # the kernel writes at the descriptor's position: what is buffered goes first
    offset = start
    while offset < end:
        try:
            copied = copy(source_fd, out_fd, end - offset, offset)
        except OSError:
            if offset == start:
                return False  # not supported here (another file system, an old kernel): copy in Python
            raise
        if not copied:
            raise OSError(f"piece ended {end - offset} bytes early")
        offset += copied
    return True


def copy_range(source: BinaryIO, out: BinaryIO, start: int, end: int, raw: bool = False) -> None:
    """Copy bytes [start, end) of `source` to `out` (`raw`: `out` is the shard file itself, not a
    compressing stream over it, so the kernel may copy)."""
    if raw and _kernel_copy(source, out, start, end):
        return
    source.seek(start)
    remaining = end - start
    while remaining:
        chunk = source.read(min(_COPY_CHUNK, remaining))
        if not chunk:
            raise OSError(f"piece ended {remaining} bytes early")
        out.write(chunk)
        remaining -= len(chunk)


def _write_shard(plan: ShardPlan, destination: str, compression: Optional[str]) -> None:
    """Concatenate the plan's byte ranges into `destination` (whole: objects appear on close)."""
    with storage.open_write(destination) as raw:
        out = gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=6, mtime=0) if compression == "gzip" else raw
        for piece_range in plan.ranges:
            start, end = byte_range(piece_range)
            with storage.open_read(piece_range.piece.path) as source:
                copy_range(source, out, start, end, raw=out is raw)
        if out is not raw:
            out.close()


def _link_or_copy(source: str, destination: str) -> None:
    """Make `destination` a copy of `source`, leaving the source in place (local: a hard link, O(1))."""
    if storage.is_remote(destination) or storage.is_remote(source):  # an append's merged shard may be on gs://
        storage.copy(source, destination)
        return
    try:
        os.link(source, destination)
    except OSError:  # file system without hard links
        shutil.copyfile(source, destination)


def assemble_shard(plan: ShardPlan, directory: str, compression: Optional[str]) -> dict:
    """Create the final shard file from its record ranges; returns its summary for metadata.json.

    Idempotent: pieces are only read, and the destination is replaced whole (locally through a
    temporary name and one atomic rename), so a retried or repeated assembly gives the same file. An
    uncompressed shard's index is written from the offsets sidecars, beside the copy for a large shard.
    """
    name = plan.file_name(compression)
    destination = storage.join(directory, name)
    if compression is not None:
        return _made_shard(plan, directory, name, destination, compression)
    # issue 15: index/<shard>.index, from the offsets sidecars (no record bytes read)
    if plan.records < INDEX_BESIDE_COPY_RECORDS:
        return {**_made_shard(plan, directory, name, destination, compression),
                "index_file": record_index.write_index(directory, name, _index_entries(plan))}
    with ThreadPoolExecutor(1, thread_name_prefix="tfrecorder-index") as beside:
        index_file = beside.submit(record_index.write_index, directory, name, _index_entries(plan))
        summary = _made_shard(plan, directory, name, destination, compression)
        return {**summary, "index_file": index_file.result()}


def _made_shard(plan: ShardPlan, directory: str, name: str, destination: str, compression: Optional[str]) -> dict:
    """The shard in place (created unless a repeated assembly finds it made), and its summary."""
    if not _assembled_before(plan, destination):
        _create_shard(plan, directory, name, destination, compression)
    return {"split": plan.split, "index": plan.index, "file": name, "records": plan.records,
            "bytes": storage.size(destination)}


def _create_shard(plan: ShardPlan, directory: str, name: str, destination: str, compression: Optional[str]) -> None:
    """Write the shard whole: locally through a temporary name and one atomic rename."""
    staging = destination if storage.is_remote(destination) else storage.join(directory, temporary_file_name(name))
    try:
        if len(plan.ranges) == 1 and plan.ranges[0].whole and compression is None:
            _link_or_copy(plan.ranges[0].piece.path, staging)
        else:
            _write_shard(plan, staging, compression)
        if staging != destination:
            os.replace(staging, destination)
    finally:
        if staging != destination and os.path.exists(staging):
            os.remove(staging)


def _assembled_before(plan: ShardPlan, destination: str) -> bool:
    """A local shard already in place whose pieces were removed (remove_assembled_pieces): a repeated
    assembly (a retried bundle, a job resumed after a kill during assembly) keeps it. While every piece
    is there the shard is made again, as it always was."""
    if storage.is_remote(destination) or not os.path.exists(destination):
        return False
    return any(not os.path.exists(piece_range.piece.path) for piece_range in plan.ranges)


def remove_assembled_pieces(plan: ShardPlan, pieces_dir: str) -> int:
    """Remove the piece files (not their sidecars) a local shard, now in place, holds whole: no other
    shard reads them. Only files under `pieces_dir` (an append's re-assembled parent shards stay);
    missing is fine (a repeat). Returns how many were removed."""
    prefix = pieces_dir.rstrip("/") + "/"
    paths = [piece_range.piece.path for piece_range in plan.ranges if piece_range.whole
             and piece_range.piece.path.startswith(prefix) and not storage.is_remote(piece_range.piece.path)]
    present = [path for path in paths if os.path.exists(path)]
    storage.delete_files(present)
    return len(present)


def shard_keys_from_pieces(plan: ShardPlan) -> Optional[bytes]:
    """A shard's keys sidecar content (tfrecorder.format.image_keys.hashes_bytes) from its ranges' piece
    keys sidecars (16 bytes a record read, no record), or None when a piece has none (then the shard's
    records are scanned: an append's merged shards)."""
    import numpy as np

    if not all(piece_range.piece.keyed for piece_range in plan.ranges):
        return None
    slots = [np.frombuffer(storage.read_range(piece_range.piece.keys_path, 16 * piece_range.first,
                                              16 * piece_range.records), dtype="<u8")
             for piece_range in plan.ranges if piece_range.records]
    hashes = np.concatenate(slots) if slots else np.zeros(0, "<u8")
    return hashes_bytes(hashes[hashes != 0])


def _index_entries(plan: ShardPlan) -> Iterator:
    """(offset, length) of each record of an uncompressed shard, from its ranges' offsets sidecars: an
    array of them per range."""
    shard_offset = 0
    for piece_range in plan.ranges:
        if not piece_range.records:
            continue
        first = max(piece_range.first - 1, 0)  # the end offset before the range is where it starts
        ends = array.array("Q", storage.read_range(piece_range.piece.offsets_path, _OFFSET.size * first,
                                                   _OFFSET.size * (piece_range.last - first)))
        if sys.byteorder == "big":
            ends.byteswap()
        start = ends[0] if piece_range.first else 0
        ends = ends[1:] if piece_range.first else ends
        yield record_index.entry_block(ends, start, shard_offset)
        shard_offset += ends[-1] - start
