"""tfrecorder.sources.staged_stats: a DataFrame's table stats counted as it is staged are those the pipeline's
count pass finds in the staged file."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from beam_pipelines.steps.count_table import BatchPartStats, merge_stats
from support.job_configs import job_config
from tfrecorder.core.schema import Schema
from tfrecorder.sources import dataframe_source, dataframe_staging

SPLITS = (0.8, 0.1, 0.1)


def _frame(rows: int = 40) -> pd.DataFrame:
    return pd.DataFrame({
        "split": (["TRAIN", "TEST", "UNASSIGNED", "VALIDATION"] * rows)[:rows],
        "label": (["cat", "dog", None, "owl", "ant"] * rows)[:rows],
        "n": pd.array([None if i == 13 else i for i in range(rows)], dtype="Int64"),
        "x": np.where(np.arange(rows) == 31, np.nan, np.arange(rows) / 2),
        "s": ["a" if i % 9 else None for i in range(rows)],
        "v": [[float(i), 1.0] for i in range(rows)],
    })


def _counted_by_the_pipeline(table, schema, work_dir) -> object:
    """The pipeline's count pass over the staged file (the frame restaged where the pipeline reads it)."""
    rows = dataframe_source.open_dataframe(table.frame).row_source(schema, work_dir)
    count = BatchPartStats(job_config(source=rows, schema=schema, columns=tuple(table.columns), split_ratios=SPLITS))
    return merge_stats([count._count(part) for part in rows.known_parts()])


@pytest.mark.parametrize("split_column", [True, False])
def test_the_stats_counted_while_staging_are_the_count_pass_ones(tmp_path, monkeypatch, split_column):
    """Chunk by chunk (row groups of 7 rows): rows, missing values (a NaN, a pd.NA, None text), TRAIN and
    the TRAIN labels — with a split column (UNASSIGNED rows hashed whole) and without one."""
    monkeypatch.setattr(dataframe_staging, "MAX_ROW_GROUP_ROWS", 7)
    frame = _frame() if split_column else _frame().drop(columns="split")
    table = dataframe_source.open_dataframe(frame)
    schema = table.infer_schema()
    staged = table.stage(schema, str(tmp_path / "out"), SPLITS)
    expected = _counted_by_the_pipeline(table, schema, str(tmp_path / "work"))
    assert staged.table_stats == expected
    assert expected.rows == 40 and expected.train_found and expected.nullable_columns == ("label", "n", "s", "x")
    rows = table.row_source(schema, str(tmp_path / "job"))
    assert rows.table_stats == expected  # what the job's graph takes instead of counting the file
    assert table.stage(schema, str(tmp_path / "out")).table_stats is None  # no split ratios: nothing counted


def test_a_frame_staged_again_is_counted_once(tmp_path, monkeypatch):
    """A later chunk holding a value its column's type refuses restages the whole frame (that column as
    text): the count starts over with it, and the bad value is a row counted, not a missing one."""
    monkeypatch.setattr(dataframe_staging, "MAX_ROW_GROUP_ROWS", 7)
    frame = _frame()
    frame["n"] = frame["n"].astype(object)
    frame.loc[30, "n"] = "x"
    table = dataframe_source.open_dataframe(frame)
    schema = Schema({**table.infer_schema().to_json(), "n": "IntegerInput"})
    staged = table.stage(schema, str(tmp_path / "out"), SPLITS)
    assert staged.table_stats == _counted_by_the_pipeline(table, schema, str(tmp_path / "work"))
    assert staged.table_stats.rows == 40 and "n" in staged.table_stats.nullable
