"""Shard planning: turn the pieces workers wrote into final shards (pure; no I/O).

Workers write each split's records into "pieces" (one open piece per split per bundle, rolled over at
`max_shard_bytes`), never grouping image bytes by key. Once every piece is known, the plan cuts each
split's stream of records (its pieces in a fixed order) into final shards:
- `num_shards=0`: consecutive whole pieces are packed greedily up to `max_shard_bytes`;
- `num_shards=N`: the split's records are cut into N contiguous ranges whose sizes differ by at most
  one record, so no shard is empty when a split has at least N records.
A shard is a list of record ranges of pieces; the piece's offsets sidecar tells where each record
starts, so assembly copies byte ranges.

Pieces are ordered by their content digest, not by their (random, per attempt) file names, so the same
records make the same shards whether or not bundles were retried.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable

from tfrecorder.format.file_names import KEYS_SUFFIX, OFFSETS_SUFFIX, ShardName


@dataclasses.dataclass(frozen=True)
class Piece:
    """A file of framed records one worker wrote for one split in one bundle attempt."""

    split: str
    path: str
    records: int
    bytes: int
    unknown_labels: int = 0  # rows of this piece whose label is not in the TRAIN vocabulary
    digest: str = ""  # checksum of the piece's records: orders pieces independently of file names
    offsets_file: str = ""  # where its offsets sidecar is, if not next to it (an append's merged shards)
    keyed: bool = False  # it has a keys sidecar next to it: each record's two image key hashes (piece_files)

    @property
    def keys_path(self) -> str:
        """The sidecar holding each record's image keys (URI, bytes digest) as two little-endian uint64s
        (0: none), written while encoding so that no shard is read again for its keys sidecar."""
        return self.path + KEYS_SUFFIX

    @property
    def offsets_path(self) -> str:
        """The sidecar holding each record's end offset in the piece (little-endian uint64s)."""
        return self.offsets_file or self.path + OFFSETS_SUFFIX


@dataclasses.dataclass(frozen=True)
class PieceRange:
    """Records [first, last) of a piece (0-based record numbers)."""

    piece: Piece
    first: int
    last: int

    @property
    def records(self) -> int:
        return self.last - self.first

    @property
    def whole(self) -> bool:
        return self.first == 0 and self.last == self.piece.records


@dataclasses.dataclass(frozen=True)
class ShardPlan:
    """One final shard: which record ranges it concatenates and its final file name."""

    split: str
    index: int
    count: int
    ranges: tuple[PieceRange, ...]

    @property
    def records(self) -> int:
        return sum(r.records for r in self.ranges)

    def file_name(self, compression: str | None) -> str:
        return ShardName(self.split, self.index, self.count, compression).file_name


def _pack_by_bytes(pieces: list[Piece], max_shard_bytes: int) -> list[list[PieceRange]]:
    groups: list[list[PieceRange]] = []
    current: list[PieceRange] = []
    current_bytes = 0
    for piece in pieces:
        if current and current_bytes + piece.bytes > max_shard_bytes:
            groups.append(current)
            current, current_bytes = [], 0
        current.append(PieceRange(piece, 0, piece.records))
        current_bytes += piece.bytes
    if current:
        groups.append(current)
    return groups


def shard_sizes(records: int, num_shards: int) -> list[int]:
    """Record counts of `num_shards` balanced shards: they differ by at most one."""
    base, extra = divmod(records, num_shards)
    return [base + (1 if index < extra else 0) for index in range(num_shards)]


def _cut_by_records(pieces: list[Piece], num_shards: int) -> list[list[PieceRange]]:
    """Cut the records of `pieces` (in order) into `num_shards` contiguous, balanced ranges."""
    groups: list[list[PieceRange]] = []
    position = iter(pieces)
    piece, taken = next(position, None), 0
    for size in shard_sizes(sum(p.records for p in pieces), num_shards):
        group: list[PieceRange] = []
        while size:
            take = min(size, piece.records - taken)
            group.append(PieceRange(piece, taken, taken + take))
            taken += take
            size -= take
            if taken == piece.records:
                piece, taken = next(position, None), 0
        groups.append(group)
    return groups


def plan_shards(pieces: Iterable[Piece], num_shards: int, max_shard_bytes: int) -> list[ShardPlan]:
    """Plan the final shards of every split. Empty pieces are dropped; a split with no records gets none.

    With `num_shards=N` a split with fewer than N records gets empty shards after its records, so
    every split still has exactly N files.
    """
    by_split: dict[str, list[Piece]] = {}
    for piece in pieces:
        if piece.records:
            by_split.setdefault(piece.split, []).append(piece)
    plans: list[ShardPlan] = []
    for split in sorted(by_split):
        ordered = sorted(by_split[split], key=lambda p: (p.digest, p.records, p.bytes, p.path))
        if num_shards > 0:
            groups = _cut_by_records(ordered, num_shards)
        else:
            groups = _pack_by_bytes(ordered, max_shard_bytes)
        plans.extend(ShardPlan(split, index, len(groups), tuple(group)) for index, group in enumerate(groups))
    return plans
