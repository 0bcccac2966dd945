"""beam_pipelines.steps.count_table: vocabularies and TableStats merged, and the table-level check."""
from __future__ import annotations

import pytest

from beam_pipelines.steps.count_table import VocabularyFn, checked_stats, merge_stats
from tfrecorder.core.progress_bar import total_reported
from tfrecorder.errors import TableError
from tfrecorder.options.job_config import JobConfig
from tfrecorder.rows.table_stats import TableStats
from support.job_configs import job_config


def _config(progress_dir=None) -> JobConfig:
    return job_config(progress_dir=progress_dir)


def test_vocabulary_merges_batches_into_sorted_distinct_labels():
    fn = VocabularyFn()
    first = fn.add_input(fn.create_accumulator(), {"label": {"dog", "cat"}})
    second = fn.add_input(fn.add_input(fn.create_accumulator(), {"label": {"ant"}}), {"kind": {"b", "a"}})
    merged = fn.merge_accumulators([first, second, fn.create_accumulator()])
    assert fn.extract_output(merged) == {"label": ["ant", "cat", "dog"], "kind": ["a", "b"]}




def test_part_stats_merge_into_the_tables():
    parts = [TableStats(rows=3, malformed=1, nullable={"x"}, labels={"label": {"dog"}}),
             TableStats(rows=2, train_found=True, nullable={"a"}, labels={"label": {"cat", "dog"}, "kind": {"b"}}),
             TableStats()]
    merged = merge_stats(parts)
    assert (merged.rows, merged.malformed, merged.rows_in, merged.train_found) == (5, 1, 6, True)
    assert merged.nullable_columns == ("a", "x") and merged.vocabularies == {"kind": ["b"], "label": ["cat", "dog"]}
    assert merge_stats([]) == TableStats()


def test_a_table_without_train_rows_or_without_rows_fails_the_job(tmp_path):
    with pytest.raises(TableError, match="no rows are assigned to TRAIN"):
        checked_stats(merge_stats([TableStats(rows=4), TableStats(rows=2, malformed=3)]), _config())
    with pytest.raises(TableError, match="the table is empty"):
        checked_stats(merge_stats([TableStats(malformed=2), TableStats()]), _config(str(tmp_path)))
    assert total_reported(str(tmp_path)) is None  # a failed check reports no total


def test_checked_stats_pass_through_and_tell_the_progress_bar_the_counted_total(tmp_path):
    stats = TableStats(rows=7, malformed=2, train_found=True)
    assert checked_stats(stats, _config(str(tmp_path))) is stats
    assert total_reported(str(tmp_path)) == 9  # malformed lines are rows in: they end as discards
    assert checked_stats(stats, _config()) is stats  # no progress bar: nothing to report
