"""tfrecorder.sources.voc_source: Pascal VOC folders, split lists as parts, masks found per image."""
from __future__ import annotations

import pickle

import pytest

from support.datasets import scenes, write_voc
from tfrecorder.rows.dataset_records import IMAGE, OBJECT, RECORD, dataset_schema
from tfrecorder.sources import voc_source
from tfrecorder.sources.source_protocol import REASONED


def _read(table):
    rows = pickle.loads(pickle.dumps(table.row_source(dataset_schema(), "")))
    return [item for part in rows.known_parts() for item in rows.read_part(part, table.columns, dataset_schema())]


def test_splits_objects_and_masks(tmp_path):
    write_voc(tmp_path, scenes(4))
    table = voc_source.open_voc(str(tmp_path))
    assert table.rows.parts == (("TRAIN", "ImageSets/Main/train.txt"), ("VALIDATION", "ImageSets/Main/val.txt"))
    items = _read(table)
    images = [i for i in items if i[RECORD] == IMAGE]
    assert {i["image_key"]: i["split"] for i in images} == {"scene000": "TRAIN", "scene001": "VALIDATION",
                                                            "scene002": "TRAIN", "scene003": "TRAIN"}
    assert images[0]["image_uri"] == "JPEGImages/scene000.jpg"
    assert images[0]["segmentation_uri"] == "SegmentationClass/scene000.png"
    objects = [i for i in items if i[RECORD] == OBJECT and i["image_key"] == "scene002"]
    assert [(o["label"], o["instance_index"], o["difficult"], o["truncated"], o["view"]) for o in objects] == [
        ("person", 1, 0, 0, "Frontal"), ("cat", 2, 0, 1, "Frontal"), ("dog", 3, 1, 0, "Frontal")]
    assert objects[0]["box"] == list(map(float, scenes(4)[2].objects[0].box)) and objects[0]["category_id"] is None


def test_without_image_sets_every_annotation_is_read(tmp_path):
    write_voc(tmp_path, scenes(3), segmentation=False)
    for name in ("train", "val", "trainval"):
        (tmp_path / "ImageSets" / "Main" / f"{name}.txt").unlink()
    table = voc_source.open_voc(str(tmp_path))
    assert table.rows.parts == (("", voc_source.ALL),)
    images = [i for i in _read(table) if i[RECORD] == IMAGE]
    assert len(images) == 3 and images[0]["split"] is None and images[0]["objects_uri"] is None


def test_bad_annotation_files_are_discards_and_a_bad_sample_is_a_table_error(tmp_path):
    write_voc(tmp_path, scenes(3))
    (tmp_path / "Annotations" / "scene002.xml").write_text("<annotation><object>")
    (tmp_path / "Annotations" / "scene000.xml").unlink()
    rows = voc_source.VocRows(str(tmp_path), (("TRAIN", "ImageSets/Main/train.txt"),))
    reasons = [item[1][1] for item in rows.read_part(rows.parts[0], [], dataset_schema()) if item[0] == REASONED]
    assert reasons[0].startswith("image missing") and reasons[1].startswith("invalid XML")
    with pytest.raises(ValueError, match="not a readable Pascal VOC folder"):
        voc_source.open_voc(str(tmp_path))


def test_not_voc(tmp_path):
    assert voc_source.open_voc(str(tmp_path)) is None
    (tmp_path / "Annotations").mkdir()
    (tmp_path / "JPEGImages").mkdir()
    with pytest.raises(ValueError, match="without images"):
        voc_source.open_voc(str(tmp_path))
