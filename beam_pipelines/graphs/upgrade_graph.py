"""The upgrade graph: rewrite a TFRecorder 2.0 directory as a job directory of this package.

    legacy shard parts ─► Reshuffle ─► read + re-encode records (PNG) + write pieces ─► plan shards
                                                   │                                  ─► Reshuffle ─► assemble shards
    2.0's discarded-data lines ──► discards ◄──────┘ (records that cannot be upgraded)
    discards ─► discarded.csv;   counts + everything ─► finalize (metadata.json, publish directory)

A gzip shard cannot be split, so a large legacy shard is read by several workers, each decoding the
whole stream but re-encoding only every n-th record (decompression is cheap next to PNG encoding).
Image bytes go straight from the reading worker into a piece file, as in the conversion graph;
the piece writing, shard assembly, discard file and finalisation are the conversion graph's own.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import zlib
from typing import Any, Iterator, Mapping, NamedTuple

import apache_beam as beam
from apache_beam.pvalue import AsSingleton

from beam_pipelines.graphs.job_outputs import write_outputs
from beam_pipelines.steps.discard_files import DISCARD
from beam_pipelines.steps.encode_rows import EncodeAndWritePieces
from beam_pipelines.steps.finalize_job import finalize_job
from beam_pipelines.steps.progress_counters import RowsDone
from tfrecorder.format.job_directory import job_file
from tfrecorder.io import storage
from tfrecorder.format.example_decoder import parse_example
from tfrecorder.options.job_config import JobConfig
from tfrecorder.format.legacy.v2_records import upgrade_record
from tfrecorder.errors import CorruptRecordError, RowError
from tfrecorder.format.framing import read_records

READ = "read"
DISCARD_COLUMNS = ("split", "source", "record", "image_name")
CORRUPT = "corrupt TFRecorder 2.0 shard"
PROGRESS_EVERY = 64  # records between progress counter updates


class ShardPart(NamedTuple):
    """Records `index`, `index + count`, `index + 2*count`, … of one legacy shard."""

    split: str
    file: str
    index: int
    count: int


@contextlib.contextmanager
def open_legacy_shard(path: str, compression) -> Iterator[Any]:
    with storage.open_read(path) as raw:
        if compression == "gzip":
            with gzip.GzipFile(fileobj=raw, mode="rb") as stream:
                yield stream
        else:
            yield raw


def _image_name(record: bytes) -> str:
    try:
        return b"".join(parse_example(record).get("image_name", [b""])[:1]).decode("utf-8", "replace")
    except (ValueError, IndexError):
        return ""


class UpgradeRecords(EncodeAndWritePieces):
    """Re-encode one part of a legacy shard into piece files (the conversion's piece writing).

    Emits pieces, DISCARD (row, reason) for records that cannot be upgraded, and READ: the number
    of records this part read, counted independently of what was written so accounting can fail.
    """

    image_keys = False  # its records are not image rows of an appendable job

    def __init__(self, config: JobConfig, legacy_dir: str, compression) -> None:
        super().__init__(config)
        self.legacy_dir = legacy_dir
        self.legacy_compression = compression

    def setup(self) -> None:
        self.schema = self.config.schema
        self._encoder = None  # no RowEncoder: records arrive encoded (so no image kinds are reported)
        self._rows_done = RowsDone(self.config)

    def teardown(self) -> None:
        pass

    def process(self, part: ShardPart):
        path = job_file(self.legacy_dir, part.file)  # checked again here: the directory may change after the driver
        read = 0
        try:
            with open_legacy_shard(path, self.legacy_compression) as stream:
                for number, record in enumerate(read_records(stream)):
                    if number % part.count != part.index:
                        continue
                    read += 1
                    if read % PROGRESS_EVERY == 0:
                        self._rows_done.add(PROGRESS_EVERY)
                    try:
                        data, unknown = upgrade_record(record, self.schema)
                    except RowError as exc:
                        row = {"split": part.split, "source": part.file, "record": number, "image_name": _image_name(record)}
                        yield beam.pvalue.TaggedOutput(DISCARD, (row, str(exc)))
                        continue
                    yield from self._write(part.split, data, unknown)
        except (CorruptRecordError, EOFError, gzip.BadGzipFile, zlib.error) as exc:  # the data, not the storage
            raise ValueError(f"{CORRUPT} {part.file}: {exc}; the dataset cannot be upgraded record for record "
                             "(tfrecorder.verify() reports the damage)") from None
        self._rows_done.add(read % PROGRESS_EVERY)
        yield beam.pvalue.TaggedOutput(READ, read)


def legacy_discards(file: str, legacy_dir: str):
    """TFRecorder 2.0's discarded-data lines, one discarded row each, kept with their text."""
    with io.TextIOWrapper(storage.open_read(job_file(legacy_dir, file)), encoding="utf-8", errors="replace") as text:
        for number, line in enumerate(text):  # streamed: a discard file may be large
            if line.strip():
                yield ({"split": "", "source": file, "record": number, "image_name": ""},
                       f"discarded by TFRecorder 2.0: {line.rstrip()}")


def build_upgrade_graph(pipeline: beam.Pipeline, config: JobConfig, legacy_dir: str, parts: list[ShardPart],
                        discard_files: list[str], vocabularies: Mapping[str, list[str]], compression) -> beam.PCollection:
    """Add the upgrade graph of the TFRecorder 2.0 directory `legacy_dir` to `pipeline`; returns the
    PCollection holding the final directory."""
    upgraded = (
        pipeline
        | "LegacyParts" >> beam.Create(parts)
        | "SpreadParts" >> beam.Reshuffle()
        | "Upgrade" >> beam.ParDo(UpgradeRecords(config, legacy_dir, compression)).with_outputs(
            DISCARD, READ, main="pieces")
    )
    old_discards = (
        pipeline
        | "LegacyDiscardFiles" >> beam.Create(discard_files)
        | "ReadLegacyDiscards" >> beam.FlatMap(legacy_discards, legacy_dir)
    )
    rows_in = (
        (upgraded[READ], old_discards | "OneEach" >> beam.Map(lambda _: 1))
        | "AllRows" >> beam.Flatten()
        | "CountRows" >> beam.CombineGlobally(sum).without_defaults()
    )
    found = {"Legacy": old_discards, "Upgrade": upgraded[DISCARD]}
    return write_outputs(pipeline, config, upgraded.pieces, found, finalize_job, dict(vocabularies),
                         AsSingleton(rows_in, default_value=0))
