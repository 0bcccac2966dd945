"""tfrecorder.sources.yolo_source: data.yaml or images/ + labels/, box and polygon lines, class k as id k + 1."""
from __future__ import annotations

import pickle

import pytest

from support.datasets import scenes, write_yolo
from tfrecorder.rows.dataset_records import CATEGORY, IMAGE, OBJECT, RECORD, RELATIVE, dataset_schema
from tfrecorder.sources import yolo_source
from tfrecorder.sources.source_protocol import REASONED


def _read(table):
    rows = pickle.loads(pickle.dumps(table.row_source(dataset_schema(), "")))
    return [item for part in rows.known_parts() for item in rows.read_part(part, table.columns, dataset_schema())]


def test_data_yaml_splits_names_and_boxes(tmp_path):
    write_yolo(tmp_path, scenes(4))
    for path in (tmp_path, tmp_path / "data.yaml"):
        table = yolo_source.open_yolo(str(path))
        assert table.rows.parts == (("TRAIN", "images/train"), ("VALIDATION", "images/val"), ("", ""))
    items = _read(table)
    assert [(c["category_id"], c["label"]) for c in items if c[RECORD] == CATEGORY] == [(1, "cat"), (2, "dog"),
                                                                                        (3, "person")]
    images = [i for i in items if i[RECORD] == IMAGE]
    assert images[0]["image_uri"] == "images/train/scene000.png" and images[0]["split"] == "TRAIN"
    objects = [i for i in items if i[RECORD] == OBJECT and i["image_key"] == "images/train/scene002.png"]
    assert [(o["category_id"], o["label"]) for o in objects] == [(3, "person"), (1, "cat"), (2, "dog")]
    x0, y0, x1, y1 = scenes(4)[2].objects[0].box
    assert objects[0]["box_units"] == RELATIVE
    assert objects[0]["box"] == pytest.approx([x0 / 64, y0 / 48, x1 / 64, y1 / 48], abs=1e-5)


def test_folders_without_yaml_and_polygons(tmp_path):
    write_yolo(tmp_path, scenes(2), polygons=True)
    (tmp_path / "data.yaml").unlink()
    table = yolo_source.open_yolo(str(tmp_path))
    objects = [i for i in _read(table) if i[RECORD] == OBJECT]
    assert objects[0]["label"] == "0" and objects[0]["category_id"] == 1 and len(objects[0]["segmentation"][0]) == 8


def test_bad_lines_are_discards():
    items = list(yolo_source.image_records("images/a.png", "a", None, "0 0.5 0.5 0.2 0.2\nx 1 2\n0 0.1 0.1 0.2\n"
                                           "0 0.1 0.1 0.2 0.2 0.3\n1 0.1 0.1 0.2 0.2\n", {0: "cat"}))
    reasons = [item[1][1] for item in items if isinstance(item, tuple) and item[0] == REASONED]
    assert reasons == ["invalid YOLO line: a field is not a number", "invalid YOLO line: 3 coordinates after the class",
                       "invalid YOLO line: 5 coordinates after the class"]
    assert items[-1]["label"] == "1" and items[-1]["category_id"] == 2  # an unknown class: discarded at the join
    with pytest.raises(ValueError, match="fewer than 3 points"):
        yolo_source.parse_line("0 0.1 0.1")


def test_labels_path():
    assert yolo_source.labels_path("/d/images/train/a.jpg") == "/d/labels/train/a.txt"
    assert yolo_source.labels_path("a.jpg") == "a.txt"


def test_not_yolo_and_table_level_errors(tmp_path):
    assert yolo_source.open_yolo(str(tmp_path)) is None
    other = tmp_path / "schema.yaml"
    other.write_text("image_uri: image_uri\n")
    assert yolo_source.open_yolo(str(other)) is None
    broken = tmp_path / "data.yaml"
    broken.write_text("names: [a\ntrain: x")
    with pytest.raises(ValueError, match="not valid YAML"):
        yolo_source.open_yolo(str(tmp_path))
    broken.write_text("train: images\n")
    with pytest.raises(ValueError, match="needs `names`"):
        yolo_source.open_yolo(str(tmp_path))
    broken.write_text("train: images\nnames: [a]\n")
    (tmp_path / "images").mkdir()
    with pytest.raises(ValueError, match="without images"):
        yolo_source.open_yolo(str(tmp_path))


def test_yaml_with_a_names_dict_and_an_image_list(tmp_path):
    write_yolo(tmp_path, scenes(2))
    (tmp_path / "train.txt").write_text("images/train/scene000.png\n\nimages/val/scene001.png\n")
    (tmp_path / "data.yaml").write_text("train: train.txt\nnames: {0: cat, 1: dog, 2: person}\n")
    table = yolo_source.open_yolo(str(tmp_path / "data.yaml"))
    images = [i for i in _read(table) if i[RECORD] == IMAGE]
    assert [(i["image_uri"], i["split"]) for i in images] == [("images/train/scene000.png", "TRAIN"),
                                                              ("images/val/scene001.png", "TRAIN")]
