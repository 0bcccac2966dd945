"""The duplicates stage: content digests grouped by bucket inside the pipeline, groups written to duplicates.csv (issue 29).

    encoders ─(bucket, [(digest, split, row id)])─► GroupByKey(bucket) ─► groups of each bucket written to
    _work/duplicates/bucket-NNNNN.csv (one whole-file write, same bytes on a retry) ─► their descriptors
    (O(buckets)) ─► duplicates.csv (bucket files concatenated in bucket order) + counts for metadata.json

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
from tfrecorder.rows.duplicate_groups import CSV_COLUMNS, DuplicateCounts, groups_in

LEAKS_NAMED = 5  # leaking groups carried to the end (for the error of duplicates="fail")


@dataclasses.dataclass(frozen=True)
class DuplicateBucket:
    """One bucket's groups: its csv part (without header), their counts and the first leaking groups."""

    bucket: int
    path: str
    counts: DuplicateCounts
    leaks: tuple[tuple[tuple[str, str], ...], ...]


def bucket_path(config: JobConfig, bucket: int) -> str:
    return storage.join(config.work_dir, "duplicates", f"bucket-{bucket:05d}.csv")


def write_bucket(item: tuple[int, Iterable[list]], config: JobConfig) -> Iterable[DuplicateBucket]:
    """Group one bucket's entries; write its groups (if any) and yield their descriptor."""
    bucket, batches = item
    groups = groups_in(entry for batch in batches for entry in batch)
    if not groups:
        return
    text = io.StringIO()
    writer = csv.writer(text)
    for group in groups:
        writer.writerows(group.csv_rows())
    path = bucket_path(config, bucket)
    storage.write_bytes(path, text.getvalue().encode("utf-8"))
    leaks = tuple(group.members for group in groups if group.leaks)[:LEAKS_NAMED]
    yield DuplicateBucket(bucket, path, DuplicateCounts().add(groups), leaks)


def write_duplicates_file(buckets: Iterable[DuplicateBucket], destination: str) -> dict:
    """duplicates.csv from the bucket parts (header, then buckets in order); returns the counts and the
    first leaking groups: {"counts": {...}, "leaks": [[[split, row], ...], ...]}."""
    ordered = sorted(buckets, key=lambda b: b.bucket)
    counts = DuplicateCounts()
    leaks: list = []
    with storage.open_write(destination) as out:
        out.write((",".join(CSV_COLUMNS) + "\r\n").encode("utf-8"))
        for part in ordered:
            counts.merge(part.counts)
            leaks.extend([list(member) for member in group] for group in part.leaks)
            with storage.open_read(part.path) as stream:
                while True:
                    chunk = stream.read(1 << 20)
                    if not chunk:
                        break
                    out.write(chunk)
    return {"counts": counts.to_json(), "leaks": leaks[:LEAKS_NAMED]}


def find_duplicates(keys: beam.PCollection, config: JobConfig, start: Optional[beam.PCollection] = None) -> beam.PCollection:
    """The single summary of the job's duplicates (after duplicates.csv is written into the job's temp dir)."""
    buckets = (
        keys
        | "GroupDigests" >> beam.GroupByKey()
        | "WriteDuplicateBuckets" >> beam.FlatMap(write_bucket, config)
    )
    start = start if start is not None else keys.pipeline | "DuplicatesStart" >> beam.Create([None])
    destination = storage.join(config.temp_dir, DUPLICATES_FILE)
    return start | "WriteDuplicates" >> beam.Map(lambda _, parts: write_duplicates_file(parts, destination),
                                                 AsList(buckets))
