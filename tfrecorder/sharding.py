"""Shard planning: turn the pieces workers wrote into final, byte-bounded shards.

Workers write each split's records into "pieces" (files capped at `max_shard_bytes`), never grouping
image bytes by key. Once every piece is known, this plan packs consecutive pieces into final shards:
with `num_shards=0` greedily up to `max_shard_bytes`; with an explicit `num_shards`, pieces were
already written per shard index and each index becomes one shard.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable

DEFAULT_MAX_SHARD_BYTES = 150 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class Piece:
    """A file of framed records one worker wrote for one split (and shard index, if fixed)."""

    split: str
    path: str
    records: int
    bytes: int
    shard_index: int = -1
    unknown_labels: int = 0  # rows of this piece whose label is not in the TRAIN vocabulary


@dataclasses.dataclass(frozen=True)
class ShardPlan:
    """One final shard: which pieces it concatenates and its final file name."""

    split: str
    index: int
    count: int
    pieces: tuple[Piece, ...]

    @property
    def records(self) -> int:
        return sum(p.records for p in self.pieces)

    def file_name(self, compression: str | None) -> str:
        suffix = ".tfrecord.gz" if compression == "gzip" else ".tfrecord"
        return f"{self.split.lower()}-{self.index:05d}-of-{self.count:05d}{suffix}"


def _pack_by_bytes(pieces: list[Piece], max_shard_bytes: int) -> list[list[Piece]]:
    groups: list[list[Piece]] = []
    current: list[Piece] = []
    current_bytes = 0
    for piece in pieces:
        if current and current_bytes + piece.bytes > max_shard_bytes:
            groups.append(current)
            current, current_bytes = [], 0
        current.append(piece)
        current_bytes += piece.bytes
    if current:
        groups.append(current)
    return groups


def plan_shards(pieces: Iterable[Piece], num_shards: int, max_shard_bytes: int) -> list[ShardPlan]:
    """Plan the final shards of every split. Empty pieces are dropped; a split with no records gets none."""
    by_split: dict[str, list[Piece]] = {}
    for piece in pieces:
        by_split.setdefault(piece.split, []).append(piece)
    plans: list[ShardPlan] = []
    for split in sorted(by_split):
        split_pieces = sorted(by_split[split], key=lambda p: (p.shard_index, p.path))
        if sum(p.records for p in split_pieces) == 0:
            continue
        if num_shards > 0:
            groups = [[p for p in split_pieces if p.shard_index == i] for i in range(num_shards)]
        else:
            groups = _pack_by_bytes([p for p in split_pieces if p.records], max_shard_bytes)
        plans.extend(
            ShardPlan(split, index, len(groups), tuple(group)) for index, group in enumerate(groups)
        )
    return plans
