"""What every source kind provides: a `Table` the driver opens from a sample, and a `RowSource` workers read.

A source kind is one module of this package (csv_source, parquet_source, dataframe_source,
image_folder_source, annotation_source, coco_source, voc_source, yolo_source) registered in
`source_registry`. The driver opens the source as a Table (columns, a sample for schema inference, a row estimate: never the whole source), and the
Table hands the pipeline a RowSource: a small frozen value, pickled to every worker, that says how the
source is cut into parts and how one part reads into rows. The pipeline's read stage
(beam_pipelines.steps.read_rows) knows only this protocol, never a kind.
"""
from __future__ import annotations

import dataclasses
import os
import posixpath
from typing import Any, Iterator, Optional, Protocol, Sequence

import pandas as pd

from tfrecorder.core.schema import Schema, infer_schema
from tfrecorder.io import storage

SAMPLE_ROWS = 10_000  # rows the driver reads for schema inference
RECORDS = "records"  # (RECORDS, (part index, records in it)): numbers discarded CSV records once every part is read
REASONED = "reasoned"  # (REASONED, (row, reason)): a line the source itself could not read, its line number in the reason
PARTS_MULTIPLE = 4  # a source cut into more than two parts is cut into a multiple of this many (`balanced_count`)


def balanced_count(parts: int) -> int:
    """How many equal parts to cut a source into that holds `parts` of its nominal size: more than two are
    rounded up to a multiple of PARTS_MULTIPLE, so that two or four encoding processes each get the same
    share. Eleven 16 MB ranges and a remainder left two processes doing six and five parts (the one with
    six finished 0.14 s later); twelve equal ones give six each. The plan depends on the source alone,
    never on the machine, so a job resumed elsewhere finds its committed parts."""
    if parts <= 2:
        return parts
    return -(-parts // PARTS_MULTIPLE) * PARTS_MULTIPLE


class RowSource(Protocol):
    """How workers read a source, part by part (picklable: no open files, no DataFrames).

    `read_part` yields each row as {column: value} and, besides rows, tuples the read stage routes:
    (part index, row, record in part, problem) for a CSV record that is malformed (problem: its field
    count) or holds bytes invalid in its encoding (problem: what is wrong, a str), (RECORDS, (index,
    count)) once per CSV part, and (REASONED, (row, reason)) for a line the source could not parse.
    """

    kind: str  # for messages and metadata only: never compared to choose behaviour

    def known_parts(self) -> Optional[Sequence[Any]]:
        """The parts, when known without reading the source; None when they come from a parallel scan."""

    def scan_units(self) -> Sequence[Any]:
        """What the parallel scan reads independently (when `known_parts()` is None)."""

    def scan(self, unit: Any) -> Any:
        """The scan of one unit."""

    def plan_parts(self, scans: Sequence[Any]) -> list[Any]:
        """The parts, from every unit's scan. A source may also offer `likely_part(unit, scan)`: the part
        the plan most likely makes of `unit` (or None), which a worker may count before the plan exists
        (beam_pipelines.steps.read_rows.SourceParts.count_while_scanning)."""

    def read_part(self, part: Any, columns: Sequence[str], schema: Schema) -> Iterator[Any]:
        """Rows of one part (and the tuples described above)."""

    @property
    def reads_batches(self) -> bool:
        """Whether `read_batches` reads a part as Arrow record batches (the columnar graph's input)."""

    def read_batches(self, part: Any, columns: Sequence[str], schema: Schema, batch_rows: int) -> Iterator[Any]:
        """Arrow batches of one part; for a CSV part also the malformed-line and RECORDS tuples of read_part.
        A source whose parts cost a parse (`keeps_tables` True) also takes `kept`: the job's
        tfrecorder.sources.kept_tables.KeptTables, so that one pass's parse serves the next."""


@dataclasses.dataclass
class Table:
    """A source as the driver sees it: its columns, a sample, where relative image paths resolve, and a
    row estimate (exact for a DataFrame and Parquet). Each kind subclasses it."""

    columns: list[str]
    sample: pd.DataFrame  # rows with pandas' dtype inference, for schema inference
    base_dir: str  # relative image paths are resolved against this
    rows_estimate: int
    rows_estimated: bool = False  # True when rows_estimate is an extrapolation (a CSV's head)

    def infer_schema(self) -> Schema:
        """The schema inferred when none is given (a DataFrame uses every row, Parquet its Arrow types)."""
        return infer_schema(self.sample)

    def default_schema(self) -> Optional[Schema]:
        """The schema the source itself implies (annotation files), else None: infer or take the caller's."""
        return None

    def rows_for_driver_check(self) -> Optional[Iterator[dict[str, Any]]]:
        """Rows the driver checks before the pipeline starts (a DataFrame is in memory); None when the
        pipeline's own table check covers the source."""
        return None

    def worker_files(self) -> list[str]:
        """The files workers read (a DataFrame has none: it is staged under the job directory)."""
        return []

    def stage(self, schema: Schema, output_dir: str, split_ratios: Optional[Sequence[float]] = None,
              content_splits: bool = False) -> Optional[Any]:
        """Stage what workers will read before the job has a directory, when the driver holds it (a
        DataFrame: tfrecorder.sources.dataframe_staging.StagedFrame, which `discard` removes if the job
        never takes it, with its table stats when `split_ratios` are given); None for sources the
        workers read where they are."""
        return None

    def row_source(self, schema: Schema, work_dir: str) -> RowSource:
        """The RowSource the pipeline reads (a DataFrame is staged under `work_dir` first)."""
        raise NotImplementedError


class OnePart:
    """The part plan of a source read whole by one worker (an annotation file, a gzip stream): part 0,
    nothing to scan."""

    def known_parts(self) -> list[int]:
        return [0]

    def scan_units(self) -> list:
        return []

    def scan(self, unit: Any) -> Any:
        raise NotImplementedError("a source read as one part has nothing to scan")

    def plan_parts(self, scans: Sequence[Any]) -> list[int]:
        return [0]


@dataclasses.dataclass
class FileTable(Table):
    """A table of one file, read by workers through `rows` (a RowSource with the file's `path`)."""

    rows: Any = None

    def worker_files(self) -> list[str]:
        return [self.rows.path]

    def row_source(self, schema: Schema, work_dir: str) -> RowSource:
        return self.rows


def parent_dir(path: str) -> str:
    """The directory a table file sits in (absolute when local): where its relative image URIs are resolved."""
    if storage.is_remote(path):
        return posixpath.dirname(path.rstrip("/"))
    return os.path.dirname(os.path.abspath(path))


def top_names(path: str, listed: Sequence[str]) -> set[str]:
    """The first path component under `path` of every listed file (its folders' and files' names)."""
    prefix = path.rstrip("/").replace("\\", "/") + "/"
    return {f.replace("\\", "/")[len(prefix):].split("/", 1)[0] for f in listed
            if f.replace("\\", "/").startswith(prefix)}
