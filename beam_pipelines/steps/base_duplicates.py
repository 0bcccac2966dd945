"""The duplicates stage of an append (issue 28): new rows whose image is already in the base are discarded.

A new row is a duplicate when its first image column's value (the URI as the table names it, which is
what a record's `<image>_uri` feature holds) or the SHA-256 of that image's bytes is the URI or bytes
digest of a record of the base (tfrecorder.format.image_keys; keys travel as 64-bit hashes). The new
rows' keys (their images read once more) go into a Bloom filter (`KeyFilter`, sized for the new rows);
each base shard is read by one worker, which keeps only the keys the filter may hold, so the keys
gathered to decide (a dict side input) grow with the new rows, never with the base. A base shard's keys
come from its keys sidecar (16 bytes a record), which every conversion of image rows writes; a shard
without one (an older or upgraded job) has its records scanned, and the scan leaves the sidecar in the
version, so the next append reads that instead. The reason recorded is `already in base: <job>`;
with `duplicates="keep"` the stage is left out. A new row whose image cannot be read passes on unkeyed
and is discarded by the encoder as usual (missing file, ...). The new rows wait for the base to be
read (held by the runner until the filter and the base's keys are complete).

Two ways to decide: jobs without part commits drop the rows in a step of their own (drop_base_duplicates);
a resumable append gives the base keys met to the encoder as a side input (base_keys_of_parts), which
discards a row while it holds the row's bytes, inside the part it commits, so a continued append
decides as the interrupted one did.
"""
from __future__ import annotations

import functools
import gzip
from typing import Any, Iterator

import apache_beam as beam
from apache_beam.pvalue import AsDict, AsSingleton

from tfrecorder.errors import RowError
from tfrecorder.format.feature_spec import image_feature_prefix
from tfrecorder.format.framing import read_records
from tfrecorder.format.file_names import keys_file_name
from tfrecorder.format.image_keys import (KeyFilter, digest_key, hashes_bytes, key_hash, read_hashes, record_image_keys,
                                          uri_key)
from tfrecorder.format.job_directory import job_file
from tfrecorder.format.lineage import DUPLICATE_REASON, CarriedShard
from tfrecorder.io import storage
from tfrecorder.options.job_config import JobConfig
from tfrecorder.rows.row_encoding import resolve_uri
from tfrecorder.rows.value_coercion import is_missing
from beam_pipelines.steps import read_rows
from beam_pipelines.steps.discard_files import DISCARD
from beam_pipelines.steps.encode_rows import read_image
from beam_pipelines.steps.fetch_images import Fetcher
from beam_pipelines.steps.progress_counters import RowsDone

KEYS_PER_ROW = 2  # its URI and its bytes digest


def dedupes(config: JobConfig) -> bool:
    """Whether the job looks for duplicates of the base: an append of image rows with duplicates="discard"."""
    return config.base is not None and config.base.duplicates == "discard" and bool(config.schema.image_columns)


def new_key_filter(config: JobConfig) -> KeyFilter:
    """An empty filter sized for the new rows (the driver's estimate of them)."""
    return KeyFilter(max(config.base.new_rows_estimate, 1000) * KEYS_PER_ROW)


def shard_key_hashes(path: str, compression, image_column: str) -> bytes:
    """A shard's keys sidecar content, from its records (tfrecorder.format.image_keys.hashes_bytes)."""
    prefix = image_feature_prefix(image_column)
    with storage.open_read(path) as raw:
        stream = gzip.GzipFile(fileobj=raw, mode="rb") if compression == "gzip" else raw
        return hashes_bytes(key_hash(key) for record in read_records(stream) for key in record_image_keys(record, prefix))


def shard_keys(shard: CarriedShard, config: JobConfig, wanted: KeyFilter) -> Iterator[tuple[int, str]]:
    """(key hash, base job name) for the distinct keys of one base shard that `wanted` may hold: from its
    keys sidecar, or scanned from its records (then a carried shard's sidecar is written into the version)."""
    base = config.base
    if shard.parent_keys_file:
        data = storage.read_bytes(job_file(base.tfrecord_dir, shard.parent_keys_file))
    else:
        data = shard_key_hashes(job_file(base.tfrecord_dir, shard.parent_file), base.compression,
                                config.schema.image_columns[0])
        if shard not in base.merged:  # carried: the version lists this sidecar (carry_shards)
            storage.write_bytes(storage.join(config.temp_dir, *keys_file_name(base.job_name, shard.parent_file).split("/")),
                                data)
    hashes = read_hashes(data)
    for value in hashes[wanted.may_hold_all(hashes)]:
        yield int(value), base.job_name


class KeyRows(beam.DoFn):
    """A batch of (split, row) → the same batch as (key hashes, (split, row)): the row's first image's URI
    key and the digest of its bytes (read once more; an unreadable image has no digest key)."""

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def setup(self) -> None:
        self._fetcher = Fetcher(functools.partial(read_image, max_bytes=self.config.max_image_bytes),
                                self.config.fetch_concurrency)

    def teardown(self) -> None:
        self._fetcher.close()

    def process(self, batch: list[tuple[str, dict[str, Any]]]):
        column = self.config.schema.image_columns[0]
        values = [row.get(column) for _split, row in batch]
        named = [None if is_missing(v) or not str(v).strip() else str(v) for v in values]
        fetched = self._fetcher.fetch(resolve_uri(v, self.config.base_dir) for v in named if v is not None)
        keyed = []
        for value, prepared in zip(named, batch):
            keys = []
            if value is not None:
                keys.append(key_hash(uri_key(value)))
                data = fetched[resolve_uri(value, self.config.base_dir)]
                if not isinstance(data, RowError):
                    keys.append(key_hash(digest_key(data)))
            keyed.append((tuple(keys), prepared))
        yield keyed


class KeyFilterFn(beam.CombineFn):
    """Batches of keyed rows → a KeyFilter of their keys."""

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def create_accumulator(self) -> KeyFilter:
        return new_key_filter(self.config)

    def add_input(self, accumulator: KeyFilter, batch) -> KeyFilter:
        for keys, _prepared in batch:
            for key in keys:
                accumulator.add(key)
        return accumulator

    def merge_accumulators(self, accumulators) -> KeyFilter:
        accumulators = iter(accumulators)
        merged = next(accumulators)
        for accumulator in accumulators:
            merged.merge(accumulator)
        return merged

    def extract_output(self, accumulator: KeyFilter) -> KeyFilter:
        return accumulator


class DropDuplicates(beam.DoFn):
    """A keyed batch → its rows none of whose keys is in the base (`found`: key → base job), as a batch;
    the others are discarded as `already in base: <job>`."""

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def setup(self) -> None:
        self._rows_done = RowsDone(self.config)

    def process(self, batch, found: dict[int, str]):
        kept = []
        for keys, prepared in batch:
            job = next((found[key] for key in keys if key in found), None)
            if job is None:
                kept.append(prepared)
            else:
                yield beam.pvalue.TaggedOutput(DISCARD, (prepared[1], f"{DUPLICATE_REASON}: {job}"))
        self._rows_done.add(len(batch) - len(kept))
        if kept:
            yield kept


def base_keys_met(pipeline: beam.Pipeline, config: JobConfig, keyed: beam.PCollection) -> beam.PCollection:
    """(key hash, base job) of the base keys the keyed new rows' filter may hold (a Bloom filter of the
    new rows' keys, then each base shard's keys checked against it where they are read)."""
    wanted = keyed | "NewKeyFilter" >> beam.CombineGlobally(KeyFilterFn(config))
    shards = pipeline | "BaseShards" >> beam.Create(list(config.base.all_shards))
    if config.distributed:
        shards = shards | "SpreadBaseShards" >> beam.Reshuffle()
    return shards | "BaseKeys" >> beam.FlatMap(shard_keys, config, AsSingleton(wanted))


def drop_base_duplicates(pipeline: beam.Pipeline, config: JobConfig, batches: beam.PCollection):
    """Batches of (split, row) without the rows already in the base; returns (batches, discards)."""
    keyed = batches | "KeyNewRows" >> beam.ParDo(KeyRows(config))
    found = base_keys_met(pipeline, config, keyed)
    decided = keyed | "DropDuplicates" >> beam.ParDo(DropDuplicates(config), AsDict(found)).with_outputs(
        DISCARD, main="rows")
    return decided.rows, decided[DISCARD]


def base_keys_of_parts(pipeline: beam.Pipeline, config: JobConfig, parts: read_rows.SourceParts):
    """A resumable append's side input (issue 27 with 28): the base keys its new rows meet, as a dict
    key hash → base job, from a read of the new rows' parts (their images read for their digests) made
    before encoding; the encoder (EncodeImageParts) discards a row holding one, inside the part it commits."""
    batches, _malformed = parts.branch("NewRows") | "ReadNewRows" >> read_rows.ReadRows(
        config, batch_rows=config.batch_size)
    keyed = (batches | "AsPrepared" >> beam.Map(lambda batch: [(None, row) for row in batch])
             | "KeyNewRows" >> beam.ParDo(KeyRows(config)))
    return AsDict(base_keys_met(pipeline, config, keyed))
