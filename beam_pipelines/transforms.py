"""The DoFns and CombineFns of the conversion graph (see beam_pipelines.pipeline for the wiring)."""
from __future__ import annotations

import collections
import csv
import dataclasses
import io
import itertools
from typing import Any, Iterable, Mapping

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from beam_pipelines.fetch import Fetcher, reader_for
from beam_pipelines.pieces import PieceWriter, assemble_shard
from beam_pipelines.progress import rows_processed_counter
from beam_pipelines.sources import RECORDS, read_part
from tfrecorder import jobdir, storage
from tfrecorder.job_config import JobConfig
from tfrecorder.progress import ProgressReporter, report_total
from tfrecorder.table_stats import StatsCounter, TableStats
from tfrecorder.metadata import build_metadata, reason_category
from tfrecorder.row_encoder import RowEncoder, RowError, prepare_row
from tfrecorder.schema import Schema

DISCARD = "discard"


def read_image(uri: str) -> bytes:
    """Read an image file's bytes, turning I/O failures into row-level discard reasons.

    tfrecorder.storage raises gs:// failures as OS errors too (404 → FileNotFoundError, 403 →
    PermissionError, anything still failing after retries → OSError).
    """
    try:
        return storage.read_bytes(uri)
    except FileNotFoundError:
        raise RowError(f"missing file: {uri}") from None
    except IsADirectoryError:
        raise RowError(f"not a file: {uri} is a directory") from None
    except PermissionError:
        raise RowError(f"permission denied: {uri}") from None
    except OSError as exc:
        raise RowError(f"unreadable file: {uri}: {exc.strerror or exc}") from None


class RowsDone:
    """Counts rows finished (written or discarded) for progress: the Beam counter Dataflow's `wait()`
    reads, and the local progress bar's file when one is shown."""

    def __init__(self, config: JobConfig) -> None:
        self._local = ProgressReporter(config.progress_dir) if config.progress_dir else None

    def add(self, rows: int) -> None:
        if rows:
            rows_processed_counter.inc(rows)
            if self._local:
                self._local.add(rows)


class PrepareRows(beam.DoFn):
    """Assign each row of a batch its split and check its labels; bad rows go to the DISCARD output.

    Emits the batch's good rows as one list of (split, row), so later steps pay Beam's per-element
    cost once per batch rather than once per row.
    """

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def setup(self) -> None:
        self.schema = Schema.from_json(self.config.schema)
        self._rows_done = RowsDone(self.config)

    def process(self, batch: list[dict[str, Any]]):
        prepared = []
        for row in batch:
            try:
                prepared.append((prepare_row(row, self.schema, self.config.split_ratios), row))
            except RowError as exc:
                yield beam.pvalue.TaggedOutput(DISCARD, (row, str(exc)))
        self._rows_done.add(len(batch) - len(prepared))  # discarded rows are done
        if prepared:
            yield prepared


class PartStats(beam.DoFn):
    """One source part's TableStats (rows, malformed lines, missing values, TRAIN, TRAIN labels)."""

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def setup(self) -> None:
        self._counter = StatsCounter(Schema.from_json(self.config.schema), self.config.split_ratios)

    def process(self, part):
        stats = TableStats()

        def rows():
            for item in read_part(self.config, part):
                if isinstance(item, dict):
                    yield item
                elif item[0] != RECORDS:
                    stats.malformed += 1

        yield self._counter.count(rows(), stats)


def merge_stats(parts: Iterable[TableStats]) -> TableStats:
    merged = TableStats()
    for part in parts:
        merged.merge(part)
    return merged


def checked_stats(stats: TableStats, config: JobConfig) -> TableStats:
    """Fail the job on a table-level error before anything is encoded; tell the progress bar the total."""
    stats.check()
    if config.progress_dir:
        report_total(config.progress_dir, stats.rows_in)
    return stats


def _global(value: Any) -> WindowedValue:
    return WindowedValue(value, MIN_TIMESTAMP, [GlobalWindow()])


class EncodeAndWritePieces(beam.DoFn):
    """Encode batches of rows into Examples and append them to piece files; emits one Piece per file.

    A batch's images are fetched together (concurrently when `fetch_concurrency` > 1). Each bundle
    keeps at most one open piece per (split, shard index) and rolls over at max_shard_bytes, so
    memory does not grow with the dataset.
    """

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def setup(self) -> None:
        self.schema = Schema.from_json(self.config.schema)
        self._encoder = None
        self._fetcher = Fetcher(read_image, self.config.fetch_concurrency)
        self._rows_done = RowsDone(self.config)

    def teardown(self) -> None:
        self._fetcher.close()

    def start_bundle(self) -> None:
        self.writers: dict[tuple[str, int], PieceWriter] = {}
        self.round_robin = itertools.count()

    def _encoder_for(self, vocabularies: Mapping[str, list[str]]) -> RowEncoder:
        if self._encoder is None:
            self._encoder = RowEncoder(
                self.schema,
                vocabularies,
                base_dir=self.config.base_dir,
                image_size=self.config.image_size,
                full_decode=self.config.validate == "decode",
            )
        return self._encoder

    def process(self, batch: list[tuple[str, dict[str, Any]]], vocabularies: Mapping[str, list[str]]):
        encoder = self._encoder_for(vocabularies)
        uris = [uri for _split, row in batch for uri in encoder.image_uris(row)]
        read = reader_for(self._fetcher.fetch(uris))
        for split, row in batch:
            try:
                data, unknown = encoder.encode(row, read)
            except RowError as exc:
                yield beam.pvalue.TaggedOutput(DISCARD, (row, str(exc)))
                continue
            yield from self._write(split, data, unknown)
        self._rows_done.add(len(batch))

    def _write(self, split: str, data: bytes, unknown: int):
        num_shards = self.config.num_shards
        key = (split, next(self.round_robin) % num_shards if num_shards > 0 else -1)
        writer = self.writers.get(key)
        if writer is None:
            writer = self.writers[key] = PieceWriter(self.config.pieces_dir, split, key[1])
        writer.write(data, unknown)
        if num_shards <= 0 and writer.bytes >= self.config.max_shard_bytes:
            yield self.writers.pop(key).close()

    def finish_bundle(self):
        for writer in self.writers.values():
            yield _global(writer.close())
        self.writers = {}


class AssembleShard(beam.DoFn):
    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def process(self, plan):
        yield assemble_shard(plan, self.config.temp_dir, self.config.compression)


def write_discards(discards: list[tuple[dict, str]], config: JobConfig) -> dict[str, int]:
    """Write discarded.csv (original columns + reason); returns counts per reason category."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([*config.columns, "reason"])
    counts: collections.Counter = collections.Counter()
    for row, reason in sorted(discards, key=lambda d: (d[1], str(d[0]))):
        writer.writerow([_cell(row.get(c)) for c in config.columns] + [reason])
        counts[reason_category(reason)] += 1
    storage.write_bytes(storage.join(config.temp_dir, jobdir.DISCARD_FILE), out.getvalue().encode("utf-8"))
    return dict(counts)


def _cell(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and value != value) else str(value)


def finalize_job(_, config: JobConfig, shards, vocabularies, rows_in, discard_reasons, pieces):
    """Write metadata.json, clean temporary files, and publish the job directory."""
    unknown: collections.Counter = collections.Counter()
    for piece in pieces:
        unknown[piece.split] += piece.unknown_labels
    metadata = build_metadata(config, shards, vocabularies, rows_in, discard_reasons, unknown)
    storage.delete_tree(config.pieces_dir)
    storage.delete_tree(config.work_dir)
    jobdir.write_metadata(config.temp_dir, metadata)
    jobdir.finalize(config.temp_dir, config.final_dir)
    yield config.final_dir


def finalize_with_stats(_, config: JobConfig, shards, stats: TableStats, discard_reasons, pieces):
    """finalize_job with the whole-table facts the pipeline computed (row count, nullable columns)."""
    config = dataclasses.replace(config, nullable_columns=stats.nullable_columns)
    yield from finalize_job(_, config, shards, stats.vocabularies, stats.rows_in, discard_reasons, pieces)
