"""The table-stats branch: whole-table facts (rows, malformed lines, nullable columns, TRAIN, vocabularies) counted per part and merged.

A resumable job commits each part's facts (beam_pipelines.steps.part_commits.part_stats): a resumed job
reads them instead of the part. A CSV's parts are counted while its byte ranges are scanned (each range
counts the slice the plan most likely makes of it: read_rows.SourceParts.count_while_scanning), so the
count step itself reads, without forking, the facts committed for every slice the plan confirmed."""
from __future__ import annotations

from typing import Iterable, Mapping, Optional

import apache_beam as beam
import pyarrow as pa

from tfrecorder.options.job_config import JobConfig
from beam_pipelines.steps.part_commits import committed_stats, part_stats
from beam_pipelines.steps.part_passes import PartPass
from beam_pipelines.steps.read_rows import RECORDS, SourceParts, read_batches, read_part, reads_batches
from tfrecorder.core.progress_bar import report_total
from tfrecorder.rows import columnar_encoder
from tfrecorder.rows.table_stats import StatsCounter, TableStats
from tfrecorder.sources.kept_tables import KEEP


def count_table(parts: SourceParts, config: JobConfig) -> beam.PCollection:
    """The table's checked TableStats, from a branch of its own: batch by batch, column-wise, for
    sources read as batches (image tables too: no dict per row, and the encoding waits for these
    stats), row by row for annotation files; a staged DataFrame's as its staging counted them
    (tfrecorder.sources.staged_stats), without reading the staged file."""
    staged = getattr(config.source, "table_stats", None)
    if staged is not None:
        found = parts.pipeline | "StagedTableStats" >> beam.Create([staged])
    else:
        counter = BatchPartStats(config) if reads_batches(config) else RowPartStats(config)
        if config.resumable and isinstance(counter, BatchPartStats):  # a CSV's parts counted as scanned
            parts.count_while_scanning(counter)
        found = (
            parts.branch("Stats")
            | "CountParts" >> beam.ParDo(counter)
            | "TableStats" >> beam.CombineGlobally(merge_stats)
        )
    return found | "CheckTable" >> beam.Map(checked_stats, config)


class BatchPartStats(PartPass):
    """One part's TableStats, counted batch by batch (tfrecorder.rows.columnar_encoder.count_batch): from
    the columns the counting needs alone when the source's footer says which others hold missing values
    (`counted_columns`: a Parquet file or a staged DataFrame), else from every column."""

    def output_of(self, part) -> TableStats:
        return part_stats(self.config, part, lambda: self._count(part))

    def committed_output(self, part) -> Optional[TableStats]:
        return committed_stats(self.config, part)

    def _count(self, part) -> TableStats:
        plan = counted_columns(self.config, part)
        stats = self._count_batches(part, *plan) if plan is not None else None
        return stats if stats is not None else self._count_batches(part, None, set())

    def _count_batches(self, part, columns: Optional[list[str]], nullable: set[str]) -> Optional[TableStats]:
        """The part's TableStats from `columns` (None: every column), `nullable` holding the columns known
        to hold a missing value; None when a row needs every column to be split (an UNASSIGNED row whose
        split is a hash of the whole row): the part is then counted from every column."""
        stats, config = TableStats(), self.config
        stats.nullable.update(nullable)
        for item in read_batches(config, part, columns, kept=KEEP):  # the encode pass takes its tables
            if isinstance(item, pa.RecordBatch):
                if columns is not None and columnar_encoder.splits_whole_rows(item, config.schema,
                                                                               config.content_splits):
                    return None
                columnar_encoder.count_batch(item, config.schema, config.split_ratios, stats, config.content_splits)
            elif item[0] != RECORDS:
                stats.malformed += 1
        return stats


def counted_columns(config: JobConfig, part) -> Optional[tuple[list[str], set[str]]]:
    """What the count pass reads of a part of a table with a split column when its source settles missing
    values from its footer (`null_facts`): the split, label and image columns and the schema columns the
    footer leaves open, and the columns it says hold missing values. None: read every column."""
    schema = config.schema
    null_facts = getattr(config.source, "null_facts", None)
    if null_facts is None or not schema.split_column:
        return None
    needed = columnar_encoder.columns_counting_needs(schema)
    facts = null_facts(part, [column for column in schema if column not in needed])
    read = [column for column in config.columns if column in needed or (column in schema and column not in facts)]
    return read, {column for column, missing in facts.items() if missing}


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
