"""tfrecorder.sources.annotation_source: annotation files recognised, read as one part, their schema implied."""
from __future__ import annotations

import pickle

import pandas as pd
import pytest

from tfrecorder.core.schema import Schema
from tfrecorder.sources import annotation_source
from tfrecorder.sources.source_protocol import REASONED

SINGLE = "TRAIN,gs://b/a.jpg,cat\nTRAIN,gs://b/b.jpg,cat,dog\nTEST,gs://b/c.jpg,dog\n"  # line 2: two labels


@pytest.fixture
def automl(tmp_path) -> str:
    path = tmp_path / "automl.csv"
    path.write_text(SINGLE)
    return str(path)


def test_workers_read_the_file_as_one_part_with_unreadable_lines_reasoned(automl):
    table = annotation_source.open_annotations(automl, annotation_format="automl_classification")
    rows = pickle.loads(pickle.dumps(table.row_source(table.default_schema(), "/unused")))
    assert rows is not table.rows and rows == table.rows and rows.kind == "annotations"
    assert rows.known_parts() == rows.plan_parts([]) == [0] and rows.scan_units() == [] and not rows.reads_batches
    assert list(rows.read_part(0, table.columns, Schema({}))) == [
        {"line": 1, "split": "TRAIN", "image_uri": "gs://b/a.jpg", "label": "cat"},
        (REASONED, ({"line": 2, "split": "TRAIN", "image_uri": "gs://b/b.jpg", "label": "cat"},
                    "malformed AutoML row: line 2 has 2 labels, single-label expects one")),
        {"line": 3, "split": "TEST", "image_uri": "gs://b/c.jpg", "label": "dog"}]
    with pytest.raises(NotImplementedError):
        rows.read_batches(0, table.columns, Schema({}), 10)


def test_the_driver_checks_readable_rows_and_samples_them(automl, tmp_path):
    table = annotation_source.open_annotations(automl, annotation_format="automl_classification")
    assert [row["line"] for row in table.rows_for_driver_check()] == [1, 3]
    assert table.rows_estimate == 2 and list(table.sample["line"]) == [1, 3]
    assert table.columns == ["line", "split", "image_uri", "label"]
    assert (table.base_dir, table.worker_files()) == (str(tmp_path), [automl])


def test_the_format_implies_the_schema(automl, tmp_path):
    classification = annotation_source.open_annotations(automl, annotation_format="automl_classification")
    assert classification.default_schema() == Schema({"split": "SplitKey", "image_uri": "ImageUri", "label": "StringLabel"})
    multi = annotation_source.open_annotations(automl)  # two labels on a line: recognised as multi-label
    assert multi.rows.format == "automl_multilabel"
    assert multi.default_schema() == Schema({"split": "SplitKey", "image_uri": "ImageUri", "label": "MultiLabel"})
    boxes = tmp_path / "boxes.csv"
    boxes.write_text("TRAIN,gs://b/a.jpg,cat,0.1,0.2,,,0.3,0.4,,\nTEST,gs://b/b.jpg,dog,0.1,0.1,,,0.5,0.5,,\n")
    detection = annotation_source.open_annotations(str(boxes))
    assert detection.rows.format == "automl_detection" and detection.default_schema() is None  # detection has its own
    assert detection.columns == ["line", "split", "image_uri", "label", "xmin", "ymin", "xmax", "ymax"]


def test_other_sources_are_not_annotations(tmp_path, automl):
    plain = tmp_path / "plain.csv"
    plain.write_text("split,image_uri,label\nTRAIN,a.jpg,cat\n")
    (tmp_path / "t.parquet").write_text(SINGLE)  # by its name a Parquet file, whatever it holds
    for source in (str(plain), str(tmp_path / "t.parquet"), str(tmp_path), str(tmp_path / "none.csv"), pd.DataFrame()):
        assert annotation_source.open_annotations(source) is None


def test_a_relative_path_is_made_absolute_and_bad_formats_are_value_errors(automl, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert annotation_source.open_annotations("automl.csv").rows.path == automl
    with pytest.raises(ValueError, match="annotation_format must be one of"):
        annotation_source.open_annotations(automl, annotation_format="coco")
    with pytest.raises(ValueError, match="not to DataFrame sources"):
        annotation_source.open_annotations(pd.DataFrame(), annotation_format="vertex_jsonl")
