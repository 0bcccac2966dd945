"""tfrecorder.sources.coco_json: COCO files recognised from their head and streamed section by section."""
from __future__ import annotations

import json

import pytest

from support.datasets import coco_document, scenes
from tfrecorder.sources import coco_json
from tfrecorder.rows.dataset_records import CATEGORY, IMAGE, OBJECT, RECORD


@pytest.fixture
def coco(tmp_path):
    path = tmp_path / "instances_val2017.json"
    path.write_text(json.dumps(coco_document(scenes(4))))
    return str(path)


def test_recognised_from_content_only(coco, tmp_path):
    assert coco_json.looks_like_coco(coco)
    other = tmp_path / "other.json"
    for text in ('{"name": "x", "images": []}', "[1, 2]", '{"imageGcsUri": "gs://b/a.jpg"}\n', "a,b\n1,2\n"):
        other.write_text(text)
        assert not coco_json.looks_like_coco(str(other)), text
    other.write_text('{"info": {"x": 1}, "licenses": [], "images": [{"id": 1')  # a head, cut short
    assert coco_json.looks_like_coco(str(other))


def test_sections_stream_into_records(coco):
    categories = list(coco_json.iter_section(coco, "categories"))
    assert [(c[RECORD], c["category_id"], c["label"]) for c in categories] == [
        (CATEGORY, 2, "cat"), (CATEGORY, 5, "dog"), (CATEGORY, 8, "person")]
    images = list(coco_json.iter_section(coco, "images"))
    assert [i["image_key"] for i in images] == ["1", "2", "3", "4"]
    assert images[0][RECORD] == IMAGE and images[0]["split"] == "VALIDATION" and images[0]["image_uri"] == "scene000.png"
    objects = list(coco_json.iter_section(coco, "annotations"))
    assert len(objects) == 6 and all(o[RECORD] == OBJECT for o in objects)
    first = objects[0]
    assert first["image_key"] == "1" and "box_units" not in first and isinstance(first["segmentation"], dict)
    x, y, w, h = coco_document(scenes(4))["annotations"][0]["bbox"]
    assert first["box"] == [x, y, x + w, y + h]


def test_unusable_items_are_discards_with_reasons():
    assert coco_json.image_record({"file_name": "a.jpg"}, None)[1] == "invalid image: no id"
    assert coco_json.image_record({"id": 3}, None)[1] == "invalid image: image id 3 has no file_name"
    assert coco_json.image_record(5, None)[1].startswith("invalid image: not an object")
    assert coco_json.object_record({"id": 1, "category_id": 1, "bbox": [0, 0, 1, 1]})[1] == "invalid annotation: no image_id"
    assert coco_json.object_record({"id": 1, "image_id": 1, "category_id": "x", "bbox": [0, 0, 1, 1]})[1].startswith(
        "unknown category id")
    assert coco_json.object_record({"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1]})[1].startswith(
        "invalid box")
    assert coco_json.category_record({"id": "1", "name": "x"}) is None


def test_split_from_the_file_name():
    assert coco_json.split_of_file("a/instances_train2017.json") == "TRAIN"
    assert coco_json.split_of_file("instances_val2017.json") == "VALIDATION"
    assert coco_json.split_of_file("image_info_test-dev2017.json") == "TEST"
    assert coco_json.split_of_file("annotations.json") is None


def test_sample_and_table_level_errors(coco, tmp_path):
    assert len(coco_json.sample_images(coco, 2)) == 2
    empty = tmp_path / "empty.json"
    empty.write_text('{"images": [], "annotations": [], "categories": []}')
    with pytest.raises(ValueError, match="without images"):
        coco_json.sample_images(str(empty), 10)
    broken = tmp_path / "broken.json"
    broken.write_text('{"images": [{"id": 1, "file_name": "a.jpg"}, {"id": ]}')
    with pytest.raises(ValueError, match="not valid COCO JSON"):
        list(coco_json.iter_section(str(broken), "images"))


def test_polygons_are_kept_compact_and_bad_ones_as_they_are():
    record = coco_json.object_record({"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 4, 4],
                                      "segmentation": [[0, 0, 4, 0, 4, 4]]})
    assert isinstance(record["segmentation"][0], bytes) and len(record["segmentation"][0]) == 24
    bad = coco_json.object_record({"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 4, 4],
                                   "segmentation": [[0, "x", 4, 0, 4, 4]]})
    assert bad["segmentation"] == [[0, "x", 4, 0, 4, 4]]
    assert coco_json.object_record({"image_id": None, "id": 3})[0]["ref"] == "annotation id 3"


def test_categories_read_to_the_end_of_their_array(coco, tmp_path):
    assert coco_json.read_categories(coco) == {2: "cat", 5: "dog", 8: "person"}
    first = tmp_path / "categories_first.json"  # read stops once the array ends: the rest is never parsed
    first.write_text('{"categories": [{"id": 1, "name": "a"}, {"id": "x", "name": "b"}], "images": [ broken')
    assert coco_json.read_categories(str(first)) == {1: "a"}
    last = tmp_path / "last.json"  # last, as in COCO's files: read from the tail alone (the head is never parsed)
    last.write_text('{"images": [ broken], "annotations": [{"x": "\\"categories\\": [1]"}],\n'
                    '"categories" : [{"id": 4, "name": "é\\"x", "q\\"categories": [1]}] }\n')
    assert coco_json.read_categories(str(last)) == {4: 'é"x'}
    nested = tmp_path / "nested.json"  # a "categories" key that is not the document's: streamed instead
    nested.write_text('{"categories": [{"id": 1, "name": "a"}], "info": {"categories": [{"id": 2, "name": "b"}]}}')
    assert coco_json.read_categories(str(nested)) == {1: "a"}
    broken = tmp_path / "broken.json"
    broken.write_text('{"images": [ broken], "categories": [}')
    with pytest.raises(ValueError, match="not valid COCO JSON"):
        coco_json.read_categories(str(broken))
    assert [i["split"] for i in coco_json.iter_section(coco, "images", "TEST")] == ["TEST"] * 4
