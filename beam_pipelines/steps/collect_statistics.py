"""The statistics side of the encode stage: per batch, what the encoder already holds (row values, image
headers and bytes) feeds bounded sketches and content digests (issue 29).

The encoders call a `WrittenRows` collector for each batch: it adds the written rows to the bundle's
DatasetStatistics and keeps each row's content digest (with near-duplicate search also its perceptual
hash's band keys). All of it leaves on one tagged output, QUALITY, as (key, value) pairs that one
GroupByKey brings together (beam_pipelines.steps.find_duplicates): (STATISTICS_KEY, the bundle's
statistics) once per bundle, (bucket, digests) and (NEAR_OFFSET + bucket, band keys) once FLUSH_ENTRIES
are held and at the bundle's end — Beam's per-element cost is paid per bucket and flush, not per row,
and one grouping step serves statistics, exact and near duplicates (each step of the in-process runner
has a cost of its own). Nothing here grows with the table: a bundle's statistics are sketches, and at
most FLUSH_ENTRIES digests wait.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence, Union

import apache_beam as beam
import numpy as np
import pyarrow as pa

from tfrecorder.core.schema import Schema
from tfrecorder.rows.dataset_statistics import DatasetStatistics
from tfrecorder.io.perceptual_hash import perceptual_hash
from tfrecorder.rows import near_duplicates
from tfrecorder.rows.near_duplicates import BUCKET_SHIFT
from tfrecorder.rows.duplicate_groups import (BUCKETS, DigestBlocks, blocks_by_bucket, bucketed, content_digest,
                                              record_digests)

QUALITY = "quality"  # the encoders' tagged output of (key, value) for beam_pipelines.steps.find_duplicates
STATISTICS_KEY = -1  # (STATISTICS_KEY, a bundle's DatasetStatistics)
NEAR_OFFSET = BUCKETS  # (NEAR_OFFSET + LSH bucket, band keys); exact digests keep their bucket 0…BUCKETS-1
assert near_duplicates.BUCKETS <= NEAR_OFFSET  # LSH buckets (fewer for a small job) stay below 2 × NEAR_OFFSET
NEAR_ENTRIES = -2  # (NEAR_ENTRIES, [(phash, digest, split, row id)]): a part's batch, bucketed with the part
# (BUCKET_KEYS + bucket // buckets_per_key, the pickle of [(bucket, DigestBlocks)]): a committed part's exact
# buckets, several a key (part_commits.part_quality); above every LSH key (below 2 × NEAR_OFFSET)
BUCKET_KEYS = 2 * NEAR_OFFSET
FLUSH_ENTRIES = 32_768  # digests (and band keys) held before they leave by bucket: ~3 MB, and ~1 element per 32 rows
# image-free rows' digests held column-wise (16 bytes of digest and 8 of row number per row, 24 more with
# places): ~12 MB (25 MB with duplicates="drop") before they leave — few flushes, so few grouping elements
# (each flush sends up to BUCKETS of them) and large DigestBlocks (Beam's and pickle's cost is per element)
FLUSH_BLOCK_ROWS = FLUSH_ENTRIES * 16
STATISTICS_ROWS = 1_024  # rows of images held (their cells and image facts: ~0.5 MB) before they enter the sketches


class WrittenRows:
    """Collects one encoder's written rows: statistics for the bundle, digests by bucket (`flush`)."""

    def __init__(self, schema: Schema, near_duplicates: bool = False, near_by_part: bool = False,
                 statistics: Callable[[Schema], DatasetStatistics] = DatasetStatistics,
                 near_shift: int = BUCKET_SHIFT, buckets_per_block: int = 1) -> None:
        self.schema = schema
        self.near_duplicates = near_duplicates  # hash each row's first image perceptually (NEAR_KEYS)
        self.near_shift = near_shift  # the job's LSH bucket shift (JobConfig.near_bucket_shift)
        # a resumable job's batches: hashes leave as they are (NEAR_ENTRIES), banded once for the whole part
        # (merged_by_key) rather than into ~1,000 small per-bucket blocks per batch
        self.near_by_part = near_by_part
        # image-free rows' digests: buckets per DigestBlock (a committed part's: its job's buckets_per_key,
        # the buckets it sends under one grouping key; duplicate_groups.blocks_by_bucket)
        self.buckets_per_block = buckets_per_block
        self._statistics_of = statistics  # the accumulator's class (detection jobs: DetectionStatistics)
        self.statistics = statistics(schema)
        self._rows: dict[str, list] = {}  # rows held for the statistics (added STATISTICS_ROWS at a time)
        self._rows_held = 0  # rows in _rows
        self._images: dict[str, dict[str, list]] = {}
        self._entries: list[tuple] = []
        # image-free rows by (part label, split, part key: duplicates="drop"): (digests, row numbers, places, pieces)
        self._blocks: dict[tuple[str, str, str], tuple[list, list, list, list]] = {}
        self._held = 0  # block rows held
        self._near: list[tuple] = []

    def add_row(self, split: str, row: Mapping[str, Any], images: Sequence[tuple[str, str, Any, bytes]],
                example: Any, phash: Optional[int] = None, digest: Optional[bytes] = None,
                place: Optional[tuple] = None) -> None:
        """A row written to `split`: `images` as (column, uri, ImageInfo, bytes written); `example` its
        serialized Example (bytes or a list of pieces), the content of image-free rows; `phash` its first
        image's perceptual hash when the decode pool computed it (else computed here when needed);
        `digest` the images' content digest when the encoder computed it (its split chosen by it);
        `place` where the row's record is (duplicates="drop": tfrecorder.rows.duplicate_groups.Place),
        carried with its digest so that a dropped duplicate can be taken out of its piece."""
        extra = () if place is None else (place,)
        self._rows.setdefault(split, []).append(row)
        self._rows_held += 1
        facts = self._images.setdefault(split, {})
        for column, _uri, info, data in images:
            facts.setdefault(column, []).append((info.format, info.height, info.width, info.channels, len(data)))
        if images:
            digest = digest or content_digest(*(data for _c, _u, _i, data in images))
            row_id = " ".join(uri for _c, uri, _i, _d in images)
            if self.near_duplicates and phash is None:
                phash = perceptual_hash(images[0][3])
            if phash is not None:
                self._near.append((phash, digest, split, row_id, *extra))
        else:
            content = example if isinstance(example, (bytes, bytearray)) else b"".join(bytes(p) for p in example)
            digest = content_digest(content)
            row_id = json.dumps({k: str(v) for k, v in row.items()}, sort_keys=True)[:200]
        self._entries.append((digest, split, row_id, *extra))

    def add_records(self, split: str, batch: pa.RecordBatch, records: Union[pa.Array, np.ndarray], part: str,
                    rows: np.ndarray, places: Optional[tuple[str, Sequence[str], np.ndarray]] = None) -> None:
        """Image-free rows written to `split`, column-wise: `batch` their values, `records` their Examples
        (Arrow binary, or each as bytes in an object array), `rows` their numbers in the source part `part`
        (their digests kept as DigestBlocks); with duplicates="drop" `places` is (the source part's key,
        piece file names, int64 (rows, 3) of piece index into those names, record number in the piece,
        unknown labels)."""
        self.statistics.add_batch(split, batch)
        held = self._blocks.setdefault((part, split, "" if places is None else places[0]), ([], [], [], []))
        held[0].append(record_digests(records))
        held[1].append(np.asarray(rows, dtype=np.int64))
        if places is not None:
            _source, names, found = places
            indices = np.array([_index_of(held[3], name) for name in names], dtype=np.int64)
            held[2].append(np.column_stack([indices[found[:, 0]], found[:, 1:]]) if len(found) else found)
        self._held += len(records)

    def end_batch(self) -> Iterator[beam.pvalue.TaggedOutput]:
        """Once STATISTICS_ROWS rows are held, add them to the statistics (a sketch's cost is mostly paid
        per call: a few calls per thousand rows, not per 64-row batch); once FLUSH_ENTRIES digests are
        held, yield them by bucket (Beam's cost is paid per element: one per bucket per flush, not one per
        row)."""
        if self._rows_held >= STATISTICS_ROWS:
            self._add_held_rows()
        if (len(self._entries) >= FLUSH_ENTRIES or self._held >= FLUSH_BLOCK_ROWS
                or len(self._near) * 68 >= FLUSH_ENTRIES * 4):
            yield from self.flush()

    def flush(self) -> Iterator[beam.pvalue.TaggedOutput]:
        """Every digest and band key held, by bucket (at a flush, and when the bundle ends)."""
        entries, self._entries = self._entries, []
        found_by_bucket = bucketed(entries)
        for (part, split, source), (digests, rows, places, pieces) in self._blocks.items():
            located = np.concatenate(places) if places else None
            for bucket, block in blocks_by_bucket(part, split, b"".join(digests), np.concatenate(rows), located,
                                                  tuple(pieces), source, self.buckets_per_block).items():
                found_by_bucket.setdefault(bucket, DigestBlocks()).append(block)  # pickled as one
        self._blocks, self._held = {}, 0
        for bucket, found in found_by_bucket.items():
            yield beam.pvalue.TaggedOutput(QUALITY, (bucket, found))
        near, self._near = self._near, []
        if self.near_by_part:
            if near:
                yield beam.pvalue.TaggedOutput(QUALITY, (NEAR_ENTRIES, near))
            return
        for bucket, found in near_duplicates.bucketed(near, self.near_shift).items():
            yield beam.pvalue.TaggedOutput(QUALITY, (NEAR_OFFSET + bucket, found))

    def _add_held_rows(self) -> None:
        """Add the rows held since the last call to the statistics."""
        for split, rows in self._rows.items():
            self.statistics.add_rows(split, rows, self._images.get(split, {}))
        self._rows, self._images, self._rows_held = {}, {}, 0

    def take_statistics(self) -> Optional[beam.pvalue.TaggedOutput]:
        """The bundle's statistics ((STATISTICS_KEY, statistics) on QUALITY), and a fresh accumulator for
        the next bundle (rows and digests still held are dropped: call `finish` when the bundle succeeded)."""
        found, self.statistics = self.statistics, self._statistics_of(self.schema)
        self._entries, self._near, self._blocks, self._held = [], [], {}, 0
        self._rows, self._images, self._rows_held = {}, {}, 0
        return beam.pvalue.TaggedOutput(QUALITY, (STATISTICS_KEY, found)) if found.rows else None

    def finish(self) -> Iterator[beam.pvalue.TaggedOutput]:
        """The bundle's last outputs: the digests still held, then its statistics."""
        self._add_held_rows()
        yield from self.flush()
        statistics = self.take_statistics()
        if statistics is not None:
            yield statistics


def merged_by_key(pairs: Sequence[tuple[int, Any]], near_shift: int = BUCKET_SHIFT) -> list[tuple[int, Any]]:
    """Digest and band-key pairs of several flushes (a part's batches) with one pair per key: a bucket's
    digest lists concatenated, its NearBlocks joined, the hashes of NEAR_ENTRIES banded — the grouping
    step then gets one element per bucket per part instead of one per batch (Beam's cost is paid per
    element; `near_shift`: the job's LSH bucket shift). In key order."""
    by_key: dict[int, list] = {}
    near = [entry for key, value in pairs if key == NEAR_ENTRIES for entry in value]
    for bucket, block in near_duplicates.bucketed(near, near_shift).items():
        by_key.setdefault(NEAR_OFFSET + bucket, []).append(block)
    for key, value in pairs:
        if key != NEAR_ENTRIES:
            by_key.setdefault(key, []).append(value)
    return [(key, near_duplicates.joined(values) if key >= NEAR_OFFSET else _concatenated(values))
            for key, values in sorted(by_key.items())]


def _concatenated(values: Sequence[list]) -> list:
    """A bucket's lists of entries as one (DigestBlocks when they all are: pickled as one)."""
    joined = [item for value in values for item in value]
    return DigestBlocks(joined) if all(isinstance(value, DigestBlocks) for value in values) else joined


def _index_of(names: list[str], name: str) -> int:
    """`name`'s index in `names`, appended when new (a block's piece names: a few per part)."""
    if name not in names:
        names.append(name)
    return names.index(name)


def part_label(part: Any, work_dir: str) -> str:
    """How duplicates.csv names a source part of an image-free table (its rows are "<part> row <i>", i
    counted from 0 within the part): a Parquet file's row group, a CSV's byte slice, a DataFrame's row group."""
    path, group = getattr(part, "path", None), getattr(part, "row_group", None)
    if path is not None and group is not None:
        staged = str(path).startswith(work_dir)  # a DataFrame, staged as Parquet by the driver
        return f"DataFrame row group {group}" if staged else f"{str(path).rsplit('/', 1)[-1]} row group {group}"
    start = getattr(part, "start", None)
    if start is not None:
        return f"CSV bytes from {start}"
    return str(part)[:120]


def first_row_number(part: Any) -> int:
    """The row number (in `part_label`'s names) of the part's first row: 0, or a slice's first row in its
    Parquet row group, so that rows keep the names the whole row group gives them."""
    return getattr(part, "first_row", 0)

