"""The prepare stage: each row of a batch gets its split and its labels checked; bad rows are discarded."""
from __future__ import annotations

from typing import Any

import apache_beam as beam

from tfrecorder.options.job_config import JobConfig
from beam_pipelines.steps.discard_files import DISCARD
from beam_pipelines.steps.progress_counters import RowsDone
from tfrecorder.errors import RowError
from tfrecorder.rows.row_encoding import prepare_row


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
