"""Counters the pipeline reports while it runs; the driver reads them back to show progress."""
from __future__ import annotations

from typing import Any, Optional

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter

from tfrecorder.options.job_config import JobConfig
from tfrecorder.core.progress_bar import ProgressReporter

NAMESPACE = "tfrecorder"
ROWS_PROCESSED = "rows_processed"  # rows written or discarded (by the prepare or the encode step)

rows_processed_counter = beam.metrics.Metrics.counter(NAMESPACE, ROWS_PROCESSED)


def rows_processed_in(metric_results: Any) -> Optional[int]:
    """The rows_processed counter in Beam's MetricResults of a job (a PipelineResult's `metrics()`),
    summed over the steps that count: committed values, else attempted ones; None when the job service
    reports none (yet)."""
    counters = metric_results.query(MetricsFilter().with_namespace(NAMESPACE).with_name(ROWS_PROCESSED))["counters"]
    values = [counter.committed if counter.committed is not None else counter.attempted for counter in counters]
    values = [value for value in values if value is not None]
    return sum(values) if values else None


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


class RowsDoneInChild(RowsDone):
    """RowsDone inside a forked encoding process that works on whole parts: the bar's own file for this
    process (a fresh name: the bar sums every file) is kept up to date batch by batch, and the rows are
    also kept for the parent, which adds them to Beam's counter (`count_rows`) with the part's result:
    Beam's counters live in the parent."""

    def __init__(self, config: JobConfig) -> None:
        super().__init__(config)
        self.rows = 0

    def add(self, rows: int) -> None:
        self.rows += rows
        if rows and self._local:
            self._local.add(rows)

    def take(self) -> int:
        rows, self.rows = self.rows, 0
        return rows


def count_rows(rows: int) -> None:
    """Add rows done elsewhere (a forked process) to Beam's counter."""
    if rows:
        rows_processed_counter.inc(rows)


class RowsCounted:
    """Counts rows done inside an encoding child process; the parent reports them with the batch."""

    def __init__(self) -> None:
        self.rows = 0

    def add(self, rows: int) -> None:
        self.rows += rows

    def take(self) -> int:
        rows, self.rows = self.rows, 0
        return rows
