"""The DoFns and CombineFns of the conversion graph (see beam_pipelines.pipeline for the wiring)."""
from __future__ import annotations

import collections
import dataclasses
import errno
import functools
from typing import Any, Iterable, Mapping, Optional, Union

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from beam_pipelines.decode_pool import DecodePool
from beam_pipelines.discards import DiscardPart, DiscardPartWriter, reason_counts, write_discard_file
from beam_pipelines.fetch import Fetcher, reader_for
from beam_pipelines.fork_pool import ForkPool
from beam_pipelines.pieces import PieceWriter, assemble_shard
from beam_pipelines.progress import rows_processed_counter
from beam_pipelines.sources import RECORDS, read_part
from tfrecorder.format import jobdir, tfds_files
from tfrecorder.io import storage
from tfrecorder.errors import StorageReadError
from tfrecorder.io.images import DEFAULT_MAX_IMAGE_BYTES
from beam_pipelines.job_config import JobConfig
from tfrecorder.progress import ProgressReporter, report_total
from tfrecorder.table_stats import StatsCounter, TableStats
from tfrecorder.format.metadata import build_metadata
from tfrecorder.row_encoder import RowEncoder, RowError, prepare_row
from beam_pipelines.runners import usable_cores

DISCARD = "discard"
IMAGE_KINDS = "image_kinds"


def read_image(uri: str, max_bytes: int = DEFAULT_MAX_IMAGE_BYTES) -> bytes:
    """Read an image file's bytes. Problems of the row's value or of its own file become RowError (a
    discard reason): a missing file, a directory, a FIFO or device, a file over `max_bytes`, a local read
    error (EIO of a bad sector), a URL of no storage tfrecorder reads. Storage failures (a 503 or a timeout
    still failing after retries, a process out of file descriptors) raise StorageReadError, which fails
    the bundle so that the runner retries it and, if it keeps failing, the job stops with nothing
    published: an outage must never turn good rows into discards.

    tfrecorder.io.storage raises gs:// failures as OS errors (404 → FileNotFoundError, 403 →
    PermissionError, 400 → EINVAL, anything still failing after retries → OSError EIO).
    """
    try:
        return storage.read_bytes(uri, max_bytes)
    except storage.UnsupportedLocation as exc:
        raise RowError(f"unsupported image location: {exc}") from None
    except storage.NotRegularFile as exc:
        raise RowError(f"not a regular file: {uri} is {exc.strerror}") from None
    except storage.FileTooLarge as exc:
        raise RowError(f"file too large: {uri} holds {exc.strerror} (max_image_bytes)") from None
    except (FileNotFoundError, NotADirectoryError):
        raise RowError(f"missing file: {uri}") from None
    except IsADirectoryError:
        raise RowError(f"not a file: {uri} is a directory") from None
    except PermissionError:
        raise RowError(f"permission denied: {uri}") from None
    except ValueError as exc:  # e.g. an embedded NUL byte
        raise RowError(f"invalid path: {uri!r}: {exc}") from None
    except OSError as exc:
        if exc.errno in _PATH_ERRNOS:
            raise RowError(f"invalid path: {uri}: {exc.strerror or exc}") from None
        if exc.errno in _LOCAL_FILE_ERRNOS and not storage.is_remote(uri):
            raise RowError(f"unreadable file: {uri}: {exc.strerror or exc}") from None
        raise StorageReadError(exc.errno or errno.EIO, f"could not read {uri}: {exc.strerror or exc}") from None


_PATH_ERRNOS = {errno.ENAMETOOLONG, errno.ELOOP, errno.EINVAL}  # the value names no readable file
# A local file's own failures (a bad sector, a device gone, an offset the file system cannot give): that
# row's problem. Gave-up retries of gs:// are EIO too, and a remote read's EIO is an outage.
_LOCAL_FILE_ERRNOS = {errno.EIO, errno.ENXIO, errno.ENODEV, errno.EOVERFLOW}


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
        self.schema = self.config.schema
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


class VocabularyFn(beam.CombineFn):
    """{column: labels} of each batch → {column: sorted distinct labels}."""

    def create_accumulator(self) -> dict[str, set]:
        return {}

    def add_input(self, accumulator: dict[str, set], labels: Mapping[str, Iterable[str]]) -> dict[str, set]:
        for column, values in labels.items():
            accumulator.setdefault(column, set()).update(values)
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[dict[str, set]]) -> dict[str, set]:
        merged: dict[str, set] = {}
        for accumulator in accumulators:
            self.add_input(merged, accumulator)
        return merged

    def extract_output(self, accumulator: dict[str, set]) -> dict[str, list[str]]:
        return {column: sorted(labels) for column, labels in accumulator.items()}


class PartStats(beam.DoFn):
    """One source part's TableStats (rows, malformed lines, missing values, TRAIN, TRAIN labels), row by
    row: for annotation files (sources read as Arrow batches are counted column-wise, tabular.PartStats)."""

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def setup(self) -> None:
        self._counter = StatsCounter(self.config.schema, self.config.split_ratios)

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


def in_global_window(value: Any) -> WindowedValue:
    """`value` in the global window, for output from `finish_bundle` (which has no element window to inherit)."""
    return WindowedValue(value, MIN_TIMESTAMP, [GlobalWindow()])


class RowsCounted:
    """Counts rows done inside an encoding child process; the parent reports them with the batch."""

    def __init__(self) -> None:
        self.rows = 0

    def add(self, rows: int) -> None:
        self.rows += rows

    def take(self) -> int:
        rows, self.rows = self.rows, 0
        return rows


class EncodeAndWritePieces(beam.DoFn):
    """Encode batches of rows into Examples and append them to piece files; emits one Piece per file.

    A batch's images are fetched together (concurrently when `fetch_concurrency` > 1) and, with
    validate="decode", decoded by TensorFlow on a thread per core while this thread encodes. Each bundle
    keeps at most one open piece per split and rolls over at max_shard_bytes, so open files and memory
    do not grow with the dataset or with num_shards (shards are cut from the pieces afterwards).

    With `config.encode_processes` > 1 (large local jobs, see beam_pipelines.runners.encode_processes) the
    batches are encoded and written by that many forked copies of this DoFn (beam_pipelines.fork_pool):
    each child keeps its own open pieces for the bundle, and sends back only what the DoFn would emit
    (pieces, discarded rows), never image bytes. Pieces still belong to one bundle attempt: the children
    close them when the bundle finishes and drop them (orphans, removed with the pieces directory) when
    a new bundle starts after a failed one.
    """

    _pool: Optional[ForkPool] = None  # also for subclasses with their own setup (upgrade, detection)

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def setup(self) -> None:
        self.schema = self.config.schema
        self._encoder = None
        self._fetcher = Fetcher(functools.partial(read_image, max_bytes=self.config.max_image_bytes),
                                self.config.fetch_concurrency)
        self._decoder = None
        if self.config.validate == "decode":
            self._decoder = DecodePool(usable_cores(), self.config.max_image_pixels)
        self._rows_done = RowsDone(self.config)
        self.writers: dict[str, PieceWriter] = {}

    def teardown(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        self._fetcher.close()
        if self._decoder is not None:
            self._decoder.close()

    def start_bundle(self) -> None:
        self.writers = {}
        if self._pool is not None and self._pool.closed:  # a failed bundle closed it: fork afresh
            self._pool = None
        if self._pool is not None:
            self._pool.broadcast(("abandon", None))  # pieces a failed bundle left open are orphans

    def _encoder_for(self, vocabularies: Mapping[str, list[str]]) -> RowEncoder:
        if self._encoder is None:
            self._encoder = RowEncoder(
                self.schema,
                vocabularies,
                base_dir=self.config.base_dir,
                image_size=self.config.image_size,
                validate=self.config.validate,
                max_image_pixels=self.config.max_image_pixels,
            )
        return self._encoder

    def process(self, batch: list[tuple[str, dict[str, Any]]], vocabularies: Mapping[str, list[str]]):
        if self.config.encode_processes > 1:
            pool = self._pool_for(vocabularies)
            for outputs, rows in pool.submit(("batch", batch)):
                self._rows_done.add(rows)
                yield from outputs
            return
        yield from self.encode_batch(batch, vocabularies)

    def encode_batch(self, batch: list[tuple[str, dict[str, Any]]], vocabularies: Mapping[str, list[str]]):
        """Encode and write one batch: yields rolled-over pieces and (DISCARD) discarded rows."""
        encoder = self._encoder_for(vocabularies)
        uris = [uri for _split, row in batch for uri in encoder.image_uris(row)]
        fetched = self._fetcher.fetch(uris)
        read = reader_for(fetched)
        pending = self._decoder.submit(fetched) if self._decoder else None  # decoded on every core meanwhile
        for split, row in batch:
            try:
                data, unknown = encoder.encode_pieces(row, read, pending.verdict if pending else None)
            except RowError as exc:
                yield beam.pvalue.TaggedOutput(DISCARD, (row, str(exc)))
                continue
            yield from self._write(split, data, unknown)
        if pending:
            pending.wait()
        self._rows_done.add(len(batch))

    def _write(self, split: str, data: Union[bytes, list], unknown: int):
        writer = self.writers.get(split)
        if writer is None:
            writer = self.writers[split] = PieceWriter(self.config.pieces_dir, split)
        writer.write(data, unknown)
        if writer.bytes >= self.config.max_shard_bytes:
            yield self.writers.pop(split).close()

    def close_pieces(self):
        """The bundle's open pieces, closed, and the image kinds (IMAGE_KINDS) it wrote."""
        for writer in self.writers.values():
            yield writer.close()
        self.writers = {}
        if self._encoder is not None and self._encoder.image_kinds:  # a few tuples per bundle
            yield beam.pvalue.TaggedOutput(IMAGE_KINDS, sorted(self._encoder.image_kinds))
            self._encoder.image_kinds.clear()

    def finish_bundle(self):
        if self._pool is None:
            outputs = list(self.close_pieces())
        else:
            batches, closed = self._pool.broadcast(("finish", None))
            self._rows_done.add(sum(rows for _outputs, rows in batches))
            outputs = [output for found, _rows in batches + closed for output in found]
        for output in outputs:  # finish_bundle's outputs carry their window
            if isinstance(output, beam.pvalue.TaggedOutput):
                yield beam.pvalue.TaggedOutput(output.tag, in_global_window(output.value))
            else:
                yield in_global_window(output)

    def _pool_for(self, vocabularies: Mapping[str, list[str]]) -> ForkPool:
        if self._pool is None:
            self._vocabularies = vocabularies  # the children inherit it and the encoder
            self._encoder_for(vocabularies)
            self._pool = ForkPool(self.config.encode_processes, self._serve_in_child)
        return self._pool

    def _serve_in_child(self, task: tuple[str, Any]) -> tuple[list, int]:
        """A forked child's handler: ("batch", rows) → (outputs, rows done); ("finish", _) → the closed
        pieces; ("abandon", _) → forget the open pieces of a failed bundle."""
        if not isinstance(self._rows_done, RowsCounted):
            self._rows_done = RowsCounted()  # Beam's counters live in the parent
        operation, batch = task
        if operation == "batch":
            outputs = list(self.encode_batch(batch, self._vocabularies))
            return outputs, self._rows_done.take()
        if operation == "finish":
            return list(self.close_pieces()), 0
        for writer in self.writers.values():
            writer.abandon()
        self.writers = {}
        return [], 0


class ImageKindsFn(beam.CombineFn):
    """Lists of (feature prefix, format, channels) → {prefix: {"channels": [...], "formats": [...]}}.

    The accumulator holds the distinct kinds only (a handful), so memory does not grow with rows.
    """

    def create_accumulator(self) -> set:
        return set()

    def add_input(self, accumulator: set, kinds: Iterable[tuple[str, str, int]]) -> set:
        accumulator.update(tuple(kind) for kind in kinds)
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[set]) -> set:
        return set().union(*accumulators)

    def extract_output(self, accumulator: set) -> dict[str, dict[str, list]]:
        out: dict[str, dict[str, list]] = {}
        for prefix, image_format, channels in sorted(accumulator):
            entry = out.setdefault(prefix, {"channels": [], "formats": []})
            entry["channels"] = sorted({*entry["channels"], channels})
            entry["formats"] = sorted({*entry["formats"], image_format})
        return out


class AssembleShard(beam.DoFn):
    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def process(self, plan):
        yield assemble_shard(plan, self.config.temp_dir, self.config.compression)


class WriteDiscardParts(beam.DoFn):
    """Stream the discarded rows a bundle finds into one part file; emits its DiscardPart at the end."""

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def start_bundle(self) -> None:
        self.writer = None

    def process(self, discard: tuple[dict, str]):
        if self.writer is None:
            self.writer = DiscardPartWriter(self.config.discards_dir, self.config.columns)
        self.writer.write(*discard)
        return ()

    def finish_bundle(self):
        if self.writer is not None:
            yield in_global_window(self.writer.close())
            self.writer = None


def write_discards(parts: list[DiscardPart], config: JobConfig) -> dict[str, int]:
    """Write discarded.csv (original columns + reason) from the committed parts; returns counts per reason."""
    write_discard_file(parts, config.columns, storage.join(config.temp_dir, jobdir.DISCARD_FILE))
    return reason_counts(parts)


def finalize_job(_, config: JobConfig, shards, vocabularies, rows_in, discard_reasons, pieces, image_kinds=None):
    """Write metadata.json (and the TFDS files), clean temporary files, and publish the job directory.

    Safe to run again after any part of it ran: once the job is published it only cleans up.
    """
    if not jobdir.is_published(config.final_dir):
        unknown: collections.Counter = collections.Counter()
        for piece in pieces:
            unknown[piece.split] += piece.unknown_labels
        metadata = build_metadata(config, shards, vocabularies, rows_in, discard_reasons, unknown,
                                  images=image_kinds or {})
        for scratch in config.scratch_dirs:
            storage.delete_tree(scratch)
        tfds_files.write_tfds_files(config.temp_dir, metadata)  # issue 15: before metadata.json, the completion marker
        jobdir.write_metadata(config.temp_dir, metadata)
    jobdir.finalize(config.temp_dir, config.final_dir)
    yield config.final_dir


def finalize_with_stats(_, config: JobConfig, shards, stats: TableStats, discard_reasons, pieces, image_kinds=None):
    """finalize_job with the whole-table facts the pipeline computed (row count, nullable columns)."""
    config = dataclasses.replace(config, nullable_columns=stats.nullable_columns)
    yield from finalize_job(_, config, shards, stats.vocabularies, stats.rows_in, discard_reasons, pieces,
                            image_kinds=image_kinds)
