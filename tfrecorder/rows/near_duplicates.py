"""Near-duplicate images from their 64-bit perceptual hashes, as pure logic (issue 29).

Candidates are found by banding (LSH): the hash is cut into BANDS bands of 16 bits, and each image is
filed under every band's value ("home") and under each value one bit away ("probe"). Two images within
7 bits of each other share a band differing in at most one bit (pigeonhole over 4 bands), so one's
probe or home meets the other's home: every pair within MAX_GUARANTEED bits is a candidate, and a
candidate counts when its Hamming distance is within the job's threshold. The pipeline sends these
keys to buckets by band and the top bits of the value (beam_pipelines.steps.find_duplicates
groups them there): as many as the job's size needs (`bucket_shift`, from its row estimate:
16 buckets for a small job, up to BUCKETS from about half a million rows), so a bucket holds at most
about BUCKET_KEYS keys and never all rows, and a small job does not pay for a thousand nearly empty
buckets. Images with identical bytes are exact duplicates already: each digest takes part once, under its smallest row id.

Confirmed pairs (each once, whichever buckets found it) are joined into groups by connected components
(`groups_of_pairs`): the one step whose state is not bounded by buckets — it holds the images that
have a near-duplicate (a few hundred bytes each), never the rows without one.
"""
from __future__ import annotations

import dataclasses
import hashlib
from typing import Iterable, Iterator, Sequence

import numpy as np

from tfrecorder.io.perceptual_hash import hamming
from tfrecorder.rows.duplicate_groups import DuplicateGroup, member_order

BANDS, BAND_BITS = 4, 16
MAX_GUARANTEED = 2 * BANDS - 1  # any pair this close shares a band within one bit
BUCKETS = 1024
NEAR = "near"
DEFAULT_DISTANCE = 7

Entry = tuple  # (phash, digest, split, row id[, place]): place with duplicates="drop" (duplicate_groups.Place)


def _order(entry: Entry) -> tuple:
    """Which entry of a digest stands for it (the smallest): the one its exact group keeps."""
    return member_order(entry[2], entry[3], *entry[4:5])


BUCKET_SHIFT = 8  # the largest count: a band's BUCKETS / BANDS = 256 buckets, by the top 8 of its 16 bits
assert BANDS << (BAND_BITS - BUCKET_SHIFT) == BUCKETS
MAX_BUCKET_SHIFT = 14  # the smallest count: 16 buckets, 4 a band
KEYS_PER_IMAGE = BANDS * (1 + BAND_BITS)  # 68: each band's home and its 16 probes
BUCKET_KEYS = 65_536  # band keys a bucket is sized to hold at most (about 1 MB of them)


def bucket_shift(rows_estimate: int) -> int:
    """The job's bucket shift (`bucket_of_key`): the largest from BUCKET_SHIFT to MAX_BUCKET_SHIFT whose
    `bucket_count` keeps rows × KEYS_PER_IMAGE / buckets within BUCKET_KEYS — 16 buckets up to ~15,000
    rows, 1,024 (as many as ever) from ~500,000 rows, so a bucket's keys stay bounded whatever the size, and a
    small job is not spread over a thousand nearly empty buckets (each costs a grouping element per
    flush and a step call)."""
    keys = max(0, int(rows_estimate)) * KEYS_PER_IMAGE
    for shift in range(MAX_BUCKET_SHIFT, BUCKET_SHIFT, -1):
        if keys <= bucket_count(shift) * BUCKET_KEYS:
            return shift
    return BUCKET_SHIFT


def bucket_count(shift: int) -> int:
    """How many buckets band keys go to with `shift`: BANDS << (BAND_BITS - shift), at most BUCKETS."""
    return BANDS << (BAND_BITS - shift)


def bucket_of_key(key, shift: int = BUCKET_SHIFT):
    """A band key's bucket: its band and the top bits of its value (`key >> shift`, below
    `bucket_count(shift)` ≤ BUCKETS). A probe that flips one of the low `shift` bits stays in its home's
    bucket, so an image's 68 keys fill BANDS × (1 + BAND_BITS - shift) buckets (36 with shift 8, 12 with
    14), not up to 68: its entry travels that many times. The pairs found are the same for any shift: a
    pair is found where a home and an equal key meet, and equal keys are in the same bucket."""
    return key >> shift


def band_keys(phash: int) -> Iterator[tuple[int, bool]]:
    """(key, is_home) for each band: its value (home), then the values one bit away (probes)."""
    mask = (1 << BAND_BITS) - 1
    for band in range(BANDS):
        value = (phash >> (band * BAND_BITS)) & mask
        base = band << BAND_BITS
        yield base | value, True
        for bit in range(BAND_BITS):
            yield base | (value ^ (1 << bit)), False


@dataclasses.dataclass(frozen=True)
class NearBlock:
    """One bucket's band keys of a flush, column-wise: `keys` (int32s), `homes` (one byte each) and for
    each key the position in `entries` (int32s) of its image (each image once per block, however many of
    its keys the bucket holds) — raw bytes, which pickle far faster than arrays. Iterating gives
    (key, is_home, entry) as `band_keys` would."""

    keys: bytes
    homes: bytes
    positions: bytes
    entries: tuple

    def __iter__(self) -> Iterator[tuple[int, bool, Entry]]:
        entries = self.entries
        keys = np.frombuffer(self.keys, dtype=np.int32).tolist()
        positions = np.frombuffer(self.positions, dtype=np.int32).tolist()
        for key, home, position in zip(keys, self.homes, positions):
            yield key, bool(home), entries[position]


_SHIFTS = np.arange(BANDS, dtype=np.uint64) * np.uint64(BAND_BITS)
_BASES = np.arange(BANDS, dtype=np.int64) << BAND_BITS
_FLIPS = np.int64(1) << np.arange(BAND_BITS, dtype=np.int64)


def bucketed(entries: Sequence[Entry], shift: int = BUCKET_SHIFT) -> dict[int, NearBlock]:
    """Every entry's band keys (as `band_keys` gives them, computed with numpy) as one NearBlock per bucket
    (`bucket_of_key` with the job's `shift`): one sort for all buckets (keys by bucket, then image), each
    block a slice of it."""
    if not BUCKET_SHIFT <= shift <= BAND_BITS:
        raise ValueError(f"bucket shift {shift} is not within {BUCKET_SHIFT}…{BAND_BITS}")
    if not entries:
        return {}
    hashes = np.fromiter((entry[0] for entry in entries), dtype=np.uint64, count=len(entries))
    values = ((hashes[:, None] >> _SHIFTS[None, :]) & np.uint64((1 << BAND_BITS) - 1)).astype(np.int64)
    keys = np.concatenate([(_BASES + values)[:, :, None],
                           _BASES[None, :, None] + (values[:, :, None] ^ _FLIPS[None, None, :])], axis=2)
    homes = np.zeros(keys.shape, dtype=bool)
    homes[:, :, 0] = True
    owners = np.broadcast_to(np.arange(len(entries), dtype=np.int64)[:, None, None], keys.shape).ravel()
    keys, homes = keys.ravel(), homes.ravel()
    buckets = bucket_of_key(keys, shift)
    order = np.lexsort((owners, buckets))  # by bucket, then image (stable: each image's keys in their order)
    keys, homes, owners, buckets = keys[order], homes[order], owners[order], buckets[order]
    starts = np.flatnonzero(np.r_[True, buckets[1:] != buckets[:-1]])  # each bucket's first key
    first = np.r_[True, (buckets[1:] != buckets[:-1]) | (owners[1:] != owners[:-1])]  # an image's first key there
    unique = np.cumsum(first) - 1  # each key's image, counted over all buckets
    positions = (unique - np.repeat(unique[starts], np.diff(np.r_[starts, len(keys)]))).astype(np.int32)
    images = owners[first].tolist()
    image_starts = unique[starts].tolist() + [len(images)]
    bounds = starts.tolist() + [len(keys)]
    keys32 = keys.astype(np.int32)
    out = {}
    for index, bucket in enumerate(buckets[starts].tolist()):
        low, high = bounds[index], bounds[index + 1]
        out[bucket] = NearBlock(keys32[low:high].tobytes(), homes[low:high].tobytes(), positions[low:high].tobytes(),
                                tuple(entries[i] for i in images[image_starts[index]:image_starts[index + 1]]))
    return out


def joined(blocks: Sequence[NearBlock]) -> NearBlock:
    """One bucket's blocks of several flushes (a part's batches) as one block: one element to group
    instead of one per batch. The blocks hold distinct images (each image is in one flush)."""
    if len(blocks) == 1:
        return blocks[0]
    positions, offset = [], 0
    for block in blocks:
        positions.append((np.frombuffer(block.positions, dtype=np.int32) + offset).tobytes())
        offset += len(block.entries)
    return NearBlock(b"".join(block.keys for block in blocks), b"".join(block.homes for block in blocks),
                     b"".join(positions), tuple(entry for block in blocks for entry in block.entries))


SMALL_BUCKET = 4096  # band keys up to which a bucket's candidates are found in plain Python, not numpy


def candidate_keys(blocks: Iterable[NearBlock]) -> Iterator[tuple[int, bool, Entry]]:
    """The (key, is_home, entry) of a bucket's blocks that can take part in a pair: those whose key is
    some image's home and is held at least twice (a pair needs a home and another key equal to it).
    The same pairs as iterating every block, found first: most probes meet no home, and the per-key
    Python work of `near_pairs` is spent on the few that do. A small bucket (a small job's: ~130 keys
    of 2,000 images) is sifted with sets and dicts, which cost a few microseconds where numpy's calls
    cost ~0.1 ms a bucket; a large one in numpy."""
    blocks = list(blocks)
    if not blocks:
        return
    if sum(len(block.keys) for block in blocks) // 4 <= SMALL_BUCKET:
        yield from _small_candidate_keys(blocks)
        return
    keys = np.concatenate([np.frombuffer(block.keys, dtype=np.int32) for block in blocks])
    homes = np.concatenate([np.frombuffer(block.homes, dtype=np.bool_) for block in blocks])
    values, counts = np.unique(keys, return_counts=True)
    wanted = np.intersect1d(values[counts > 1], keys[homes], assume_unique=False)
    if not wanted.size:
        return
    start = 0
    for block in blocks:
        count = len(block.keys) // 4
        chosen = np.flatnonzero(np.isin(keys[start:start + count], wanted))
        if chosen.size:
            positions = np.frombuffer(block.positions, dtype=np.int32)[chosen].tolist()
            for key, home, position in zip(keys[start:start + count][chosen].tolist(),
                                           homes[start:start + count][chosen].tolist(), positions):
                yield key, home, block.entries[position]
        start += count


def _small_candidate_keys(blocks: list[NearBlock]) -> Iterator[tuple[int, bool, Entry]]:
    """`candidate_keys` of a small bucket, in plain Python."""
    columns = [(np.frombuffer(block.keys, dtype=np.int32).tolist(), block.homes,
                np.frombuffer(block.positions, dtype=np.int32).tolist(), block.entries) for block in blocks]
    homes = {key for keys, home_flags, _p, _e in columns for key, home in zip(keys, home_flags) if home}
    held: dict[int, int] = {}
    for keys, _h, _p, _e in columns:
        for key in keys:
            if key in homes:
                held[key] = held.get(key, 0) + 1
    wanted = {key for key, count in held.items() if count > 1}
    if not wanted:
        return
    for keys, home_flags, positions, entries in columns:
        for key, home, position in zip(keys, home_flags, positions):
            if key in wanted:
                yield key, bool(home), entries[position]


def near_pairs(keyed: Iterable[tuple], max_distance: int) -> list[tuple[Entry, Entry]]:
    """The confirmed pairs of one bucket: images within `max_distance` bits and not byte-identical, each
    pair once (ordered by digest), each digest as its smallest row id."""
    homes: dict[int, dict[bytes, Entry]] = {}
    probes: dict[int, dict[bytes, Entry]] = {}
    for key, home, entry in keyed:
        table = homes if home else probes
        found = table.setdefault(key, {})
        kept = found.get(entry[1])
        if kept is None or _order(entry) < _order(kept):  # one entry per digest: its smallest row id
            found[entry[1]] = entry
    pairs: dict[tuple[bytes, bytes], tuple[Entry, Entry]] = {}

    def confirm(left: Entry, right: Entry) -> None:
        if left[1] == right[1] or hamming(left[0], right[0]) > max_distance:
            return
        if right[1] < left[1]:
            left, right = right, left
        pairs[(left[1], right[1])] = (left, right)

    for key, found in homes.items():
        at_home = sorted(found.values(), key=lambda e: e[1])
        for i, left in enumerate(at_home):
            for right in at_home[i + 1:]:
                confirm(left, right)
        for probe in probes.get(key, {}).values():
            for right in at_home:
                confirm(probe, right)
    return [pairs[key] for key in sorted(pairs)]


def pair_key(pair: tuple[Entry, Entry]) -> bytes:
    """One key per pair of images, whichever bucket found it."""
    return pair[0][1] + pair[1][1]


def groups_of_pairs(pairs: Iterable[tuple[Entry, Entry]]) -> list[DuplicateGroup]:
    """Connected components of confirmed pairs: one group per set of images linked by near-duplicate
    pairs (state: the images that are in some pair, never every row)."""
    parent: dict[bytes, bytes] = {}
    members: dict[bytes, Entry] = {}

    def root(digest: bytes) -> bytes:
        while parent[digest] != digest:
            parent[digest] = parent[parent[digest]]
            digest = parent[digest]
        return digest

    for left, right in pairs:
        for entry in (left, right):
            if entry[1] not in parent:
                parent[entry[1]] = entry[1]
                members[entry[1]] = entry
            elif _order(entry) < _order(members[entry[1]]):
                members[entry[1]] = entry
        a, b = root(left[1]), root(right[1])
        if a != b:
            parent[max(a, b)] = min(a, b)
    components: dict[bytes, list[Entry]] = {}
    for digest in parent:
        components.setdefault(root(digest), []).append(members[digest])
    groups = []
    for entries in components.values():
        entries.sort(key=_order)
        listed = tuple((e[2], e[3]) for e in entries)
        group_id = hashlib.blake2b("\n".join(row for _, row in listed).encode("utf-8"), digest_size=8).hexdigest()
        groups.append(DuplicateGroup(group_id, NEAR, listed, tuple(e[4] for e in entries if len(e) > 4)))
    return sorted(groups, key=lambda group: group.group_id)


def near_groups(keyed: Iterable[tuple], max_distance: int) -> list[DuplicateGroup]:
    """The groups one bucket's pairs form on their own (tests and small tables)."""
    return groups_of_pairs(near_pairs(keyed, max_distance))
