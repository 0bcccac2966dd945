"""tfrecorder.sources.dataframe_source: inference from every row, driver-check chunks, staging as Parquet."""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from tfrecorder.sources import dataframe_source, dataframe_staging
from tfrecorder.sources.staged_rows import StagedRows


def test_the_table_holds_a_sample_but_infers_from_every_row(monkeypatch):
    monkeypatch.setattr(dataframe_source, "SAMPLE_ROWS", 3)
    frame = pd.DataFrame({"v": [[1, 2], [3]] * 3 + [[1.5]], 7: [1, 2, 3, 4, 5, 6, "x"], "label": ["a"] * 7})
    table = dataframe_source.frame_table(frame, "/images")
    assert (table.columns, len(table.sample), table.rows_estimate, table.rows_estimated, table.base_dir) == (
        ["v", "7", "label"], 3, 7, False, "/images")
    assert table.infer_schema().to_json() == {"v": "FloatInput[]", "7": "StringInput", "label": "StringLabel"}
    assert table.worker_files() == []  # staged under the job directory: workers read no file of the caller's


def test_a_callers_frame_resolves_relative_paths_against_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert dataframe_source.open_dataframe(pd.DataFrame({"image_uri": ["a.jpg"]})).base_dir == str(tmp_path)


def test_driver_check_rows_come_in_order_missing_values_as_none_in_growing_chunks():
    frame = pd.DataFrame({"n": np.arange(6000), "x": np.where(np.arange(6000) % 2, np.nan, 1.5),
                          "count": pd.array([None, *range(5999)], dtype="Int64"), "s": ["a", None] * 3000})
    rows = list(dataframe_source.frame_table(frame, "").rows_for_driver_check())
    assert [row["n"] for row in rows] == list(range(6000))  # across the chunk edges at 1,000 and 5,000
    assert rows[0] == {"n": 0, "x": 1.5, "count": None, "s": "a"} and rows[5001] == {"n": 5001, "x": None, "count": 5000, "s": None}


def test_driver_check_reads_the_frame_a_chunk_at_a_time_starting_small():
    """The check stops at the first TRAIN row: only the first 1,000 rows are converted before it starts."""
    frame = pd.DataFrame({"n": np.arange(3000)})
    rows = dataframe_source.frame_table(frame, "").rows_for_driver_check()
    assert next(rows) == {"n": 0}
    frame.loc[999, "n"], frame.loc[1000, "n"] = -1, -2  # after the first chunk was taken
    later = list(itertools.islice(rows, 1000))
    assert later[998] == {"n": 999} and later[999] == {"n": -2}  # row 999 came with the first chunk, row 1000 did not


def test_row_source_stages_the_frame_as_arrow_row_groups_in_the_work_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(dataframe_staging, "MAX_ROW_GROUP_ROWS", 7)
    frame = pd.DataFrame({"split": ["TRAIN", "TEST"] * 10, "n": range(20), "label": ["cat", None] * 10})
    table = dataframe_source.open_dataframe(frame)
    schema = table.infer_schema()
    rows = table.row_source(schema, str(tmp_path / "work"))
    assert isinstance(rows, StagedRows)
    staged = str(tmp_path / "work" / dataframe_source.STAGED_FILE)
    # at most 7 rows a group: three groups' worth, staged as four equal ones (balanced_count)
    assert [(part.path, part.row_group) for part in rows.known_parts()] == [(staged, group) for group in range(4)]
    read = [row for part in rows.known_parts() for row in rows.read_part(part, table.columns, schema)]
    assert read == [{"split": ["TRAIN", "TEST"][n % 2], "n": n, "label": None if n % 2 else "cat"} for n in range(20)]


def test_a_frame_staged_before_its_job_moves_into_the_work_dir_or_is_staged_again(tmp_path, monkeypatch):
    """`stage` writes a hidden scratch file beside the output (the fingerprint names the frame by its digest);
    `row_source` renames it into the work dir, the same bytes as staging there directly, and stages again
    for another schema; `discard` removes a scratch file no job took."""
    monkeypatch.setattr(dataframe_staging, "MAX_ROW_GROUP_ROWS", 7)
    frame = pd.DataFrame({"split": ["TRAIN", "TEST"] * 10, "n": range(20), "label": ["cat", None] * 10})
    table = dataframe_source.open_dataframe(frame)
    schema = table.infer_schema()
    staged = table.stage(schema, str(tmp_path / "out"))
    [scratch] = list((tmp_path / "out").iterdir())
    assert scratch.name.startswith(".staging-") and staged.row_groups == 4 and len(staged.digest()) == 64
    rows = table.row_source(schema, str(tmp_path / "job" / "work"))
    moved = tmp_path / "job" / "work" / dataframe_source.STAGED_FILE
    assert not scratch.exists() and [part.row_group for part in rows.known_parts()] == [0, 1, 2, 3]
    direct = dataframe_source.open_dataframe(frame).row_source(schema, str(tmp_path / "direct"))
    assert moved.read_bytes() == (tmp_path / "direct" / dataframe_source.STAGED_FILE).read_bytes()
    assert [row for part in direct.known_parts() for row in direct.read_part(part, table.columns, schema)] == \
        [row for part in rows.known_parts() for row in rows.read_part(part, table.columns, schema)]
    other = dataframe_source.open_dataframe(frame)
    other.stage(schema, str(tmp_path / "out"))
    retyped = type(schema)({**schema, "n": "FloatInput"})
    other.row_source(retyped, str(tmp_path / "again"))  # another schema: staged again, the scratch file gone
    assert list((tmp_path / "out").iterdir()) == [] and (tmp_path / "again" / dataframe_source.STAGED_FILE).exists()
    dataframe_source.open_dataframe(frame).stage(schema, str(tmp_path / "out")).discard()
    assert list((tmp_path / "out").iterdir()) == []
