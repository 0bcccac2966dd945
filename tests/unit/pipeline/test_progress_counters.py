"""beam_pipelines.steps.progress_counters: rows done reported to Beam's counter and the local progress directory."""
from __future__ import annotations

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter

from beam_pipelines.steps import progress_counters
from beam_pipelines.steps.progress_counters import RowsCounted, RowsDone
from tfrecorder.core.progress_bar import rows_reported
from tfrecorder.options.job_config import JobConfig
from support.job_configs import job_config


def _config(progress_dir=None) -> JobConfig:
    return job_config(progress_dir=progress_dir)


def test_rows_done_report_into_the_local_progress_directory(tmp_path):
    first, second = RowsDone(_config(str(tmp_path))), RowsDone(_config(str(tmp_path)))  # two workers
    first.add(3)
    second.add(4)
    first.add(0)
    first.add(5)
    assert rows_reported(str(tmp_path)) == 12
    assert len(list(tmp_path.iterdir())) == 2  # one file per reporter, replaced in place


class _Done(beam.DoFn):
    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def setup(self) -> None:
        self.done = RowsDone(self.config)

    def process(self, rows: int):
        self.done.add(rows)
        yield rows


def test_rows_done_count_in_beams_counter_for_dataflow(tmp_path):
    pipeline = beam.Pipeline("DirectRunner")
    _ = pipeline | beam.Create([2, 0, 5]) | beam.ParDo(_Done(_config()))  # no progress directory: counter only
    result = pipeline.run()
    result.wait_until_finish()
    counters = result.metrics().query(MetricsFilter().with_namespace(progress_counters.NAMESPACE)
                                      .with_name(progress_counters.ROWS_PROCESSED))["counters"]
    assert sum(counter.committed for counter in counters) == 7
    assert progress_counters.rows_processed_in(result.metrics()) == 7
    assert list(tmp_path.iterdir()) == []


def test_no_rows_processed_counter_is_none_not_zero():
    pipeline = beam.Pipeline("DirectRunner")
    _ = pipeline | beam.Create([1])  # no step counts rows
    result = pipeline.run()
    result.wait_until_finish()
    assert progress_counters.rows_processed_in(result.metrics()) is None


def test_rows_counted_in_a_child_are_taken_once():
    counted = RowsCounted()
    counted.add(3)
    counted.add(2)
    assert counted.take() == 5 and counted.take() == 0
    counted.add(1)
    assert counted.take() == 1
