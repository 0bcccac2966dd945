"""Writing framed records into piece files, and assembling pieces into final shards.

A piece is one worker's output for one split, capped at max_shard_bytes. TFRecord files are
self-delimiting, so a shard made of several pieces is just their concatenation (compressed on the way
when gzip is asked for). No image bytes are ever grouped by key.
"""
from __future__ import annotations

import gzip
import shutil
import uuid
from typing import Optional

from tfrecorder import record_index, storage
from tfrecorder.sharding import Piece, ShardPlan
from tfrecorder.tfrecord_format import write_record

_COPY_CHUNK = 8 * 1024 * 1024


class PieceWriter:
    """Appends framed records to one piece file of a split; `close()` returns its Piece."""

    def __init__(self, pieces_dir: str, split: str, shard_index: int = -1) -> None:
        self.split = split
        self.shard_index = shard_index
        self.path = storage.join(pieces_dir, f"{split.lower()}-{uuid.uuid4().hex}.part")
        self._stream = storage.open_write(self.path)
        self.records = 0
        self.bytes = 0
        self.unknown_labels = 0

    def write(self, data: bytes, unknown_labels: int = 0) -> None:
        self.bytes += write_record(self._stream, data)
        self.records += 1
        self.unknown_labels += unknown_labels

    def close(self) -> Piece:
        self._stream.close()
        return Piece(self.split, self.path, self.records, self.bytes, self.shard_index, self.unknown_labels)


def assemble_shard(plan: ShardPlan, directory: str, compression: Optional[str]) -> dict:
    """Create the final shard file from its pieces; returns its summary for metadata.json."""
    destination = storage.join(directory, plan.file_name(compression))
    # issue 15: an uncompressed shard's record index, index/<shard file>.index, written as the shard is
    index = record_index.ShardIndexWriter(directory, plan.file_name(compression)) if compression is None else None
    if len(plan.pieces) == 1 and compression is None:
        storage.rename(plan.pieces[0].path, destination)
        with storage.open_read(destination) as written:  # issue 15: record headers only (seeks over the data)
            index.scan(written)
    else:
        with storage.open_write(destination) as raw:
            out = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) if compression == "gzip" else raw
            target = index.wrap(out) if index else out  # issue 15
            for piece in plan.pieces:
                with storage.open_read(piece.path) as source:
                    shutil.copyfileobj(source, target, _COPY_CHUNK)
            if out is not raw:
                out.close()
        storage.delete_files(p.path for p in plan.pieces)
    summary = {
        "split": plan.split,
        "index": plan.index,
        "file": plan.file_name(compression),
        "records": plan.records,
        "bytes": storage.size(destination),
    }
    if index:  # issue 15
        index.close()
        summary["index_file"] = index.name
    return summary
