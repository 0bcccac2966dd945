"""tfrecorder.sources.coco_source: a COCO file opened from a sample, read by workers as three streamed parts."""
from __future__ import annotations

import pickle

import pytest

from support.datasets import scenes, write_coco
from tfrecorder.rows.dataset_records import DATASET_COLUMNS, dataset_schema
from tfrecorder.sources import coco_source
from tfrecorder.sources.source_protocol import REASONED


def test_open_and_read_every_part(tmp_path):
    path = write_coco(tmp_path, scenes(4))
    table = coco_source.open_coco(str(path))
    assert table.columns == list(DATASET_COLUMNS) and len(table.sample) == 4 and table.rows_estimated
    assert table.rows_estimate == max(4, path.stat().st_size // coco_source.BYTES_PER_RECORD)
    assert table.base_dir == str(tmp_path / "train")  # annotations/instances_train.json → train/
    assert table.worker_files() == [str(path)]
    rows = pickle.loads(pickle.dumps(table.row_source(dataset_schema(), "")))
    assert rows.known_parts() == ["categories", "images", "annotations"] == rows.plan_parts([])
    counts = {part: len(list(rows.read_part(part, table.columns, dataset_schema()))) for part in rows.known_parts()}
    assert counts == {"categories": 3, "images": 4, "annotations": 6}
    assert not rows.reads_batches
    with pytest.raises(NotImplementedError):
        rows.read_batches("images", table.columns, dataset_schema(), 10)


def test_image_root_and_default_root(tmp_path):
    path = write_coco(tmp_path, scenes(2))
    assert coco_source.open_coco(str(path), image_root=str(tmp_path / "elsewhere")).base_dir == str(tmp_path / "elsewhere")
    loose = tmp_path / "loose.json"
    loose.write_text(path.read_text())
    assert coco_source.default_image_root(str(loose)) == str(tmp_path)


def test_not_coco_and_bad_items(tmp_path):
    other = tmp_path / "table.csv"
    other.write_text("a,b\n")
    assert coco_source.open_coco(str(other)) is None
    path = tmp_path / "instances.json"
    path.write_text('{"images": [{"id": 1, "file_name": "a.jpg"}, {"file_name": "b.jpg"}], "annotations": []}')
    rows = coco_source.open_coco(str(path)).rows
    items = list(rows.read_part("images", [], dataset_schema()))
    assert items[1][0] == REASONED and items[1][1][1] == "invalid image: no id"


def _two_files(tmp_path, second_document=None):
    """COCO's layout with one file per split, both numbering their images from 1."""
    train = write_coco(tmp_path, scenes(3), name="train2017")
    val = write_coco(tmp_path, scenes(2, seed=1), name="val2017", document=second_document)
    return train, val


def test_files_of_one_dataset_are_one_table(tmp_path):
    train, val = _two_files(tmp_path)
    table = coco_source.open_coco_files([str(train), str(val)])
    assert isinstance(table, coco_source.CocoFilesTable) and table.base_dir == str(tmp_path)
    assert table.worker_files() == [str(train), str(val)] and len(table.sample) == 5
    rows = pickle.loads(pickle.dumps(table.row_source(dataset_schema(), "")))
    assert rows.kind == "coco" and rows.known_parts() == rows.plan_parts([]) == [
        (0, "categories"), (0, "images"), (0, "annotations"), (1, "images"), (1, "annotations")]
    images = [r for part in rows.known_parts() if part[1] == "images"
              for r in rows.read_part(part, table.columns, dataset_schema())]
    assert [(r["image_key"], r["image_uri"], r["split"], r["source_id"]) for r in images] == [
        ("instances_train2017.json:1", "train2017/scene000.png", "TRAIN", "1"),
        ("instances_train2017.json:2", "train2017/scene001.png", "TRAIN", "2"),
        ("instances_train2017.json:3", "train2017/scene002.png", "TRAIN", "3"),
        ("instances_val2017.json:1", "val2017/scene000.png", "VALIDATION", "1"),
        ("instances_val2017.json:2", "val2017/scene001.png", "VALIDATION", "2")]
    objects = list(rows.read_part((1, "annotations"), table.columns, dataset_schema()))
    assert {o["image_key"] for o in objects} == {"instances_val2017.json:1", "instances_val2017.json:2"}
    assert len(list(rows.read_part((0, "categories"), table.columns, dataset_schema()))) == 3
    with pytest.raises(NotImplementedError):
        rows.read_batches((0, "images"), table.columns, dataset_schema(), 10)


def test_split_option_and_image_root_for_every_file(tmp_path):
    train, val = _two_files(tmp_path)
    table = coco_source.open_coco_files([str(train), str(val)], image_root=str(tmp_path / "all"), split="TEST")
    assert table.base_dir == str(tmp_path / "all") and set(table.sample["split"]) == {"TEST"}
    assert set(table.sample["image_uri"]) == {"scene000.png", "scene001.png", "scene002.png"}
    one = coco_source.open_coco_files([str(train)], split="VALIDATION")  # a single file: open_coco's table
    assert isinstance(one, coco_source.CocoTable) and set(one.sample["split"]) == {"VALIDATION"}
    assert [r["split"] for r in one.rows.read_part("images", [], dataset_schema())] == ["VALIDATION"] * 3


def test_files_must_agree_on_their_categories(tmp_path):
    from support.datasets import coco_document

    other = coco_document(scenes(2, seed=1))
    other["categories"][0]["name"] = "lion"
    train, val = _two_files(tmp_path, other)
    with pytest.raises(ValueError, match=r"instances_val2017.json declares other categories than .*instances_train2017"):
        coco_source.open_coco_files([str(train), str(val)])
    table_csv = tmp_path / "table.csv"
    table_csv.write_text("a,b\n")
    with pytest.raises(ValueError, match="table.csv is not a COCO instances file"):
        coco_source.open_coco_files([str(train), str(table_csv)])
    with pytest.raises(ValueError, match="named twice"):
        coco_source.open_coco_files([str(train), str(train)])
    with pytest.raises(ValueError, match="names none"):
        coco_source.open_coco_files([])


def test_split_option_values():
    assert [coco_source.check_split(v) for v in (None, "train", " Validation", "TEST", "unassigned")] == [
        None, "TRAIN", "VALIDATION", "TEST", "UNASSIGNED"]
    for bad in ("val", "", "dev", 1):
        with pytest.raises(ValueError, match="split must be one of train, validation, test or unassigned"):
            coco_source.check_split(bad)


def test_image_folders_under_one_base():
    assert coco_source.common_root(["/d/train2017", "/d/val2017"]) == "/d"
    assert coco_source.common_root(["gs://b/coco/train2017", "gs://b/coco/val2017"]) == "gs://b/coco"
    assert coco_source.common_root(["gs://b/x", "gs://c/y"]) == "" == coco_source.common_root(["/d/x", "gs://b/y"])
    assert coco_source.folder_under("gs://b/coco/val2017", "gs://b/coco") == "val2017/"
    assert coco_source.folder_under("/d/val2017", "/d") == "val2017/" and coco_source.folder_under("/d", "/d") == ""
    assert coco_source.folder_under("gs://c/y", "") == "gs://c/y/"
    listed = ["/d/annotations/instances_val.json", "/d/annotations/instances_train.json",
              "/d/annotations/captions_train.json", "/d/annotations/old/instances_x.json"]
    assert coco_source.coco_files_in("/d/annotations", listed) == listed[1::-1]
    assert coco_source.coco_files_in("/d", listed + ["/d/val/a.jpg"]) == listed[1::-1]  # COCO's root folder
    assert coco_source.coco_files_in("/d/val", ["/d/val/a.jpg"]) == []
