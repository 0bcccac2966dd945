"""Exact duplicates among written rows, and train/test leakage, as pure logic (issue 29).

Each written row gets a content digest: its image bytes (all image columns, in schema order) or, for
image-free rows, its serialized Example (identical written feature values). The pipeline
(beam_pipelines.steps.find_duplicates) sends (digest, split, row id) entries to one of BUCKETS keys
chosen by the digest, groups them there, and `groups_in` finds the runs of equal digests: nothing
about all rows is ever held in one place (a bucket holds about rows / BUCKETS entries of ~60 bytes).

A group lists its members sorted by row id (the image URI, or "part P row R" for image-free rows); the
first is the one kept (deterministic, whatever order the rows were written in). A group *leaks* when its
members sit in TRAIN and in VALIDATION or TEST.

With duplicates="drop" each entry also carries its row's Place (the piece file and record number it
was written to, its unknown-label count and its cells for discarded.csv): a group's `dropped()` are
the places of every member but the kept one (beam_pipelines.steps.drop_duplicates removes them from
their pieces). Members are then ordered by (row id, split, cells, place), so two rows of one id (a
URI listed twice) are both members and the same one is kept in every grouping that sees them.

Image-free rows (DigestBlocks) carry their places column-wise: per row three int64s (index into the
block's piece names, record number, unknown labels) and, per block, its source part's key. Their
Place has no cells (None) but (part key, row number in the part): the drop step reads the dropped rows'
cells back from their source part (beam_pipelines.steps.drop_duplicates), so nothing per row but those
three integers travels with the digests. A block's row numbers and places are pickled packed
(`packed_ints`: ~2 bytes per row number, ~6 per place), and a bucket's blocks as one DigestBlocks: the
in-process runner holds the whole grouping input in that form, several times over, at its peak.
"""
from __future__ import annotations

import dataclasses
import hashlib
from typing import Iterable, Iterator, Optional, Sequence, Union

import numpy as np

from tfrecorder.core.splits import TEST, TRAIN, VALIDATION

BUCKETS = 1024  # at most 65,536: blocks_by_bucket sorts bucket numbers as 16-bit integers
EXACT = "exact"
CSV_COLUMNS = ("group", "kind", "split", "row", "kept", "leak")

Entry = tuple  # (digest: bytes, split: str, row id: str[, place: Place])
Place = tuple  # (piece file name, record number in the piece, unknown labels, row cells): duplicates="drop";
# image-free rows: (piece file name, record number, unknown labels, None, source part key, row number in the part)
DROPPED_REASON = "duplicate of"  # discard reason of a dropped row: "duplicate of <row id of the kept row>"


def member_order(split: str, row: str, place: Place = None) -> tuple:
    """How a group's members sort (the first is kept): by row id, then split; rows of one id (a URI
    listed twice) by their cells (image-free rows: their part's key and row number), then place (only
    then is the choice not a function of the table)."""
    return (row, split) if place is None else (row, split, tuple(place[3] or ()), *place[4:], place[0], place[1])


def content_digest(*parts: bytes) -> bytes:
    """A 128-bit digest of the row's content (its image bytes, or its Example): the first 16 bytes of
    the SHA-256 of its one part, or of several parts' lengths and bytes. SHA-256, not BLAKE2b: with the
    CPU's SHA instructions it hashes an 80 KB image in about half the time."""
    if len(parts) == 1:
        return hashlib.sha256(parts[0]).digest()[:16]
    return _parts_digest(parts)


def content_digest_of_first(first_sha256: bytes, parts: Sequence[bytes]) -> bytes:
    """`content_digest(*parts)` when the caller holds the full SHA-256 of `parts[0]` already (an encoder
    that hashed the image for its keys sidecar): a row of one image is not hashed twice."""
    if len(parts) == 1:
        return first_sha256[:16]
    return _parts_digest(parts)


def _parts_digest(parts: Sequence[bytes]) -> bytes:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.digest()[:16]


KEY_ROWS = 65_536  # rows whose digests one grouping key carries at most (~1.5 MB), `buckets_per_key`
MAX_BUCKETS_PER_KEY = 16


def buckets_per_key(rows_estimate: int) -> int:
    """How many exact buckets a committed part sends to the grouping under one key (a power of two): as many
    as keep a key's rows within KEY_ROWS at the job's size, at most MAX_BUCKETS_PER_KEY — 16 (64 keys) up
    to ~4M rows, one from ~67M. Beam's in-process runner pays for every grouping element: a million-row
    job's parts sent ~6,000 of them (one per bucket a part touches): 384 with 16 buckets a key, 2.48 → 2.44 s."""
    fits = KEY_ROWS * BUCKETS // max(1, int(rows_estimate))
    count = 1
    while count * 2 <= min(fits, MAX_BUCKETS_PER_KEY):
        count *= 2
    return count


def bucket_of(digest: bytes) -> int:
    return int.from_bytes(digest[:4], "big") % BUCKETS


def bucketed(entries: Iterable[Entry]) -> dict[int, list[Entry]]:
    """Entries by bucket: what one batch sends to the grouping step (one element per bucket it touches)."""
    out: dict[int, list[Entry]] = {}
    for entry in entries:
        out.setdefault(bucket_of(entry[0]), []).append(entry)
    return out


@dataclasses.dataclass(frozen=True)
class DuplicateGroup:
    """Rows with the same content: members (split, row id) sorted by row id; the first is kept."""

    group_id: str
    kind: str
    members: tuple[tuple[str, str], ...]
    places: tuple = ()  # duplicates="drop": each member's Place, in the order of `members`

    @property
    def kept(self) -> str:
        return self.members[0][1]

    @property
    def splits(self) -> set[str]:
        return {split for split, _ in self.members}

    @property
    def leaks(self) -> bool:
        return TRAIN in self.splits and bool(self.splits & {VALIDATION, TEST})

    def dropped(self) -> Iterator[tuple[Place, str]]:
        """(place, discard reason) of every member but the kept one (duplicates="drop")."""
        reason = f"{DROPPED_REASON} {self.kept}"
        for place in self.places[1:]:
            yield place, reason

    def csv_rows(self) -> list[list[str]]:
        leak = "yes" if self.leaks else "no"
        return [[self.group_id, self.kind, split, row, "yes" if row == self.kept and i == 0 else "no", leak]
                for i, (split, row) in enumerate(self.members)]


class DigestBlock:
    """Image-free rows' entries column-wise (one batch's rows of one bucket, or of a span of buckets:
    `blocks_by_bucket`): their 16-byte digests concatenated, their split, and their row numbers in the
    source part `part` — no python object per row; row ids ("<part> row <i>") are made only for rows found
    in a group.

    `rows` (int64) and `places` (duplicates="drop": int64 (rows, 3) of piece index into `pieces`, record
    number, unknown labels) are given as arrays or in their packed form (`packed_ints` bytes; places as
    a tuple of three packed columns), and unpacked on first use: a block crosses pickle in its packed
    form (its part's quality file; a part's blocks cross Beam's shuffle as those bytes), and only a block
    with a duplicate needs its row numbers."""

    __slots__ = ("part", "split", "digests", "pieces", "source", "_rows", "_places")

    def __init__(self, part: str, split: str, digests: bytes, rows: Union[np.ndarray, bytes],
                 places: Union[np.ndarray, tuple[bytes, ...], None] = None, pieces: tuple[str, ...] = (),
                 source: str = "") -> None:
        self.part, self.split, self.digests = part, split, digests
        self.pieces = pieces  # the piece file names `places` index
        self.source = source  # the source part's key (tfrecorder.format.resume_files.part_key): where cells are read back
        self._rows, self._places = rows, places

    @property
    def size(self) -> int:
        return len(self.digests) // 16

    @property
    def rows(self) -> np.ndarray:
        if isinstance(self._rows, bytes):
            self._rows = unpacked_ints(self._rows)
        return self._rows

    @property
    def places(self) -> Optional[np.ndarray]:
        if isinstance(self._places, tuple):
            self._places = np.column_stack([unpacked_ints(column) for column in self._places]).reshape(-1, 3)
        return self._places

    def __repr__(self) -> str:
        return f"DigestBlock({self.part!r}, {self.split!r}, {self.size} rows)"

    def __reduce__(self) -> tuple:
        """Pickled in its packed form: a numpy array's own pickling costs tens of microseconds a block, and
        Beam's in-process runner holds the grouping's whole input several times over as pickled bytes at
        its peak: ascending row numbers go as 16-bit steps, places as the narrowest integers holding them."""
        rows = self._rows if isinstance(self._rows, bytes) else packed_ints(self._rows)
        places = self._places
        if places is not None and not isinstance(places, tuple):
            places = tuple(packed_ints(column) for column in np.asarray(places).reshape(-1, 3).T)
        return _packed_block, (self.part, self.split, self.digests, rows, places, self.pieces, self.source)

    def entries(self, chosen: Iterable[int]) -> Iterator[Entry]:
        rows, places = self.rows, self.places
        for index in chosen:
            row = int(rows[index])
            entry = (self.digests[16 * index:16 * index + 16], self.split, f"{self.part} row {row}")
            if places is None:
                yield entry
            else:
                piece, record, unknown = (int(value) for value in places[index])
                yield (*entry, (self.pieces[piece], record, unknown, None, self.source, row))


def _packed_block(part: str, split: str, digests: bytes, rows: bytes, places: Optional[tuple[bytes, ...]],
                  pieces: tuple[str, ...], source: str) -> DigestBlock:
    """A DigestBlock from its pickled form (DigestBlock.__reduce__), unpacked when first used."""
    return DigestBlock(part, split, digests, rows, places, pieces, source)


class DigestBlocks(list):
    """One bucket's DigestBlocks (of one flush or one part) pickled as one object: pickle's memo then writes
    what they share (their class, part label, source key) once, not once per block."""

    def __reduce__(self) -> tuple:
        return DigestBlocks, (list(self),)


_WIDTHS = (np.dtype("<u1"), np.dtype("<u2"), np.dtype("<u4"))
_RAW, _ABSOLUTE, _STEPS = 0, 1, 2  # packed_ints' forms (the first byte's high nibble; its low one: item size)


def _narrowest(largest: int) -> Optional[np.dtype]:
    return next((width for width in _WIDTHS if largest < 1 << (8 * width.itemsize)), None)


def packed_ints(values: np.ndarray) -> bytes:
    """Integers (int64) in few bytes, whichever of three forms is shortest: as int64 (raw), as the narrowest
    unsigned integers holding them (absolute), or — ascending values, such as a block's row numbers — the
    first as int64 and the steps between them as the narrowest unsigned integers holding those (steps).
    One byte says which form and width; `unpacked_ints` reverses it."""
    values = np.asarray(values, dtype=np.int64)
    forms = [bytes([_RAW << 4 | 8]) + values.astype("<i8", copy=False).tobytes()]
    if values.size and int(values.min()) >= 0:
        width = _narrowest(int(values.max()))
        if width is not None:
            forms.append(bytes([_ABSOLUTE << 4 | width.itemsize]) + values.astype(width).tobytes())
    if values.size > 1:
        steps = np.diff(values)
        width = _narrowest(int(steps.max())) if int(steps.min()) >= 0 else None
        if width is not None:
            forms.append(bytes([_STEPS << 4 | width.itemsize]) + int(values[0]).to_bytes(8, "little", signed=True)
                         + steps.astype(width).tobytes())
    return min(forms, key=len)


def unpacked_ints(data: bytes) -> np.ndarray:
    """The int64 array `packed_ints` packed."""
    form, size = data[0] >> 4, data[0] & 15
    if form == _RAW:
        return np.frombuffer(data, dtype="<i8", offset=1).astype(np.int64)
    width = np.dtype(f"<u{size}")
    if form == _ABSOLUTE:
        return np.frombuffer(data, dtype=width, offset=1).astype(np.int64)
    if form != _STEPS:
        raise ValueError(f"not a packed_ints form: {data[0]:#x}")
    steps = np.frombuffer(data, dtype=width, offset=9)
    out = np.empty(len(steps) + 1, dtype=np.int64)
    out[0] = int.from_bytes(data[1:9], "little", signed=True)
    np.cumsum(steps, dtype=np.int64, out=out[1:])
    out[1:] += out[0]
    return out


RECORD_DIGEST_KEYS = ("tfrecorder:row:0", "tfrecorder:row:1")  # 16 bytes each: SipHash-2-4's keys


def record_digests(records: Iterable) -> bytes:
    """The 128-bit digests of serialized Examples of an image-free table (an Arrow binary array, a NumPy
    object array of bytes as its `to_numpy` gives, or bytes / memoryviews), back to back, 16 bytes each:
    two 64-bit SipHash-2-4 halves under two keys (pandas' hash_array, a C loop: a third of a BLAKE2b call
    per record, which a table of millions of rows pays per row). Equal records, equal digests; different
    ones collide only by chance (2**-128)."""
    import pandas as pd

    if isinstance(records, np.ndarray):
        objects = records
    elif hasattr(records, "to_numpy"):
        objects = records.to_numpy(zero_copy_only=False)
    else:
        listed = [bytes(record) for record in records]
        objects = np.empty(len(listed), dtype=object)
        objects[:] = listed
    halves = [pd.util.hash_array(objects, hash_key=key, categorize=False) for key in RECORD_DIGEST_KEYS]
    return np.column_stack(halves).astype("<u8").tobytes() if len(objects) else b""


def blocks_by_bucket(part: str, split: str, digests: Union[bytes, Sequence[bytes]], rows: np.ndarray,
                     places: Optional[np.ndarray] = None, pieces: tuple[str, ...] = (),
                     source: str = "", span: int = 1) -> dict[int, DigestBlock]:
    """One batch's image-free rows as a DigestBlock per bucket (buckets as `bucket_of` gives them), with
    their places when given (duplicates="drop": see DigestBlock). `digests`: the rows' 16-byte digests,
    as a list or already joined.

    With `span` (a power of two dividing BUCKETS: the job's `buckets_per_key`), one block holds the rows of
    `span` consecutive buckets, keyed by the first: a committed part sends those buckets under one grouping
    key anyway (part_commits.part_quality), where the grouping finds a key's groups at once and files each
    under its own bucket (find_duplicates.write_buckets). A million-row CSV's 12 parts made 36,864 blocks of
    ~27 rows, and each block costs microseconds to make, pickle, unpickle and search: 36 a key cost less.
    Rows keep their order within a block (the sort is stable), so their numbers pack as steps."""
    joined = digests if isinstance(digests, bytes) else b"".join(digests)
    keys = (np.frombuffer(joined, dtype=">u4").reshape(-1, 4)[:, 0] % BUCKETS // span).astype(np.uint16)
    order = np.argsort(keys, kind="stable")  # 16-bit keys: numpy's stable sort is a radix sort
    cells = np.frombuffer(joined, dtype="V16")[order].tobytes()
    bounds = np.flatnonzero(np.diff(keys[order])) + 1
    starts = [0, *bounds.tolist()]
    ends = [*bounds.tolist(), len(order)]
    packed_rows = _packed_runs(np.asarray(rows, dtype=np.int64)[order], starts, ends)
    packed_places = None if places is None else _packed_columns(np.asarray(places, dtype=np.int64)[order], starts, ends)
    out = {}
    for index, (start, end) in enumerate(zip(starts, ends)):
        if end > start:
            out[int(keys[order[start]]) * span] = DigestBlock(
                part, split, cells[16 * start:16 * end], packed_rows[index],
                None if packed_places is None else packed_places[index], pieces, source)
    return out


def group_bucket(group: DuplicateGroup) -> int:
    """The bucket of an exact group (`bucket_of` its digest, whose first 8 bytes its id spells in hex)."""
    return int(group.group_id[:8], 16) % BUCKETS


def _packed_runs(values: np.ndarray, starts: list[int], ends: list[int]) -> list[bytes]:
    """`packed_ints` of each (non-empty) run values[start:end], the same bytes, with the work done on the
    whole array: each run's extremes by `reduceat`, the values and steps converted once per width, each
    run's bytes a slice (a block holds a run per bucket: 1,024 calls of packed_ints cost ~20 ms)."""
    if not len(values):
        return []
    first = np.asarray(starts, dtype=np.int64)
    steps = np.zeros(len(values), dtype=np.int64)
    steps[1:] = np.diff(values)
    steps[first] = 0  # a run's first value has no step
    extremes = [reduce.reduceat(array, first).tolist() for array in (values, steps)
                for reduce in (np.minimum, np.maximum)]
    as_values = {width.itemsize: values.astype(width).tobytes() for width in _WIDTHS}
    as_values[8] = values.astype("<i8").tobytes()
    as_steps = {width.itemsize: steps.astype(width).tobytes() for width in _WIDTHS}
    out = []
    for start, end, low, high, low_step, high_step in zip(starts, ends, *extremes):
        count = end - start
        best, size = (_RAW, 8), 1 + 8 * count  # packed_ints' forms, its order on a tie
        width = _narrowest(high) if low >= 0 else None
        if width is not None and 1 + width.itemsize * count < size:
            best, size = (_ABSOLUTE, width.itemsize), 1 + width.itemsize * count
        width = _narrowest(high_step) if count > 1 and low_step >= 0 else None
        if width is not None and 9 + width.itemsize * (count - 1) < size:
            best = (_STEPS, width.itemsize)
        form, item = best
        if form == _STEPS:
            out.append(bytes([_STEPS << 4 | item]) + values[start:start + 1].astype("<i8").tobytes()
                       + as_steps[item][item * (start + 1):item * end])
        else:
            out.append(bytes([form << 4 | item]) + as_values[item][item * start:item * end])
    return out


def _packed_columns(places: np.ndarray, starts: list[int], ends: list[int]) -> list[tuple[bytes, ...]]:
    """Each run's places as three `packed_ints` columns, each column in one width for every run (the
    narrowest holding the column; int64 when negative)."""
    columns = []
    for column in places.reshape(-1, 3).T:
        width = _narrowest(int(column.max())) if column.size and int(column.min()) >= 0 else None
        if width is None:
            columns.append((bytes([_RAW << 4 | 8]), column.astype("<i8").tobytes(), 8))
        else:
            columns.append((bytes([_ABSOLUTE << 4 | width.itemsize]), column.astype(width).tobytes(), width.itemsize))
    return [tuple(head + data[size * start:size * end] for head, data, size in columns)
            for start, end in zip(starts, ends)]


def _duplicated_in_blocks(blocks: list[DigestBlock]) -> Iterator[Entry]:
    """The entries of block rows whose digest's first 8 bytes occur more than once among the blocks (found
    with numpy on those 8 bytes as integers: a sort, no comparison of 16-byte cells; `groups_in` then
    groups them by their whole digest, so a row sharing only the prefix stays alone)."""
    prefixes = np.frombuffer(b"".join(block.digests for block in blocks), dtype=np.uint64)[::2]
    if prefixes.size < 2:
        return
    ordered = np.sort(prefixes)
    same = ordered[1:] == ordered[:-1]
    if not same.any():  # the common case: no duplicate in the bucket
        return
    repeated = np.isin(prefixes, ordered[1:][same])
    start = 0
    for block in blocks:
        size = block.size
        chosen = repeated[start:start + size]
        if chosen.any():
            yield from block.entries(np.flatnonzero(chosen).tolist())
        start += size


def groups_in(entries: Iterable) -> list[DuplicateGroup]:
    """The groups (two or more rows with one digest) among one bucket's entries (tuples, or DigestBlocks of
    image-free rows), sorted by digest."""
    tuples, blocks = [], []
    for entry in entries:
        (blocks if isinstance(entry, DigestBlock) else tuples).append(entry)
    if blocks:
        tuples.extend(_duplicated_in_blocks(blocks))
    by_digest: dict[bytes, list[tuple]] = {}
    for digest, split, row, *place in tuples:
        by_digest.setdefault(digest, []).append((split, row, *place))
    groups = []
    for digest in sorted(by_digest):
        members = by_digest[digest]
        if len(members) > 1:
            unique = tuple(sorted(set(members), key=lambda member: member_order(*member)))
            if len(unique) > 1:  # a replayed bundle's entry is not a duplicate of itself
                groups.append(DuplicateGroup(digest.hex()[:16], EXACT, tuple(m[:2] for m in unique),
                                             tuple(m[2] for m in unique if len(m) > 2)))
    return groups


@dataclasses.dataclass
class DuplicateCounts:
    """What metadata.json says about duplicates (the "duplicates" entry)."""

    groups: int = 0
    rows: int = 0  # rows in some group
    redundant: int = 0  # rows beyond the first of each group (what duplicates="drop" removes)
    leaking_groups: int = 0
    leaking_rows: int = 0

    def add(self, groups: Sequence[DuplicateGroup]) -> "DuplicateCounts":
        for group in groups:
            self.groups += 1
            self.rows += len(group.members)
            self.redundant += len(group.members) - 1
            if group.leaks:
                self.leaking_groups += 1
                self.leaking_rows += len(group.members)
        return self

    def merge(self, other: "DuplicateCounts") -> "DuplicateCounts":
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))
        return self

    def to_json(self) -> dict[str, int]:
        return dataclasses.asdict(self)


def leak_warning(counts: dict) -> str:
    """The one warning line a result shows when duplicate groups (exact, and near in counts["near"]) span
    TRAIN and VALIDATION/TEST ('' when none, or when duplicates="drop" left one row of each: "dropped")."""
    near = counts.get("near") or {}
    groups = counts.get("leaking_groups", 0) + near.get("leaking_groups", 0)
    if not groups or "dropped" in counts:  # duplicates="drop": one row of each group is left, in one split
        return ""
    rows = counts.get("leaking_rows", 0) + near.get("leaking_rows", 0)
    kinds = f" ({near.get('leaking_groups', 0)} of them near-duplicates)" if near.get("leaking_groups") else ""
    return (f"train/test leakage: {groups} duplicate group{'s' if groups != 1 else ''}{kinds} "
            f"({rows} rows) span TRAIN and VALIDATION/TEST (see duplicates.csv)")
