"""The duplicates stage: content digests grouped by bucket inside the pipeline, groups written to duplicates.csv (issue 29).

    encoders ─(bucket, [(digest, split, row id)])─► GroupByKey(bucket) ─► groups of each bucket written to
    _work/duplicates/exact-NNNNN.csv (one whole-file write, same bytes on a retry) ─► their descriptors
    (O(buckets)) ─► duplicates.csv (bucket files concatenated in bucket order) + counts for metadata.json
    encoders ─(bucket, [(band key, home?, (phash, digest, split, row id))])─► GroupByKey ─► confirmed pairs
    per LSH bucket (tfrecorder.rows.near_duplicates) ─► GroupByKey(pair): each pair once ─► one key: connected
    components (state: the images that have a near-duplicate) ─► GroupByKey(bucket of the group id) ─►
    _work/duplicates/near-NNNNN.csv ─► (the same merge, after the exact groups)

A bucket holds about rows / BUCKETS entries (tfrecorder.rows.duplicate_groups), so no step holds
every row; the merge streams the bucket files. The first leaking groups travel with the counts, so
that duplicates="fail" can name them.
"""
from __future__ import annotations

import csv
import dataclasses
import io
from typing import Iterable, Optional

import apache_beam as beam
from apache_beam.pvalue import AsList

from tfrecorder.format.statistics_files import DUPLICATES_FILE
from tfrecorder.io import storage
from tfrecorder.options.job_config import JobConfig
from tfrecorder.rows.duplicate_groups import BUCKETS, CSV_COLUMNS, EXACT, DuplicateCounts, DuplicateGroup, groups_in
from tfrecorder.rows.near_duplicates import NEAR, groups_of_pairs, near_pairs, pair_key

LEAKS_NAMED = 5  # leaking groups carried to the end (for the error of duplicates="fail")


@dataclasses.dataclass(frozen=True)
class DuplicateBucket:
    """One bucket's groups: its csv part (without header), their counts and the first leaking groups."""

    bucket: int
    path: str
    kind: str
    counts: DuplicateCounts
    leaks: tuple[tuple[tuple[str, str], ...], ...]


def bucket_path(config: JobConfig, bucket: int, kind: str = EXACT) -> str:
    return storage.join(config.work_dir, "duplicates", f"{kind}-{bucket:05d}.csv")


def write_bucket(item: tuple[int, Iterable[list]], config: JobConfig) -> Iterable[DuplicateBucket]:
    """Group one bucket's entries; write its groups (if any) and yield their descriptor."""
    bucket, batches = item
    yield from write_groups(bucket, groups_in(entry for batch in batches for entry in batch), config, EXACT)


def write_groups(bucket: int, groups: list[DuplicateGroup], config: JobConfig, kind: str) -> Iterable[DuplicateBucket]:
    """Write one bucket's groups of one kind (sorted: the same bytes on a retry); yield their descriptor."""
    if not groups:
        return
    groups = sorted(groups, key=lambda group: group.group_id)
    text = io.StringIO()
    writer = csv.writer(text)
    for group in groups:
        writer.writerows(group.csv_rows())
    path = bucket_path(config, bucket, kind)
    storage.write_bytes(path, text.getvalue().encode("utf-8"))
    leaks = tuple(group.members for group in groups if group.leaks)[:LEAKS_NAMED]
    yield DuplicateBucket(bucket, path, kind, DuplicateCounts().add(groups), leaks)


def confirmed_pairs(item: tuple[int, Iterable[list]], max_distance: int) -> Iterable[tuple[bytes, tuple]]:
    """One LSH bucket's confirmed near-duplicate pairs, keyed by pair (a pair found in several buckets is one)."""
    _bucket, batches = item
    for pair in near_pairs((keyed for batch in batches for keyed in batch), max_distance):
        yield pair_key(pair), pair


def near_groups_of(item: tuple[None, Iterable[tuple[bytes, Iterable[tuple]]]]) -> Iterable[tuple[int, DuplicateGroup]]:
    """Every distinct pair → groups (connected components), each keyed by the bucket its file is written in."""
    _key, pairs = item
    for group in groups_of_pairs(next(iter(found)) for _pair, found in pairs):
        yield int(group.group_id[:8], 16) % BUCKETS, group


def write_near_bucket(item: tuple[int, Iterable[DuplicateGroup]], config: JobConfig) -> Iterable[DuplicateBucket]:
    bucket, groups = item
    yield from write_groups(bucket, list(groups), config, NEAR)


def write_duplicates_file(buckets: Iterable[DuplicateBucket], destination: str) -> dict:
    """duplicates.csv from the bucket parts (header, then buckets in order); returns the counts and the
    first leaking groups: {"counts": {...}, "leaks": [[[split, row], ...], ...]}."""
    ordered = sorted(buckets, key=lambda b: (b.kind != EXACT, b.bucket))  # exact groups first
    counts = {EXACT: DuplicateCounts(), NEAR: DuplicateCounts()}
    leaks: list = []
    with storage.open_write(destination) as out:
        out.write((",".join(CSV_COLUMNS) + "\r\n").encode("utf-8"))
        for part in ordered:
            counts[part.kind].merge(part.counts)
            leaks.extend([list(member) for member in group] for group in part.leaks)
            with storage.open_read(part.path) as stream:
                while True:
                    chunk = stream.read(1 << 20)
                    if not chunk:
                        break
                    out.write(chunk)
    return {"counts": {**counts[EXACT].to_json(), NEAR: counts[NEAR].to_json()}, "leaks": leaks[:LEAKS_NAMED]}


def find_duplicates(keys: beam.PCollection, config: JobConfig, near_keys: Optional[beam.PCollection] = None,
                    start: Optional[beam.PCollection] = None) -> beam.PCollection:
    """The single summary of the job's duplicates (after duplicates.csv is written into the job's temp dir):
    exact groups from `keys`, near-duplicate groups from `near_keys` (LSH entries) when given."""
    buckets = (
        keys
        | "GroupDigests" >> beam.GroupByKey()
        | "WriteDuplicateBuckets" >> beam.FlatMap(write_bucket, config)
    )
    if near_keys is not None:
        near = (
            near_keys
            | "GroupBands" >> beam.GroupByKey()
            | "NearPairs" >> beam.FlatMap(confirmed_pairs, config.near_duplicate_distance)
            | "SamePairs" >> beam.GroupByKey()
            | "AllPairs" >> beam.Map(lambda pair: (None, pair))
            | "JoinPairs" >> beam.GroupByKey()
            | "NearGroups" >> beam.FlatMap(near_groups_of)
            | "GroupNearGroups" >> beam.GroupByKey()
            | "WriteNearBuckets" >> beam.FlatMap(write_near_bucket, config)
        )
        buckets = (buckets, near) | "AllDuplicateBuckets" >> beam.Flatten()
    start = start if start is not None else keys.pipeline | "DuplicatesStart" >> beam.Create([None])
    destination = storage.join(config.temp_dir, DUPLICATES_FILE)
    return start | "WriteDuplicates" >> beam.Map(lambda _, parts: write_duplicates_file(parts, destination),
                                                 AsList(buckets))
