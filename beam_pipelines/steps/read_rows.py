"""The read stage: a source's parts read into the pipeline as rows keyed by column name, in parallel.

The job's RowSource (one plug-in per source kind, tfrecorder.sources.source_protocol) says how the
source is cut into parts that workers read independently — CSV byte slices found by a parallel scan,
Parquet row groups (a user's files, or a DataFrame the driver staged), an annotation file whole — and
how one part reads into rows. This stage knows only that protocol. Parts are small descriptors,
reshuffled so that every worker gets some; rows are never materialised between steps. gs:// files go
through tfrecorder.io.storage, never through Beam's GCS filesystem (whose credential lookup stalls when
there are none).
"""
from __future__ import annotations

from typing import Any, Iterator, Optional, Sequence

import apache_beam as beam
from apache_beam.pvalue import AsDict, AsList

from beam_pipelines.steps.part_passes import PartPass
from tfrecorder.io import storage
from tfrecorder.options.job_config import JobConfig
from tfrecorder.sources.csv_source import record_reason
from tfrecorder.sources.kept_tables import KeptTables
from tfrecorder.sources.source_protocol import REASONED, RECORDS

BATCH_ROWS = 16_384  # rows per Arrow batch when a part is read column-wise
KEPT_DIR = "kept-tables"  # under the job's work directory: parts' parsed tables between passes (kept_tables)
MALFORMED = "malformed"


class SourceParts:
    """The parts of the job's source, as independent copies: one per branch of the graph that reads the rows.

    Each branch must start from its own root: Beam's in-process runner fuses a consumer with its
    producer only when nothing downstream of the producer feeds the consumer's side inputs, so an
    encoding branch sharing its root with the branch that computes the table stats would have its rows
    held back (materialised) until the stats are ready. A source's scan (a CSV's byte ranges) is
    computed once for every branch.
    """

    def __init__(self, pipeline: beam.Pipeline, config: JobConfig) -> None:
        self.pipeline, self.config = pipeline, config
        self._scans = None
        self._counter: Optional[PartPass] = None

    def count_while_scanning(self, counter: PartPass) -> None:
        """Have each scan unit also run `counter` (a pass whose output a resumable job commits: the count
        step, count_table) on the part the plan most likely makes of it (the source's `likely_part`), so
        that the pass over the planned parts finds that work committed instead of reading the part
        again. Before the first branch: the scan is made once."""
        if self._scans is None and hasattr(self.config.source, "likely_part"):
            self._counter = counter

    def branch(self, label: str) -> beam.PCollection:
        known = self.config.source.known_parts()
        if known is not None:  # Create reshuffles two or more elements itself
            return self.pipeline | f"{label}Parts" >> beam.Create(list(known))
        source = self.config.source
        return (
            self.pipeline
            | f"{label}PlanParts" >> beam.Create([None])
            | f"{label}Parts" >> beam.FlatMap(lambda _, scans: source.plan_parts(scans), AsList(self._scan()))
            | f"{label}SpreadParts" >> beam.Reshuffle()
        )

    def _scan(self) -> beam.PCollection:
        if self._scans is None:
            self._scans = (
                self.pipeline
                | "ScanUnits" >> beam.Create(self.config.source.scan_units())
                | "Scan" >> beam.ParDo(ScanUnit(self.config, self._counter))
            )
        return self._scans


class ScanUnit(PartPass):
    """The source's scan of one unit (a CSV byte range); with a `counter`, also that pass's work on the
    part the unit most likely becomes (SourceParts.count_while_scanning): committed, not emitted."""

    def __init__(self, config: JobConfig, counter: Optional[PartPass] = None) -> None:
        super().__init__(config)
        self.counter = counter

    def output_of(self, unit: Any) -> Any:
        scan = self.config.source.scan(unit)
        if self.counter is not None:
            part = self.config.source.likely_part(unit, scan)
            if part is not None:
                self.counter.output_of(part)
        return scan


def read_part(config: JobConfig, part: Any) -> Iterator[Any]:
    """Rows of one part of the job's source, with the tuples its RowSource adds (see source_protocol)."""
    return config.source.read_part(part, config.columns, config.schema)


class _ReadPart(beam.DoFn):
    def __init__(self, config: JobConfig, batch_rows: Optional[int]) -> None:
        self.config, self.batch_rows = config, batch_rows

    def process(self, part):
        batch: list[dict[str, Any]] = []
        for item in read_part(self.config, part):
            if isinstance(item, dict):
                if self.batch_rows is None:
                    yield item
                    continue
                batch.append(item)
                if len(batch) == self.batch_rows:
                    yield batch
                    batch = []
            elif item[0] == RECORDS:
                yield beam.pvalue.TaggedOutput(RECORDS, item[1])
            elif item[0] == REASONED:
                yield beam.pvalue.TaggedOutput(REASONED, item[1])
            else:
                yield beam.pvalue.TaggedOutput(MALFORMED, item)
        if batch:
            yield batch


def number_malformed(item: tuple, records: dict[int, int], expected: int) -> tuple[dict[str, Any], str]:
    """(slice index, row, record in slice, problem) → (row, reason) with the line number in the file (the
    problem: a wrong field count, or invalid text)."""
    index, row, record, problem = item
    line = 2 + record + sum(count for i, count in records.items() if i < index)  # line 1 is the header
    return row, record_reason(line, problem, expected)


class ReadRows(beam.PTransform):
    """Rows of the parts as dicts — or, with `batch_rows`, as lists of up to that many rows of one part,
    so that Beam's per-element cost is paid per batch from the start; the second output carries
    (row, reason) for unparseable CSV lines."""

    def __init__(self, config: JobConfig, batch_rows: Optional[int] = None) -> None:
        super().__init__()
        self.config, self.batch_rows = config, batch_rows

    def expand(self, parts):
        results = parts | "ReadParts" >> beam.ParDo(_ReadPart(self.config, self.batch_rows)).with_outputs(
            MALFORMED, RECORDS, REASONED, main="rows")
        numbered = results[MALFORMED] | "NumberLines" >> beam.Map(
            number_malformed, AsDict(results[RECORDS]), len(self.config.columns))
        return results.rows, (numbered, results[REASONED]) | "AllMalformed" >> beam.Flatten()


def reads_batches(config: JobConfig) -> bool:
    """Whether the job's source reads as Arrow batches (a CSV, Parquet files or a staged DataFrame)."""
    return config.source.reads_batches


def read_batches(config: JobConfig, part: Any, columns: Optional[Sequence[str]] = None,
                 kept: Optional[str] = None) -> Iterator[Any]:
    """Arrow batches of one part (every column, or only `columns`); for a CSV slice also (index, row,
    record, fields) per malformed line and finally (RECORDS, (index, record count)), as read_part.
    `kept` (kept_tables.KEEP or TAKE): a pass that keeps the tables it parses for the next pass, or takes
    them (a local job whose source `keeps_tables`)."""
    chosen = config.columns if columns is None else columns
    tables = kept_tables(config, kept)
    if tables is None:
        return config.source.read_batches(part, chosen, config.schema, BATCH_ROWS)
    return config.source.read_batches(part, chosen, config.schema, BATCH_ROWS, kept=tables)


def kept_tables(config: JobConfig, mode: Optional[str]) -> Optional[KeptTables]:
    """The job's kept tables for a pass in `mode`, when its source keeps them and its work directory is
    local (a remote job's passes run on other machines: a part is parsed where it is read)."""
    if mode is None or not getattr(config.source, "keeps_tables", False) or storage.is_remote(config.work_dir):
        return None
    return KeptTables(storage.join(config.work_dir, KEPT_DIR), mode)
