"""tfrecorder.rows.dataset_records: one image's records joined, and the label map of a dataset."""
from __future__ import annotations

from tfrecorder.rows import dataset_records as dr


def _image(key="1", split="TRAIN", uri="a.png"):
    return {dr.RECORD: dr.IMAGE, "image_key": key, "image_uri": uri, "split": split}


def _object(annotation_id, category_id=2, label=None, key="1"):
    return {dr.RECORD: dr.OBJECT, "image_key": key, "annotation_id": annotation_id, "category_id": category_id,
            "label": label, "segmentation": [[1, 2, 3]]}


def test_objects_join_their_image_in_annotation_id_order():
    joined, discards = dr.join_image("1", [_object(9), _image(), _object(3, 5)], {2: "cat", 5: "dog"}, (1, 0, 0))
    assert discards == []
    assert joined.split == "TRAIN" and joined.uri == "a.png"
    assert [(row["annotation_id"], i, n) for row, i, n in joined.objects] == [(3, 5, "dog"), (9, 2, "cat")]


def test_unknown_image_duplicate_image_and_unknown_category_are_discards():
    joined, discards = dr.join_image("7", [_object(1)], {2: "cat"}, (1, 0, 0))
    assert joined is None and discards == [(dr.for_discard(_object(1)), "unknown image id: no image has id '7'")]
    assert "segmentation" not in discards[0][0]
    joined, discards = dr.join_image("1", [_image(), _image(uri="b.png"), _object(1)], {2: "cat"}, (1, 0, 0))
    assert joined is None and len(discards) == 3
    assert {reason for _row, reason in discards} == {"duplicate image id: 2 images have id '1'"}
    joined, discards = dr.join_image("1", [_image(), _object(1, 4), _object(2, None, "owl")], {2: "cat"}, (1, 0, 0))
    assert joined.objects == []
    assert [reason for _row, reason in discards] == ["unknown category id: 4", "unknown category: 'owl'"]


def test_split_of_an_image_unassigned_by_hash_and_unknown_discarded():
    joined, _ = dr.join_image("1", [_image(split=None)], {}, (0, 0, 1))
    assert joined.split == "TEST"
    joined, discards = dr.join_image("1", [_image(split="holdout"), _object(1)], {2: "cat"}, (1, 0, 0))
    assert joined is None and len(discards) == 2 and discards[0][1].startswith("unknown split")


def test_names_join_by_the_label_map():
    joined, _ = dr.join_image("1", [_image(), _object(1, None, "dog")], dr.label_map({}, ["dog"]), (1, 0, 0))
    assert [(i, n) for _r, i, n in joined.objects] == [(12, "dog")]


def test_label_map_declared_ids_then_seen_ids_then_voc_then_sorted_names():
    acc = dr.LabelMapAccumulator()
    acc.add(_object(1, 3, "three"))
    assert acc.result() == {3: "three"}
    other = dr.LabelMapAccumulator()
    other.add(dr.category(90, "toothbrush"))
    other.add(dr.category(1, "person"))
    acc.merge(other)
    assert acc.result() == {1: "person", 90: "toothbrush"}  # COCO's sparse ids kept
    assert dr.label_map({}, ["dog", "cat"]) == {i + 1: name for i, name in enumerate(dr.VOC_CLASSES)}
    assert dr.label_map({}, ["zebra", "ant"]) == {1: "ant", 2: "zebra"}
    assert dr.label_map({}, []) == {}


def test_dataset_table_and_schema():
    assert dr.is_dataset_table(list(dr.DATASET_COLUMNS))
    assert not dr.is_dataset_table(["image_uri", "label"])
    assert dr.dataset_schema().image_columns == ["image_uri"]


def test_pack_and_unpack_keep_every_field():
    row = {**_object(5), "box": [1.0, 2.0, 3.0, 4.0], "view": "Left", "unknown": 1}
    packed = dr.pack(row)
    assert isinstance(packed, bytes)
    assert dr.unpack(packed) == {k: v for k, v in row.items() if k != "unknown" and v is not None}
