"""The duplicates stage of an append (issue 28): new rows whose image is already in the base are discarded.

A new row is a duplicate when its first image column's value (the URI as the table names it, which is
what a record's `<image>_uri` feature holds) or the SHA-256 of that image's bytes is the URI or bytes
digest of a record of the base. Nothing holds the base's keys in one place: each base shard is read by
one worker, which emits a (key, job) pair per record; the new rows are keyed the same way, and the two
meet in a CoGroupByKey (first by URI, then, for the rows left, by bytes digest), so memory per key is
bounded by how many rows share that key. The reason recorded is `already in base: <job>`; with
`duplicates="keep"` the stage is left out. A new row whose image cannot be read passes on unkeyed
and is discarded by the encoder as usual (missing file, ...).
"""
from __future__ import annotations

import gzip
import hashlib
from typing import Any, Iterator

import apache_beam as beam

from tfrecorder.errors import RowError
from tfrecorder.format.example_decoder import parse_example
from tfrecorder.format.feature_spec import image_feature_prefix
from tfrecorder.format.framing import read_records
from tfrecorder.format.job_directory import job_file
from tfrecorder.format.lineage import DUPLICATE_REASON, CarriedShard
from tfrecorder.io import storage
from tfrecorder.options.job_config import JobConfig
from tfrecorder.rows.value_coercion import is_missing
from beam_pipelines.steps.discard_files import DISCARD
from beam_pipelines.steps.encode_rows import read_image
from beam_pipelines.steps.progress_counters import RowsDone

URI, DIGEST = "uri:", "sha256:"
_UNKEYED = "unkeyed:"  # rows with no image value or an unreadable image: never match a base key


def dedupes(config: JobConfig) -> bool:
    """Whether the job looks for duplicates of the base: an append of image rows with duplicates="discard"."""
    return config.base is not None and config.base.duplicates == "discard" and bool(config.schema.image_columns)


def digest_key(data: bytes) -> str:
    return DIGEST + hashlib.sha256(data).hexdigest()


def record_keys(record: bytes, prefix: str) -> list[str]:
    """The keys of one base record: its image's URI and bytes digest (those present)."""
    features = parse_example(record)
    keys = []
    uri = features.get(prefix + "_uri")
    if uri:
        keys.append(URI + uri[0].decode("utf-8", "replace"))
    image = features.get(prefix)
    if image:
        keys.append(digest_key(image[0]))
    return keys


def shard_keys(shard: CarriedShard, config: JobConfig) -> Iterator[tuple[str, str]]:
    """(key, base job name) for every record of one base shard, each key once per shard."""
    base = config.base
    prefix = image_feature_prefix(config.schema.image_columns[0])
    seen: set[str] = set()
    with storage.open_read(job_file(base.tfrecord_dir, shard.parent_file)) as raw:
        stream = gzip.GzipFile(fileobj=raw, mode="rb") if base.compression == "gzip" else raw
        for record in read_records(stream):
            for key in record_keys(record, prefix):
                if key not in seen:
                    seen.add(key)
                    yield key, base.job_name


def row_uri_key(row: dict[str, Any], column: str) -> str:
    value = row.get(column)
    if is_missing(value) or not str(value).strip():
        return _UNKEYED + "missing"
    return URI + str(value)


class KeyByDigest(beam.DoFn):
    """(split, row) → (bytes digest key, (split, row)), reading the row's first image once more."""

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def process(self, prepared):
        from tfrecorder.rows.row_encoding import resolve_uri

        _split, row = prepared
        column = self.config.schema.image_columns[0]
        value = row.get(column)
        if is_missing(value) or not str(value).strip():
            yield _UNKEYED + "missing", prepared
            return
        try:
            data = read_image(resolve_uri(str(value), self.config.base_dir), self.config.max_image_bytes)
        except RowError:
            yield _UNKEYED + str(value), prepared
            return
        yield digest_key(data), prepared


class SplitDuplicates(beam.DoFn):
    """A key's new rows: discarded (`already in base: <job>`) when the base holds the key, else passed on."""

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def setup(self) -> None:
        self._rows_done = RowsDone(self.config)

    def process(self, grouped):
        _key, sides = grouped
        jobs = list(sides["base"])
        new = list(sides["new"])
        if jobs and new:
            reason = f"{DUPLICATE_REASON}: {jobs[0]}"
            for _split, row in new:
                yield beam.pvalue.TaggedOutput(DISCARD, (row, reason))
            self._rows_done.add(len(new))
            return
        yield from new


def _join(base_keys, rows, label: str, config: JobConfig):
    grouped = {"base": base_keys, "new": rows} | f"Join{label}" >> beam.CoGroupByKey()
    return grouped | f"Split{label}" >> beam.ParDo(SplitDuplicates(config)).with_outputs(DISCARD, main="rows")


def drop_base_duplicates(pipeline: beam.Pipeline, config: JobConfig, batches: beam.PCollection):
    """Batches of (split, row) without the rows already in the base; returns (batches, discards)."""
    column = config.schema.image_columns[0]
    shards = pipeline | "BaseShards" >> beam.Create(list(config.base.shards))
    keys = shards | "BaseKeys" >> beam.FlatMap(shard_keys, config)
    uri_keys = keys | "BaseUriKeys" >> beam.Filter(lambda item: item[0].startswith(URI))
    digest_keys = keys | "BaseDigestKeys" >> beam.Filter(lambda item: item[0].startswith(DIGEST))
    rows = batches | "NewRows" >> beam.FlatMap(lambda batch: batch)
    by_uri = rows | "KeyByUri" >> beam.Map(lambda prepared: (row_uri_key(prepared[1], column), prepared))
    after_uri = _join(uri_keys, by_uri, "Uri", config)
    by_digest = after_uri.rows | "KeyByDigest" >> beam.ParDo(KeyByDigest(config))
    after_digest = _join(digest_keys, by_digest, "Digest", config)
    rebatched = after_digest.rows | "Rebatch" >> beam.BatchElements(
        min_batch_size=1, max_batch_size=config.batch_size)
    discards = (after_uri[DISCARD], after_digest[DISCARD]) | "DuplicateDiscards" >> beam.Flatten()
    return rebatched, discards
