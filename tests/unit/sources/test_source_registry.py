"""tfrecorder.sources.source_registry: each kind of source recognised and opened as its own plug-in, whose
RowSource pickles for workers and reads every row of the source through the protocol alone."""
from __future__ import annotations

import gzip
import pickle

import pandas as pd
import pytest

from tfrecorder.core.schema import Schema
from tfrecorder.sources import source_registry
from tfrecorder.sources.annotation_source import AnnotationRows, AnnotationTable
from tfrecorder.sources.csv_source import CsvRows, CsvTable
from tfrecorder.sources.dataframe_source import DataFrameTable
from tfrecorder.sources.gzip_csv_source import GzipCsvRows, GzipCsvTable
from tfrecorder.sources.parquet_source import ParquetRows, ParquetTable
from tfrecorder.sources.staged_rows import StagedRows
from tfrecorder.sources.source_protocol import REASONED

FRAME = pd.DataFrame({"split": ["TRAIN", "TEST", "TRAIN"], "image_uri": ["a.jpg", "b.jpg", "c.jpg"],
                      "label": ["cat", "dog", "cat"]})


def every_row(table, tmp_path) -> list[dict]:
    """All rows of the source as workers read them: parts planned by the protocol (scanning if it must)."""
    schema = table.infer_schema() if table.default_schema() is None else table.default_schema()
    rows = pickle.loads(pickle.dumps(table.row_source(schema, str(tmp_path / "work"))))
    parts = rows.known_parts()
    if parts is None:
        parts = rows.plan_parts([rows.scan(unit) for unit in rows.scan_units()])
    found = [item for part in parts for item in rows.read_part(part, table.columns, schema)]
    return [item for item in found if isinstance(item, dict)]


@pytest.fixture
def sources(tmp_path) -> dict:
    FRAME.to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "t.csv.gz").write_bytes(gzip.compress((tmp_path / "t.csv").read_bytes()))
    FRAME.to_parquet(tmp_path / "t.parquet", index=False)
    (tmp_path / "automl.csv").write_text("TRAIN,gs://b/a.jpg,cat\nTEST,gs://b/b.jpg,dog\nTRAIN,gs://b/c.jpg,cat\n")
    for split, label, name in (("TRAIN", "cat", "a.jpg"), ("TEST", "dog", "b.jpg")):
        (tmp_path / "folder" / split / label).mkdir(parents=True)
        (tmp_path / "folder" / split / label / name).write_bytes(b"x")
    return {"csv": str(tmp_path / "t.csv"), "gzip": str(tmp_path / "t.csv.gz"), "parquet": str(tmp_path / "t.parquet"), "frame": FRAME,
            "annotations": str(tmp_path / "automl.csv"), "folder": str(tmp_path / "folder")}


def test_each_kind_opens_as_its_own_table_with_its_own_row_source(sources, tmp_path):
    expected = {"csv": (CsvTable, CsvRows), "gzip": (GzipCsvTable, GzipCsvRows), "parquet": (ParquetTable, ParquetRows), "frame": (DataFrameTable, StagedRows),
                "annotations": (AnnotationTable, AnnotationRows), "folder": (DataFrameTable, StagedRows)}
    for name, (table_kind, rows_kind) in expected.items():
        table = source_registry.open_table(sources[name])
        assert type(table) is table_kind, name
        schema = table.default_schema() or table.infer_schema()
        assert type(table.row_source(schema, str(tmp_path / name))) is rows_kind, name


def test_every_kind_reads_the_same_rows_through_the_protocol(sources, tmp_path):
    as_text = [{k: str(v) for k, v in row.items()} for row in FRAME.to_dict("records")]
    for name in ("csv", "gzip", "parquet", "frame"):
        assert every_row(source_registry.open_table(sources[name]), tmp_path / name) == as_text, name
    annotation_rows = every_row(source_registry.open_table(sources["annotations"]), tmp_path / "a")
    assert [(r["split"], r["label"]) for r in annotation_rows] == [("TRAIN", "cat"), ("TEST", "dog"), ("TRAIN", "cat")]
    folder_rows = every_row(source_registry.open_table(sources["folder"]), tmp_path / "f")
    assert sorted((r["split"], r["label"]) for r in folder_rows) == [("TEST", "dog"), ("TRAIN", "cat")]


def test_a_forced_annotation_format_wins_and_a_bad_line_is_reasoned(tmp_path):
    path = tmp_path / "plain.csv"
    path.write_text("TRAIN,gs://b/a.jpg,cat\nTRAIN,gs://b/b.jpg,cat,dog\n")  # two labels: not single-label
    table = source_registry.open_table(str(path), annotation_format="automl_classification")
    rows = table.row_source(table.default_schema(), "")
    assert any(isinstance(item, tuple) and item[0] == REASONED for item in rows.read_part(0, table.columns, Schema({})))


@pytest.mark.parametrize("source, message", [(42, "source must be a DataFrame"), ("/no/such/file.csv", "does not exist")])
def test_unusable_sources_are_one_value_error(source, message):
    with pytest.raises(ValueError, match=message):
        source_registry.open_table(source)


def test_only_a_dataframe_is_checked_in_the_driver_and_only_files_are_read_by_workers(sources):
    frame = source_registry.open_table(sources["frame"])
    csv = source_registry.open_table(sources["csv"])
    assert frame.rows_for_driver_check() is not None and frame.worker_files() == []
    assert csv.rows_for_driver_check() is None and csv.worker_files() == [sources["csv"]]
    assert csv.rows_estimated and not frame.rows_estimated


def test_detection_datasets_are_recognised_from_content(tmp_path):
    from support.datasets import scenes, write_coco, write_voc, write_yolo
    from tfrecorder.sources.coco_source import CocoTable
    from tfrecorder.sources.voc_source import VocTable
    from tfrecorder.sources.yolo_source import YoloTable

    coco = write_coco(tmp_path / "coco", scenes(2))
    renamed = coco.with_name("labels.txt")  # content, not the name, says COCO
    renamed.write_bytes(coco.read_bytes())
    assert isinstance(source_registry.open_table(str(renamed)), CocoTable)
    assert isinstance(source_registry.open_table(str(write_voc(tmp_path / "voc", scenes(2)))), VocTable)
    assert isinstance(source_registry.open_table(str(write_yolo(tmp_path / "yolo", scenes(2)))), YoloTable)
    assert isinstance(source_registry.open_table(str(tmp_path / "yolo" / "data.yaml")), YoloTable)
    with pytest.raises(ValueError, match="image_root applies to COCO"):
        source_registry.open_table(FRAME, image_root="x")


def test_coco_files_of_one_dataset_as_a_glob_a_folder_or_a_list(tmp_path):
    from support.datasets import scenes, write_coco
    from tfrecorder.sources.coco_source import CocoFilesTable, CocoTable

    train = write_coco(tmp_path, scenes(2), name="train2017")
    val = write_coco(tmp_path, scenes(2, seed=1), name="val2017")
    (tmp_path / "annotations" / "captions_train2017.json").write_text('{"annotations": []}')  # not instances_*
    by_glob = source_registry.open_table(str(tmp_path / "annotations" / "instances_*2017.json"))
    by_folder = source_registry.open_table(str(tmp_path / "annotations"))
    by_list = source_registry.open_table((train, str(val)))
    by_root = source_registry.open_table(str(tmp_path))  # COCO's root: annotations/ beside the image folders
    for table in (by_glob, by_folder, by_list, by_root):
        assert isinstance(table, CocoFilesTable) and table.worker_files() == [str(train), str(val)]
    assert isinstance(source_registry.open_table([train], split="test"), CocoTable)
    assert isinstance(source_registry.open_table(str(tmp_path / "annotations" / "instances_t*.json")), CocoTable)
    with pytest.raises(ValueError, match="matches no file"):
        source_registry.open_table(str(tmp_path / "annotations" / "instances_*2014.json"))
    with pytest.raises(ValueError, match="split must be one of"):
        source_registry.open_table(str(train), split="dev")
    with pytest.raises(ValueError, match="split applies to COCO"):
        source_registry.open_table(FRAME, split="train")
    folder = tmp_path / "pets" / "TRAIN" / "cat"
    folder.mkdir(parents=True)
    (folder / "a.png").write_bytes((tmp_path / "train2017" / "scene000.png").read_bytes())
    with pytest.raises(ValueError, match="split applies to COCO"):
        source_registry.open_table(str(tmp_path / "pets"), split="train")  # a SPLIT/LABEL image folder
    with pytest.raises(ValueError, match="a list of sources is the COCO instances files"):
        source_registry.open_table([FRAME])
