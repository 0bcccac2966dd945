"""The encode stage of image-free tables: each part read, prepared and encoded a whole Arrow batch at a time.

A resumable job closes a part's pieces at the part's end and commits them with its discards
(beam_pipelines.steps.part_commits): a part done once is never read again. A large local job's parts
are read, encoded and committed by forked processes, one per core (`config.encode_processes`,
beam_pipelines.workers.fork_pool): a child answers with the part's manifest alone, which the step
emits as it emits a part committed by an earlier run."""
from __future__ import annotations

from typing import Mapping, Optional

import apache_beam as beam
import numpy as np
import pyarrow as pa

from tfrecorder.options.job_config import JobConfig
from beam_pipelines.steps.bundle_outputs import in_global_window
from beam_pipelines.steps import part_commits
from beam_pipelines.steps.discard_files import DISCARD, DiscardPartWriter
from beam_pipelines.steps.collect_statistics import QUALITY, WrittenRows, first_row_number, part_label
from beam_pipelines.steps.piece_files import PieceWriter
from beam_pipelines.steps.progress_counters import RowsDone, RowsDoneInChild, count_rows
from beam_pipelines.workers.fork_pool import BundleTasks
from beam_pipelines.steps.read_rows import MALFORMED, RECORDS, read_batches
from tfrecorder.format import resume_files
from tfrecorder.rows import columnar_encoder
from tfrecorder.format.framing import frame_records
from tfrecorder.sources.kept_tables import TAKE


class EncodePart(beam.DoFn):
    """Read, prepare and encode one part batch by batch, appending each split's records to its piece
    (rolled over at max_shard_bytes, one open piece per split, closed at the part's end: pieces depend
    only on their part, so every runner, and a resumed job, publishes the same shards)."""

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def setup(self) -> None:
        self.schema = self.config.schema
        self._encoder = None
        self._rows_done = RowsDone(self.config)
        # a resumable job's parts commit their digests, several buckets under one grouping key: one block each
        self._written = WrittenRows(self.schema, buckets_per_block=self.config.buckets_per_key if self.config.resumable
                                    else 1) if self.config.statistics else None
        self._drops = self._written is not None and self.config.duplicates == "drop"  # rows carry their places
        self._forked: Optional[BundleTasks] = None
        if self.config.resumable and self.config.encode_processes > 1:
            self._forked = BundleTasks(self.config.encode_processes, self._part_in_child)

    def teardown(self) -> None:
        if self._forked is not None:
            self._forked.close()

    def start_bundle(self) -> None:
        self.writers: dict[str, PieceWriter] = {}
        if self._written is not None:
            self._written.take_statistics()  # what a failed bundle attempt left
        if self._forked is not None:
            self._forked.start_bundle()

    def process(self, part, vocabularies: Mapping[str, list[str]]):
        if self._encoder is None:  # before the children fork: they inherit it
            self._encoder = columnar_encoder.TableEncoder(self.schema, vocabularies)
        if self._forked is not None:
            for manifest, rows in self._forked.submit(part):
                count_rows(rows)
                yield from part_commits.emit(self.config, manifest)
            return
        if self.config.resumable:
            yield from part_commits.emit(self.config, self._part_manifest(part))
            return
        yield from self._encode(part)
        for writer in self.writers.values():  # pieces end with their part, as a resumable job's do
            yield writer.close()
        self.writers = {}

    def _part_in_child(self, part) -> tuple[dict, int]:
        """A forked child's handler: the part's manifest (`_part_manifest`) and the rows it did."""
        if not isinstance(self._rows_done, RowsDoneInChild):
            self._rows_done = RowsDoneInChild(self.config)
        return self._part_manifest(part), self._rows_done.take()

    def _part_manifest(self, part) -> dict:
        """A resumable job's part: its pieces (closed at the part's end) and discards committed in its
        manifest, or the manifest an earlier attempt or run committed (part_commits)."""
        manifest = part_commits.committed(self.config, part)
        if manifest is None:
            pieces, records, malformed, quality = [], None, [], []
            if self._written is not None:
                self._written.take_statistics()  # the part's quality output starts empty
            discards = DiscardPartWriter(self.config.discards_dir, self.config.columns)
            for output in self._encode(part):
                if not isinstance(output, beam.pvalue.TaggedOutput):
                    pieces.append(output)
                elif output.tag == DISCARD:
                    discards.write(*output.value)
                elif output.tag == RECORDS:
                    records = output.value
                elif output.tag == QUALITY:
                    quality.append(output.value)
                else:
                    malformed.append(output.value)
            pieces.extend(writer.close() for writer in self.writers.values())
            self.writers = {}
            if self._written is not None:  # the part's last digests and its statistics (issue 29)
                quality.extend(output.value for output in self._written.finish())
            closed = discards.close()
            manifest = part_commits.commit(self.config, part, self._rows, pieces, closed if closed.rows else None,
                                           records, malformed, quality=quality if self._written is not None else None)
        return manifest

    def _encode(self, part):
        self._rows = 0
        part_name, offset = part_label(part, self.config.work_dir), first_row_number(part)
        source = resume_files.part_key(part) if self._drops else ""
        for item in read_batches(self.config, part, kept=TAKE):  # the count pass's parse, where it kept one
            if not isinstance(item, pa.RecordBatch):
                yield beam.pvalue.TaggedOutput(RECORDS if item[0] == RECORDS else MALFORMED,
                                               item[1] if item[0] == RECORDS else item)
                continue
            prepared = columnar_encoder.prepare_batch(item, self.schema, self.config.split_ratios)
            encoded = self._encoder.encode(item, prepared)
            if encoded.discards:
                rows = item.take(pa.array([row for row, _ in encoded.discards])).to_pylist()
                for values, (_row, reason) in zip(rows, encoded.discards):
                    yield beam.pvalue.TaggedOutput(DISCARD, (values, reason))
            order, runs = columnar_encoder.split_runs(encoded.codes)
            records, unknowns = encoded.records, encoded.unknown_labels
            rows = np.flatnonzero(prepared.codes != columnar_encoder.DISCARDED)  # each record's row in the batch
            if order is not None:
                records, unknowns, rows = records.take(pa.array(order)), unknowns[order], rows[order]
            described = None
            if self._written is not None:
                described = encoded.parsed_batch(item)
                if order is not None or len(rows) < item.num_rows:
                    described = described.take(pa.array(rows))
            for code, start, stop in runs:
                split, unknown = columnar_encoder.SPLITS[code], unknowns[start:stop]
                written = records.slice(start, stop - start)
                cells = written.to_numpy(zero_copy_only=False)  # each record as bytes: checksums and digests
                closed = list(self._write(split, written, cells, unknown))  # self._segments: where they went
                if self._written is not None:
                    places = (source, *_places(self._segments, unknown)) if self._drops else None
                    self._written.add_records(split, described.slice(start, stop - start), cells, part_name,
                                              offset + rows[start:stop], places)
                yield from closed
            if self._written is not None:
                yield from self._written.end_batch()
            offset += item.num_rows
            self._rows_done.add(item.num_rows)
            self._rows += item.num_rows

    def _write(self, split: str, records: pa.LargeBinaryArray, cells: np.ndarray, unknown: np.ndarray):
        """Append records (`cells`: each as bytes) to the split's piece; close it once it reaches
        max_shard_bytes (after the record that crosses it, as the row graph does) and go on in a new one."""
        framed, ends = frame_records(records, cells)
        start, count = 0, len(ends)
        self._segments = []  # (piece file name, its first record here, records) per piece written to
        while start < count:
            writer = self.writers.get(split)
            if writer is None:
                writer = self.writers[split] = PieceWriter(self.config.pieces_dir, split)
            base = int(ends[start - 1]) if start else 0
            cap = base + self.config.max_shard_bytes - writer.bytes
            stop = min(int(np.searchsorted(ends, cap, side="left")) + 1, count)
            self._segments.append((writer.path.rsplit("/", 1)[-1], writer.records, stop - start))
            writer.write_framed(framed[base:int(ends[stop - 1])], ends[start:stop] - base,
                                int(unknown[start:stop].sum()))
            if writer.bytes >= self.config.max_shard_bytes:
                yield self.writers.pop(split).close()
            start = stop

    def finish_bundle(self):
        for writer in self.writers.values():
            yield in_global_window(writer.close())
        self.writers = {}
        for output in (self._written.finish() if self._written is not None else ()):
            yield in_global_window(output)
        for manifest, rows in (self._forked.finish() if self._forked is not None else ()):
            count_rows(rows)
            for output in part_commits.emit(self.config, manifest):
                yield in_global_window(output)


def _places(segments: list[tuple[str, int, int]], unknown: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Where a run of records went (duplicates="drop"): the pieces' file names, and per record an int64
    row (index into those names, record number in its piece, unknown labels), built column-wise."""
    names = [name for name, _first, _count in segments]
    counts = np.array([count for _name, _first, count in segments], dtype=np.int64)
    firsts = np.array([first for _name, first, _count in segments], dtype=np.int64)
    pieces = np.repeat(np.arange(len(segments), dtype=np.int64), counts)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    records = np.repeat(firsts, counts) + np.arange(int(counts.sum()), dtype=np.int64) - starts
    return names, np.column_stack([pieces, records, np.asarray(unknown, dtype=np.int64)])
