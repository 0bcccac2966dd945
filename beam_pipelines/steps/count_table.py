"""The table-stats branch: whole-table facts (rows, malformed lines, nullable columns, TRAIN, vocabularies) counted per part and merged.

A resumable job commits each part's facts (beam_pipelines.steps.part_commits.part_stats): a resumed job
reads them instead of the part."""
from __future__ import annotations

from typing import Iterable, Mapping

import apache_beam as beam
import pyarrow as pa

from tfrecorder.options.job_config import JobConfig
from beam_pipelines.steps.part_commits import part_stats
from beam_pipelines.steps.part_passes import PartPass
from beam_pipelines.steps.read_rows import RECORDS, SourceParts, read_batches, read_part, reads_batches
from tfrecorder.core.progress_bar import report_total
from tfrecorder.rows import columnar_encoder
from tfrecorder.rows.table_stats import StatsCounter, TableStats


def count_table(parts: SourceParts, config: JobConfig) -> beam.PCollection:
    """The table's checked TableStats, from a branch of its own: batch by batch, column-wise, for
    sources read as batches (image tables too: no dict per row, and the encoding waits for these
    stats), row by row for annotation files."""
    return (
        parts.branch("Stats")
        | "CountParts" >> beam.ParDo(BatchPartStats(config) if reads_batches(config) else RowPartStats(config))
        | "TableStats" >> beam.CombineGlobally(merge_stats)
        | "CheckTable" >> beam.Map(checked_stats, config)
    )


class BatchPartStats(PartPass):
    """One part's TableStats, counted batch by batch (tfrecorder.rows.columnar_encoder.count_batch)."""

    def output_of(self, part) -> TableStats:
        return part_stats(self.config, part, lambda: self._count(part))

    def _count(self, part) -> TableStats:
        stats = TableStats()
        for item in read_batches(self.config, part):
            if isinstance(item, pa.RecordBatch):
                columnar_encoder.count_batch(item, self.config.schema, self.config.split_ratios, stats,
                                             self.config.content_splits)
            elif item[0] != RECORDS:
                stats.malformed += 1
        return stats


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


class RowPartStats(beam.DoFn):
    """One source part's TableStats (rows, malformed lines, missing values, TRAIN, TRAIN labels), row by
    row: for annotation files (sources read as Arrow batches are counted column-wise, tabular.PartStats)."""

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def setup(self) -> None:
        self._counter = StatsCounter(self.config.schema, self.config.split_ratios, self.config.content_splits)

    def process(self, part):
        yield part_stats(self.config, part, lambda: self._count(part))

    def _count(self, part) -> TableStats:
        stats = TableStats()

        def rows():
            for item in read_part(self.config, part):
                if isinstance(item, dict):
                    yield item
                elif item[0] != RECORDS:
                    stats.malformed += 1

        return self._counter.count(rows(), stats)


def merge_stats(parts: Iterable[TableStats]) -> TableStats:
    merged = TableStats()
    for part in parts:
        merged.merge(part)
    return merged


def checked_stats(stats: TableStats, config: JobConfig) -> TableStats:
    """Fail the job on a table-level error before anything is encoded; tell the progress bar the total."""
    stats.check(require_train=config.base is None)  # rows appended to a job need no TRAIN row
    if config.progress_dir:
        report_total(config.progress_dir, stats.rows_in)
    return stats
