"""The statistics and duplicates stage: the encoders' QUALITY output grouped by key inside the pipeline (issue 29).

    encoders ─QUALITY─► GroupByKey ─┬ (STATISTICS_KEY) bundles' sketches merged ─────────────► finalize (statistics)
                                    ├ (exact bucket) [(digest, split, row id[, place])] → groups → _work/duplicates/
                                    │   exact-NNNNN.csv (one whole-file write, same bytes on a retry) → descriptor
                                    └ (LSH bucket) [(band key, home?, (phash, digest, split, row id))] → confirmed
                                        pairs ─► GroupByKey(one key) → connected components → near-00000.csv
    descriptors (O(buckets)) ─► finalize: duplicates.csv (exact files in bucket order, then near) + counts
    duplicates="drop": every group's rows but the kept one ─DROPPED (by piece)─► steps/drop_duplicates

A bucket holds about rows / BUCKETS entries (tfrecorder.rows.duplicate_groups), so no step holds
every row; the merge streams the bucket files. The first leaking groups travel with the counts, so
that duplicates="fail" can name them.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import itertools
import pickle
from typing import Any, Iterable, Optional, Union

import apache_beam as beam
from apache_beam.pvalue import AsList, AsSingleton

from beam_pipelines.steps.collect_statistics import BUCKET_KEYS, NEAR_OFFSET, STATISTICS_KEY
from beam_pipelines.steps.part_commits import CommittedBuckets
from tfrecorder.io import storage
from tfrecorder.options.job_config import JobConfig
from tfrecorder.rows.dataset_statistics import merge_all
from tfrecorder.rows.duplicate_groups import (CSV_COLUMNS, EXACT, DuplicateCounts, DuplicateGroup, group_bucket,
                                              groups_in)
from tfrecorder.rows.near_duplicates import NEAR, candidate_keys, groups_of_pairs, near_pairs

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


def write_bucket(item: tuple[int, Iterable[list]], config: JobConfig) -> Iterable[Any]:
    """Group one bucket's entries; write its groups (if any) and yield their descriptor."""
    _bucket, batches = item
    yield from _write_exact_groups((entry for batch in batches for entry in batch), config)


def write_buckets(values: Iterable[Union[bytes, CommittedBuckets]], config: JobConfig) -> Iterable[Any]:
    """The exact buckets of one grouping key (BUCKET_KEYS + a range of buckets): each value a committed
    part's pickled [(bucket, DigestBlocks)] (part_commits.part_quality), or where it lies in the part's
    quality file (a local job: part_commits.quality_of). Grouped at once (equal digests share a bucket, so
    the key's groups are its buckets' groups; a block may span the key's buckets: blocks_by_bucket)."""
    yield from _write_exact_groups((block for value in values for _bucket, blocks in
                                    (value.load() if isinstance(value, CommittedBuckets) else pickle.loads(value))
                                    for block in blocks), config)


def _write_exact_groups(entries: Iterable, config: JobConfig) -> Iterable[Any]:
    """The exact groups among entries of one bucket or several; each bucket's written to its own file (the
    bucket of its digest: the same file whichever entries it was found among), with its descriptor."""
    by_bucket: dict[int, list[DuplicateGroup]] = {}
    for group in groups_in(entries):
        by_bucket.setdefault(group_bucket(group), []).append(group)
    for bucket in sorted(by_bucket):
        yield from write_groups(bucket, by_bucket[bucket], config, EXACT)


DROPPED = "dropped"  # tagged output (duplicates="drop"): (piece file name, [(record, unknown, cells, reason)]);
# an image-free row's cells are None, followed by (source part key, row number in the part)


def dropped_by_piece(groups: Iterable[DuplicateGroup]) -> Iterable[beam.pvalue.TaggedOutput]:
    """The rows duplicates="drop" removes from these groups (all members but the kept one), one
    element per piece they are in (beam_pipelines.steps.drop_duplicates joins them to their piece)."""
    by_piece: dict[str, list] = {}
    for group in groups:
        for (piece, record, unknown, cells, *source), reason in group.dropped():
            by_piece.setdefault(piece, []).append((record, unknown, cells, reason, *source))
    for piece in sorted(by_piece):
        yield beam.pvalue.TaggedOutput(DROPPED, (piece, by_piece[piece]))


def write_groups(bucket: int, groups: list[DuplicateGroup], config: JobConfig, kind: str) -> Iterable[Any]:
    """Write one bucket's groups of one kind (sorted: the same bytes on a retry); yield their descriptor
    (and, with duplicates="drop", the rows it drops: DROPPED)."""
    if not groups:
        return
    if config.duplicates == "drop":
        yield from dropped_by_piece(groups)
    groups = sorted(groups, key=lambda group: group.group_id)
    text = io.StringIO()
    writer = csv.writer(text)
    for group in groups:
        writer.writerows(group.csv_rows())
    path = bucket_path(config, bucket, kind)
    storage.write_bytes(path, text.getvalue().encode("utf-8"))
    leaks = tuple(group.members for group in groups if group.leaks)[:LEAKS_NAMED]
    yield DuplicateBucket(bucket, path, kind, DuplicateCounts().add(groups), leaks)


def write_near_groups(item: tuple[None, Iterable[tuple]], config: JobConfig) -> Iterable[Any]:
    """Every confirmed pair (repeats included: a pair several buckets found) → groups (connected
    components) → one file of near-duplicate groups."""
    _key, pairs = item
    yield from write_groups(0, groups_of_pairs(pairs), config, NEAR)


MERGED_STATISTICS, PAIRS = "merged_statistics", "pairs"


def statistics_in_order(values: Iterable[Any]) -> Iterable[Any]:
    """The statistics to merge: a resumable job's parts send (part key, statistics) and are merged in
    part-key order, so that order-dependent sketches (quantiles) come out the same however the parts
    were bundled or resumed (a list of one sketch set per part, tens of kilobytes each); other jobs'
    bundles send bare statistics, merged as they come (streamed)."""
    values = iter(values)
    first = next(values, None)
    if first is None:
        return []
    if not isinstance(first, tuple):
        return itertools.chain([first], values)
    keyed = [first, *values]
    keyed.sort(key=lambda item: item[0] if isinstance(item, tuple) else "")
    return [item[1] if isinstance(item, tuple) else item for item in keyed]


def quality_group(item: tuple[int, Iterable[Any]], config: JobConfig) -> Iterable[Any]:
    """One key of the encoders' QUALITY output, grouped: the merged statistics (tag MERGED_STATISTICS),
    an exact bucket's groups written (its DuplicateBucket; committed parts' buckets come several a key),
    or an LSH bucket's confirmed pairs (tag PAIRS)."""
    key, values = item
    if key == STATISTICS_KEY:
        yield beam.pvalue.TaggedOutput(MERGED_STATISTICS, merge_all(statistics_in_order(values), config.schema))
    elif key < NEAR_OFFSET:
        yield from write_bucket((key, values), config)
    elif key >= BUCKET_KEYS:
        yield from write_buckets(values, config)
    else:
        for pair in near_pairs(candidate_keys(values), config.near_duplicate_distance):
            yield beam.pvalue.TaggedOutput(PAIRS, (None, pair))


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


def quality_outputs(config: JobConfig, quality: beam.PCollection) -> dict:
    """finalize's keyword side inputs from the encoders' QUALITY output: `statistics` (AsSingleton: the
    merged DatasetStatistics, None when no row was written) and `duplicates` (AsList of DuplicateBucket;
    finalize merges them into duplicates.csv); none when the job computes no statistics
    (`config.statistics` False). One GroupByKey serves all three; near pairs take one more."""
    return quality_steps(config, quality)[0]


def quality_steps(config: JobConfig, quality: beam.PCollection) -> tuple[dict, Optional[beam.PCollection]]:
    """`quality_outputs`, and with duplicates="drop" the DROPPED rows of exact and near groups by piece
    (else None)."""
    if not config.statistics:
        return {}, None
    grouped = (
        quality
        | "GroupQuality" >> beam.GroupByKey()
        | "QualityGroups" >> beam.FlatMap(quality_group, config).with_outputs(
            MERGED_STATISTICS, PAIRS, DROPPED, main="buckets")
    )
    buckets, dropped = grouped.buckets, [grouped[DROPPED]]
    if config.near_duplicate_distance:
        near = (
            grouped[PAIRS]
            | "JoinPairs" >> beam.GroupByKey()
            | "WriteNearGroups" >> beam.FlatMap(write_near_groups, config).with_outputs(DROPPED, main="buckets")
        )
        buckets = (buckets, near.buckets) | "AllDuplicateBuckets" >> beam.Flatten()
        dropped.append(near[DROPPED])
    if config.duplicates == "drop":
        dropped = tuple(dropped) | "AllDropped" >> beam.Flatten()
    else:
        dropped = None
    return ({"statistics": AsSingleton(grouped[MERGED_STATISTICS], default_value=None), "duplicates": AsList(buckets)},
            dropped)
