"""beam_pipelines.steps.count_table: vocabularies and TableStats merged, the table-level check, and an
image-free job's parts counted in forked processes."""
from __future__ import annotations

import os

import pandas as pd
import pytest
from apache_beam.utils.windowed_value import WindowedValue

from beam_pipelines.steps.count_table import BatchPartStats, VocabularyFn, checked_stats, merge_stats
from tfrecorder.rows import columnar_encoder
from tfrecorder.sources import dataframe_source, dataframe_staging
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


def test_an_image_free_job_with_encoding_processes_counts_its_parts_in_them(tmp_path, monkeypatch):
    monkeypatch.setattr(dataframe_staging, "MAX_ROW_GROUP_ROWS", 25)  # 4 parts
    frame = pd.DataFrame({"split": ["TRAIN", "TEST", "VALIDATION", "UNASSIGNED"] * 25, "n": range(100),
                          "label": ["cat", "dog", None, "owl"] * 25})
    table = dataframe_source.open_dataframe(frame)
    schema = table.infer_schema()
    counters = tmp_path / "counters.log"
    real_count = columnar_encoder.count_batch

    def logged(*args, **kwargs):
        with open(counters, "a") as log:
            log.write(f"{os.getpid()}\n")
        return real_count(*args, **kwargs)

    monkeypatch.setattr(columnar_encoder, "count_batch", logged)
    counted = {}
    for processes in (1, 2):
        config = job_config(source=table.row_source(schema, str(tmp_path / f"job{processes}" / "_work")), schema=schema,
                            columns=tuple(table.columns), temp_dir=str(tmp_path / f"job{processes}"),
                            encode_processes=processes)
        count = BatchPartStats(config)
        count.setup()
        count.start_bundle()
        found = [stats for part in config.source.known_parts() for stats in count.process(part)]
        found += [stats.value for stats in count.finish_bundle() if isinstance(stats, WindowedValue)]
        count.teardown()
        counted[processes] = merge_stats(found)
        counters.rename(tmp_path / f"counters-{processes}.log")
    assert counted[2] == counted[1] and counted[1].rows == 100 and counted[1].nullable_columns == ("label",)
    pids = {processes: set((tmp_path / f"counters-{processes}.log").read_text().split()) for processes in (1, 2)}
    assert pids[1] == {str(os.getpid())} and len(pids[2]) == 2 and str(os.getpid()) not in pids[2]


def test_parquet_parts_are_counted_from_the_columns_counting_needs_as_from_every_column(tmp_path):
    """A Parquet part is counted from its split, label and the columns whose missing values its footer
    leaves open (a float column, a list holding an empty list), the footer naming the others that hold
    one; a part with an UNASSIGNED row (split by a hash of the whole row) is counted from every column.
    Either way the part's TableStats are those of counting every column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from beam_pipelines.steps.count_table import counted_columns
    from tfrecorder.core.schema import Schema
    from tfrecorder.sources import parquet_source

    rows = 12
    table = pa.table({
        "split": ["TRAIN", "TEST", "VALIDATION"] * 3 + ["TRAIN", "UNASSIGNED", "TRAIN"],
        "label": ["cat", None, "dog", "owl"] * 3, "n": [1, 2, None] + list(range(rows - 3)),
        "x": [0.5] * 7 + [float("nan")] + [1.5] * 4, "v": [[1.0]] * 5 + [[]] + [[2.0]] * 6,
        "s": [f"s{i}" for i in range(rows)]})
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=6)
    source = parquet_source.open_parquet(str(path))
    schema = Schema({"split": "SplitKey", "label": "StringLabel", "n": "IntegerInput", "x": "FloatInput",
                     "v": "FloatInput[]", "s": "StringInput"})
    config = job_config(source=source.row_source(schema, ""), schema=schema, columns=tuple(source.columns))
    count = BatchPartStats(config)
    first, second = config.source.known_parts()
    assert counted_columns(config, first) == (["split", "label", "x", "v"], {"n"})
    assert counted_columns(config, second) == (["split", "label", "x"], set())
    assert count._count_batches(first, *counted_columns(config, first)) is not None
    assert count._count_batches(second, *counted_columns(config, second)) is None  # UNASSIGNED: every column
    for part in (first, second):
        assert count._count(part) == count._count_batches(part, None, set())
    assert merge_stats([count._count(first), count._count(second)]).nullable_columns == ("label", "n", "x")


def test_a_staged_frames_stats_are_taken_as_staging_counted_them(tmp_path):
    """A source that brings its table stats (a DataFrame counted while staged: sources/staged_stats) is not
    read by the graph: its part here is a file that does not exist."""
    import apache_beam as beam
    from apache_beam.testing.util import assert_that, equal_to

    from beam_pipelines.steps.count_table import count_table
    from beam_pipelines.steps.read_rows import SourceParts
    from tfrecorder.core.schema import Schema
    from tfrecorder.sources.parquet_parts import file_parts
    from tfrecorder.sources.parquet_source import ParquetRows

    known = TableStats(rows=5, train_found=True, nullable={"n"}, labels={"label": {"cat"}})
    source = ParquetRows(file_parts(str(tmp_path / "missing.parquet"), 1), table_stats=known)
    config = job_config(source=source, schema=Schema({"n": "IntegerInput", "label": "StringLabel"}),
                        columns=("n", "label"), progress_dir=str(tmp_path))
    with beam.Pipeline("FnApiRunner") as pipeline:
        assert_that(count_table(SourceParts(pipeline, config), config), equal_to([known]))
    assert total_reported(str(tmp_path)) == 5  # checked as counted stats are


def test_a_csvs_parts_are_counted_as_its_ranges_are_scanned_and_not_read_again(tmp_path, monkeypatch):
    """A resumable job's scan counts the part each range most likely becomes and commits its stats; the
    count pass finds the planned parts committed (without forking a process for them) but for those a
    quoted newline moved, which it counts itself. The stats are those of a count of every planned part."""
    from beam_pipelines.steps.part_commits import committed_stats
    from beam_pipelines.steps.read_rows import ScanUnit, SourceParts
    from tfrecorder.sources import csv_slicing, source_registry

    monkeypatch.setattr(csv_slicing, "RANGE_BYTES", 64)
    rows = [f"{split},{n},{label}" for n, (split, label) in enumerate(
        zip(["TRAIN", "TEST", "VALIDATION"] * 10, ["cat", "dog", "", "owl", "ant"] * 6))]
    rows[12] = 'TRAIN,12,"' + "x" * 100 + "\n" + "y" * 100 + '"'  # a quoted newline: ranges start inside its quotes
    path = tmp_path / "t.csv"
    path.write_text("split,n,label\n" + "\n".join(rows) + "\n")
    table = source_registry.open_table(str(path))
    schema = table.infer_schema()
    config = job_config(source=table.row_source(schema, str(tmp_path / "job" / "_work")), schema=schema,
                        columns=tuple(table.columns), temp_dir=str(tmp_path / "job"), resumable=True,
                        encode_processes=2)
    counter = BatchPartStats(config)
    parts = SourceParts(None, config)
    parts.count_while_scanning(counter)
    scan = ScanUnit(config, parts._counter)
    units = config.source.scan_units()
    planned = config.source.plan_parts([scan.output_of(unit) for unit in units])
    committed = [committed_stats(config, part) for part in planned]
    counted = [counter._count(part) for part in planned]
    assert len(units) > 6 and 0 < sum(stats is None for stats in committed) < len(planned) - 3
    assert all(found == fresh for found, fresh in zip(committed, counted) if found is not None)
    counter.setup()
    counter.start_bundle()
    found = [stats for part in planned for stats in counter.process(part)]
    assert counter._forked._pool is not None  # forked for the parts left to count
    found += [stats.value for stats in counter.finish_bundle() if isinstance(stats, WindowedValue)]
    counter.teardown()
    assert merge_stats(found) == merge_stats(counted) and merge_stats(counted).rows == 30
    again = BatchPartStats(config)  # a resumed job's count: every part committed, no process forked
    again.setup()
    again.start_bundle()
    assert merge_stats([stats for part in planned for stats in again.process(part)]) == merge_stats(counted)
    assert again._forked._pool is None and not list(again.finish_bundle())
    again.teardown()
