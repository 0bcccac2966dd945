"""tfrecorder.sources.source_protocol: the Table defaults and parent_dir, local and gs://."""
from __future__ import annotations

import pandas as pd
import pytest

from tfrecorder.core.schema import Schema
from tfrecorder.sources.source_protocol import Table, balanced_count, parent_dir


def test_parent_dir_of_a_local_file_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert parent_dir("data/table.csv") == str(tmp_path / "data")
    assert parent_dir("table.csv") == str(tmp_path)
    assert parent_dir(str(tmp_path / "a" / "b.csv")) == str(tmp_path / "a")


def test_parent_dir_of_a_gcs_object_is_its_url_folder():
    assert parent_dir("gs://bucket/tables/t.csv") == "gs://bucket/tables"
    assert parent_dir("gs://bucket/t.csv") == "gs://bucket"
    assert parent_dir("gs://bucket/folder/") == "gs://bucket"  # a folder's parent, not the folder itself


def test_a_table_infers_from_its_sample_and_asks_nothing_else_of_the_driver():
    sample = pd.DataFrame({"split": ["TRAIN"], "image_uri": ["a.jpg"], "n": [3], "label": ["cat"]})
    table = Table(list(sample.columns), sample, "/images", rows_estimate=100, rows_estimated=True)
    assert table.infer_schema() == Schema({"split": "SplitKey", "image_uri": "ImageUri", "n": "IntegerInput",
                                           "label": "StringLabel"})
    assert table.default_schema() is None and table.rows_for_driver_check() is None and table.worker_files() == []
    with pytest.raises(NotImplementedError):
        table.row_source(table.infer_schema(), "job/_work")  # each kind says how workers read it


def test_top_names_of_a_listing():
    from tfrecorder.sources.source_protocol import top_names

    listed = ["gs://b/d/Annotations/a.xml", "gs://b/d/data.yaml", "gs://b/dd/x.jpg", "gs://b/d/JPEGImages/a.jpg"]
    assert top_names("gs://b/d/", listed) == {"Annotations", "data.yaml", "JPEGImages"}


def test_more_than_two_parts_are_a_multiple_of_four():
    assert [balanced_count(parts) for parts in range(1, 14)] == [1, 2, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 16]
