"""The conversion graph of image-free tables: each source part read as Arrow batches and encoded column-wise.

    source parts ─► read batches ─► prepare + encode (tfrecorder.rows.columnar_encoder) + write pieces ─► (common tail)
         └► read batches ─► table stats per batch ─(side input: vocabulary, checked)┘

A part (a CSV byte slice or a Parquet row group) is one element: the worker reads it batch by batch
(BATCH_ROWS rows: memory does not grow with the table), so Beam's per-element cost is paid per part,
and rows never travel between steps as python dicts. Discards, malformed CSV lines and their
numbering, pieces and retry safety are those of the row graph (beam_pipelines.graphs.image_graph).
"""
from __future__ import annotations

from typing import Any, Iterator, Mapping

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.pvalue import AsDict, AsSingleton

from beam_pipelines.steps import read_rows

from beam_pipelines.steps import encode_rows
from beam_pipelines.steps.piece_files import PieceWriter
from tfrecorder.rows import columnar_encoder
from tfrecorder.io import storage
from tfrecorder.sources.csv_columns import csv_bytes_batches
from beam_pipelines.job_config import JobConfig
from tfrecorder.sources.parquet_parts import read_row_group_batches
from tfrecorder.sources.parquet_values import conform_batch
from tfrecorder.rows.table_stats import TableStats
from tfrecorder.format.framing import frame_records

BATCH_ROWS = 16_384
MALFORMED, RECORDS = read_rows.MALFORMED, read_rows.RECORDS


def reads_batches(config: JobConfig) -> bool:
    """Whether the job's source reads as Arrow batches: a CSV, Parquet files or a staged DataFrame (not
    an annotation file)."""
    return config.source_kind in ("csv", "parquet")


def is_tabular(config: JobConfig) -> bool:
    """Whether the job's rows go through the columnar graph: a source read as batches, without image
    columns."""
    return reads_batches(config) and not config.schema.image_columns


def read_batches(config: JobConfig, part: Any) -> Iterator[Any]:
    """Arrow batches of one part; for a CSV slice also (index, row, record, fields) per malformed line
    and finally (RECORDS, (index, record count)), as read_rows.read_part."""
    if config.source_kind == "parquet":
        for batch in read_row_group_batches(part, columns=list(config.columns), batch_size=BATCH_ROWS):
            yield conform_batch(batch, config.schema)
        return
    data = storage.read_range(config.source_path, part.start, part.end - part.start)  # a few MB (csv_split)
    batches = csv_bytes_batches(data, list(config.columns), BATCH_ROWS)
    for item in batches:
        yield (part.index, *item) if isinstance(item, tuple) else item
    yield RECORDS, (part.index, batches.records)


def count_table(parts: read_rows.SourceParts, config: JobConfig) -> beam.PCollection:
    """The table's checked TableStats, from a branch of its own: batch by batch, column-wise, for
    sources read as batches (image tables too: no dict per row, and the encoding waits for these
    stats), row by row for annotation files."""
    return (
        parts.branch("Stats")
        | "CountParts" >> beam.ParDo(PartStats(config) if reads_batches(config) else encode_rows.PartStats(config))
        | "TableStats" >> beam.CombineGlobally(encode_rows.merge_stats)
        | "CheckTable" >> beam.Map(encode_rows.checked_stats, config)
    )


class PartStats(beam.DoFn):
    """One part's TableStats, counted batch by batch (tfrecorder.rows.columnar_encoder.count_batch)."""

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def setup(self) -> None:
        self.schema = self.config.schema

    def process(self, part):
        stats = TableStats()
        for item in read_batches(self.config, part):
            if isinstance(item, pa.RecordBatch):
                columnar_encoder.count_batch(item, self.schema, self.config.split_ratios, stats)
            elif item[0] != RECORDS:
                stats.malformed += 1
        yield stats


class EncodePart(beam.DoFn):
    """Read, prepare and encode one part batch by batch, appending each split's records to its piece
    (rolled over at max_shard_bytes, one open piece per split per bundle, as EncodeAndWritePieces)."""

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def setup(self) -> None:
        self.schema = self.config.schema
        self._encoder = None
        self._rows_done = encode_rows.RowsDone(self.config)

    def start_bundle(self) -> None:
        self.writers: dict[str, PieceWriter] = {}

    def process(self, part, vocabularies: Mapping[str, list[str]]):
        if self._encoder is None:
            self._encoder = columnar_encoder.TableEncoder(self.schema, vocabularies)
        for item in read_batches(self.config, part):
            if not isinstance(item, pa.RecordBatch):
                yield beam.pvalue.TaggedOutput(RECORDS if item[0] == RECORDS else MALFORMED,
                                               item[1] if item[0] == RECORDS else item)
                continue
            prepared = columnar_encoder.prepare_batch(item, self.schema, self.config.split_ratios)
            encoded = self._encoder.encode(item, prepared)
            if encoded.discards:
                rows = item.take(pa.array([row for row, _ in encoded.discards])).to_pylist()
                for values, (_row, reason) in zip(rows, encoded.discards):
                    yield beam.pvalue.TaggedOutput(encode_rows.DISCARD, (values, reason))
            for code, split in enumerate(columnar_encoder.SPLITS):
                chosen = np.flatnonzero(encoded.codes == code)
                if len(chosen):
                    yield from self._write(split, encoded.records.take(pa.array(chosen)),
                                           encoded.unknown_labels[chosen])
            self._rows_done.add(item.num_rows)

    def _write(self, split: str, records: pa.LargeBinaryArray, unknown: np.ndarray):
        """Append records to the split's piece; close it once it reaches max_shard_bytes (after the record
        that crosses it, as the row graph does) and go on in a new one."""
        framed, ends = frame_records(records)
        start, count = 0, len(ends)
        while start < count:
            writer = self.writers.get(split)
            if writer is None:
                writer = self.writers[split] = PieceWriter(self.config.pieces_dir, split)
            base = int(ends[start - 1]) if start else 0
            cap = base + self.config.max_shard_bytes - writer.bytes
            stop = min(int(np.searchsorted(ends, cap, side="left")) + 1, count)
            writer.write_framed(framed[base:int(ends[stop - 1])], ends[start:stop] - base,
                                int(unknown[start:stop].sum()))
            if writer.bytes >= self.config.max_shard_bytes:
                yield self.writers.pop(split).close()
            start = stop

    def finish_bundle(self):
        for writer in self.writers.values():
            yield encode_rows.in_global_window(writer.close())
        self.writers = {}


def encode_table(pipeline: beam.Pipeline, config: JobConfig) -> tuple:
    """The columnar graph up to the common tail (pipeline.write_outputs): (pieces, discards found by
    each step, checked table stats)."""
    parts = read_rows.SourceParts(pipeline, config)
    stats = count_table(parts, config)
    vocabulary_side = AsSingleton(stats | "Vocabulary" >> beam.Map(lambda found: found.vocabularies))
    encoded = parts.branch("Rows") | "EncodeAndWrite" >> beam.ParDo(EncodePart(config), vocabulary_side).with_outputs(
        encode_rows.DISCARD, MALFORMED, RECORDS, main="pieces")
    malformed = encoded[MALFORMED] | "NumberLines" >> beam.Map(
        read_rows.number_malformed, AsDict(encoded[RECORDS]), len(config.columns))
    return encoded.pieces, {"Read": malformed, "Encode": encoded[encode_rows.DISCARD]}, stats
