"""Whole-table facts come from the pipeline, not a driver scan: row count, missing-value columns
(allow_missing), TRAIN check and vocabulary, with the driver's old error texts when the table is unusable."""
from __future__ import annotations

import json
import os

import pytest

import tfrecorder
from tfrecorder.sources import csv_slicing
from tfrecorder.core.schema import Schema
from tfrecorder.rows.table_stats import StatsCounter, TableStats


def test_counter_merges_into_the_facts_of_the_whole_table():
    schema = Schema({"split": "SplitKey", "label": "StringLabel", "x": "FloatInput"})
    counter = StatsCounter(schema, (0.8, 0.1, 0.1))
    first = counter.count([{"split": "TRAIN", "label": "b", "x": "1"}, {"split": "TEST", "label": "z", "x": None}],
                          TableStats())
    second = counter.count([{"split": "train", "label": "a", "x": "2"}, {"split": "bogus", "label": "q", "x": "3"}],
                           TableStats(malformed=2))
    merged = TableStats().merge(first).merge(second)
    assert (merged.rows, merged.malformed, merged.rows_in) == (4, 2, 6)
    assert merged.nullable_columns == ("x",)
    assert merged.vocabularies == {"label": ["a", "b"]}  # TRAIN labels only
    merged.check()


@pytest.mark.parametrize("stats, message", [
    (TableStats(), "the table is empty: there are no rows to convert"),
    (TableStats(rows=3, malformed=1), "no rows are assigned to TRAIN (check the split column and split_ratios)"),
])
def test_check_raises_the_table_level_errors(stats, message):
    with pytest.raises(ValueError) as raised:
        stats.check()
    assert str(raised.value) == message


@pytest.mark.parametrize("text, message", [
    ("split,image_uri,label\n", "the table is empty: there are no rows to convert"),
    ("split,image_uri,label\nTEST,a.jpg,x\nbad\n" + "VALIDATION,b.jpg,y\n" * 50,
     "no rows are assigned to TRAIN (check the split column and split_ratios)"),
])
def test_csv_table_errors_found_by_the_pipeline_fail_with_the_same_message(tmp_path, monkeypatch, text, message):
    monkeypatch.setattr(csv_slicing, "RANGE_BYTES", 64)  # several parallel ranges
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(ValueError) as raised:
        tfrecorder.convert(str(path), tmp_path / "out", progress=False)
    assert str(raised.value) == message
    assert os.listdir(tmp_path / "out") == []  # nothing published, nothing left behind


def test_nullable_columns_and_vocabulary_come_from_every_row_not_the_sample(tmp_path, monkeypatch):
    monkeypatch.setattr(csv_slicing, "RANGE_BYTES", 256)
    monkeypatch.setattr(tfrecorder.sources.csv_source, "SAMPLE_BYTES", 300)  # the driver sees only the first rows
    rows = [f"TRAIN,{i},{'abc'[i % 3]}" for i in range(200)] + ["TRAIN,,late", "TEST,5,unseen"]
    path = tmp_path / "t.csv"
    path.write_text("split,x,label\n" + "\n".join(rows) + "\n")
    result = tfrecorder.convert(str(path), tmp_path / "out", progress=False)
    with open(os.path.join(result["tfrecord_dir"], "metadata.json")) as stream:
        metadata = json.load(stream)
    assert metadata["rows_in"] == 202 and metadata["records_written"] == 202
    assert metadata["features"]["x"]["allow_missing"] is True
    assert metadata["vocabularies"] == {"label": ["a", "b", "c", "late"]}


def test_with_content_splits_unassigned_rows_of_images_count_as_possible_train_rows():
    """Their split is chosen from their image bytes when encoded: their labels join the vocabulary, and
    they satisfy the TRAIN check, whatever their URI hashes to."""
    import pyarrow as pa

    from tfrecorder.rows import columnar_encoder

    schema = Schema({"image_uri": "ImageUri", "split": "SplitKey", "label": "StringLabel"})
    rows = [{"image_uri": f"{i}.png", "split": "UNASSIGNED" if i else "TEST", "label": f"l{i}"} for i in range(40)]
    plain = StatsCounter(schema, (0.5, 0.25, 0.25)).count(rows, TableStats())
    by_content = StatsCounter(schema, (0.5, 0.25, 0.25), content_splits=True).count(rows, TableStats())
    assert by_content.train_found and by_content.vocabularies["label"] == sorted(f"l{i}" for i in range(1, 40))
    assert len(plain.vocabularies["label"]) < 39  # by URI some UNASSIGNED rows are not TRAIN
    batch = pa.RecordBatch.from_pylist(rows)
    columnar = TableStats()
    columnar_encoder.count_batch(batch, schema, (0.5, 0.25, 0.25), columnar, content_splits=True)
    assert columnar.vocabularies == by_content.vocabularies and columnar.train_found
