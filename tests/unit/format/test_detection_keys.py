"""tfrecorder.format.detection_keys: label_map.pbtxt written and read back, the keys the OD API reads."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tfrecorder.format import detection_keys


def test_label_map_ids_start_at_one_in_vocabulary_order():
    text = detection_keys.label_map_pbtxt(["cat", "dog's"])
    assert text == "item {\n  id: 1\n  name: 'cat'\n}\nitem {\n  id: 2\n  name: 'dog\\'s'\n}\n"


@given(st.lists(st.text(min_size=1), unique=True, max_size=10))
def test_label_map_reads_back_as_written(vocabulary):
    text = detection_keys.label_map_pbtxt(vocabulary)
    assert detection_keys.parse_label_map(text) == {i: name for name, i in detection_keys.label_ids(vocabulary).items()}


def test_other_text_is_not_a_label_map():
    with pytest.raises(ValueError, match="not a label_map.pbtxt"):
        detection_keys.parse_label_map("item { id: 1 display_name: 'cat' }")


def test_keys_are_the_object_detection_api_s():
    assert [detection_keys.XMIN, detection_keys.YMIN, detection_keys.XMAX, detection_keys.YMAX] == [
        f"image/object/bbox/{c}" for c in ("xmin", "ymin", "xmax", "ymax")]
    assert set(detection_keys.feature_spec()) == {
        "image/encoded", "image/format", "image/height", "image/width", "image/filename", "image/source_id", "image/uri",
        "image/object/bbox/xmin", "image/object/bbox/ymin", "image/object/bbox/xmax", "image/object/bbox/ymax",
        "image/object/class/text", "image/object/class/label"}
    metadata = detection_keys.detection_metadata(["cat", "dog"], "pixels")
    assert metadata["task"] == "detection" and metadata["label_map"] == {"1": "cat", "2": "dog"}
    assert metadata["label_map_file"] == "label_map.pbtxt" and metadata["detection"]["box_units_in"] == "pixels"


def test_dataset_label_map_keeps_the_dataset_s_sparse_ids():
    text = detection_keys.label_map_of({90: "toothbrush", 1: "person"})
    assert text.startswith("item {\n  id: 1\n  name: 'person'\n}")
    assert detection_keys.parse_label_map(text) == {1: "person", 90: "toothbrush"}


def test_dataset_feature_spec_and_metadata():
    spec = detection_keys.dataset_feature_spec()
    assert spec[detection_keys.MASK] == {"dtype": "string", "shape": None, "allow_missing": False}
    assert spec[detection_keys.SEGMENTATION]["allow_missing"] and spec[detection_keys.XMIN]["dtype"] == "float32"
    assert detection_keys.MASK == "image/object/mask" and detection_keys.IS_CROWD == "image/object/is_crowd"
    assert detection_keys.SEGMENTATION == "image/segmentation/class/encoded"
    document = detection_keys.dataset_metadata({5: "dog", 2: "cat"}, "coco")
    assert document["label_map"] == {"2": "cat", "5": "dog"} and document["detection"]["dataset"] == "coco"
