"""beam_pipelines.graphs.dataset_graph: COCO, VOC and YOLO datasets to OD API records with masks, every
image and annotation accounted for, annotations joined to their images inside the pipeline."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tfrecorder
from support.datasets import coco_document, rle_of, scenes, write_coco, write_voc, write_yolo
from support.detection_records import discards_of, read_od_records
from tfrecorder.format import detection_keys
from tfrecorder.rows import instance_masks

SCENES = scenes(8)


def _records(tf, tfrecord_dir: str) -> dict[str, dict]:
    """Every record parsed as the OD API does, plus its masks decoded, keyed by file name."""
    extra = {"image/object/mask": tf.io.VarLenFeature(tf.string), "image/object/is_crowd": tf.io.VarLenFeature(tf.int64),
             "image/object/area": tf.io.VarLenFeature(tf.float32), "image/object/difficult": tf.io.VarLenFeature(tf.int64),
             "image/segmentation/class/encoded": tf.io.FixedLenFeature((), tf.string, default_value="")}
    found = {}
    for name, example in read_od_records(tf, tfrecord_dir, extra, key="image/filename").items():
        example["masks"] = [instance_masks.decode_png(m) for m in example["image/object/mask"]]
        found[name.rsplit(".", 1)[0]] = example
    return found


def _by_class(example) -> list[tuple]:
    """(class name, box, mask bytes) per object, in a canonical order."""
    boxes = zip(*(example[f"image/object/bbox/{c}"] for c in ("xmin", "ymin", "xmax", "ymax")))
    objects = [(name.decode(), tuple(np.round(box, 5)), mask.tobytes())
               for name, box, mask in zip(example["image/object/class/text"], boxes, example["masks"])]
    return sorted(objects)


@pytest.fixture(scope="module")
def coco_job(tmp_path_factory):
    """A COCO file of the scenes with one of each bad annotation, a duplicate image id, a missing and a
    broken image, and an annotation of an unknown image."""
    root = tmp_path_factory.mktemp("coco")
    document = coco_document(SCENES)
    images, annotations = document["images"], document["annotations"]
    base = dict(image_id=1, category_id=2, iscrowd=0)
    full = np.zeros((48, 64), np.uint8)
    annotations += [
        {**base, "id": 900, "bbox": [50, 0, 30, 10]},  # box outside the image
        {**base, "id": 901, "bbox": [1, 1, 0, 5]},  # degenerate
        {**base, "id": 902, "bbox": [1, 1, 5, 5], "segmentation": [[1, 1, 5, 5]]},  # polygon of 2 points
        {**base, "id": 903, "bbox": [1, 1, 5, 5], "segmentation": rle_of(np.zeros((10, 10), np.uint8))},
        {**base, "id": 904, "bbox": [1, 1, 5, 5], "category_id": 77},  # unknown category id
        {**base, "id": 905, "bbox": [1, 1, 5, 5], "image_id": 999},  # unknown image id
        {**base, "id": 906, "bbox": [1, 1, 5, 5], "image_id": 3, "segmentation": rle_of(full), "iscrowd": 1},
    ]
    images += [{"id": 2, "file_name": "scene002.png", "width": 64, "height": 48},  # duplicate image id 2
               {"id": 50, "file_name": "missing.png", "width": 64, "height": 48},
               {"id": 51, "file_name": "broken.png", "width": 64, "height": 48}]
    path = write_coco(root, SCENES, document=document)
    (root / "train" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    result = tfrecorder.convert(str(path), str(root / "out"), progress=False)
    return result, document


def test_coco_records_masks_and_sparse_ids(coco_job, tf):
    result, _document = coco_job
    records = _records(tf, result["tfrecord_dir"])
    assert set(records) == {f"scene{i:03d}" for i in range(8) if i != 1}  # image id 2 (scene001) duplicated
    for scene in SCENES:
        if scene.name == "scene001":
            continue
        example = records[scene.name]
        objects = example["masks"]
        expected = scene.objects if scene.name != "scene002" else scene.objects  # 906 (crowd) is on image 3
        crowd = list(example["image/object/is_crowd"])
        kept = [m for m, c in zip(objects, crowd) if not c]
        assert len(kept) == len(expected)
        for mask, obj in zip(kept, expected):
            np.testing.assert_array_equal(mask, obj.mask)  # pixel-exact, from pycocotools' RLE
        assert example["image/source_id"].decode() == str(int(scene.name[-3:]) + 1)  # COCO's image id
    assert list(records["scene002"]["image/object/is_crowd"]).count(1) == 1
    assert set(np.concatenate([r["image/object/class/label"] for r in records.values()])) <= {2, 5, 8}
    label_map = (Path(result["tfrecord_dir"]) / "label_map.pbtxt").read_text()
    assert detection_keys.parse_label_map(label_map) == {2: "cat", 5: "dog", 8: "person"}


def test_coco_every_annotation_written_or_discarded_with_its_reason(coco_job):
    result, document = coco_job
    metadata = result.metadata
    assert metadata["rows_in"] == len(document["images"]) + len(document["annotations"])
    assert metadata["rows_written"] + metadata["discarded"] == metadata["rows_in"]
    reasons = [row["reason"] for row in discards_of(result["tfrecord_dir"])]
    assert len(reasons) == metadata["discarded"]
    duplicates = 2 + len(SCENES[1].objects)  # both images of id 2 and its annotations
    for prefix, count in [("box outside the image", 1), ("degenerate box", 1),
                          ("invalid polygon: fewer than 3 points", 1), ("RLE size mismatch", 1),
                          ("unknown category id: 77", 1), ("unknown image id", 1),
                          ("duplicate image id", duplicates)]:
        assert sum(r.startswith(prefix) for r in reasons) == count, prefix
    assert sum("missing.png" in r or "No such file" in r or r.startswith(("file not found", "missing"))
               for r in reasons) + sum(r.startswith(("corrupt image", "truncated image", "not an image"))
                                       for r in reasons) == 2
    assert metadata["task"] == "detection" and metadata["detection"]["masks"] == "image/object/mask"
    assert tfrecorder.verify(result["tfrecord_dir"]).ok


def test_load_returns_masks_ragged_when_batched(coco_job, tf):
    result, _ = coco_job
    element = next(iter(tfrecorder.load(result["tfrecord_dir"], "train", shuffle_buffer=None)))
    masks = element["masks"]
    assert masks.dtype == tf.uint8 and masks.shape[1:] == (48, 64) and masks.shape[0] == element["boxes"].shape[0]
    batch = next(iter(tfrecorder.load(result["tfrecord_dir"], "train", batch_size=3, shuffle_buffer=None)))
    assert isinstance(batch["masks"], tf.RaggedTensor) and batch["masks"].shape[0] == 3
    source = tfrecorder.data_source(result["tfrecord_dir"], "train", decode_images=True)
    record = source[0]
    assert record["image/object/mask"].dtype == np.uint8 and record["image/object/mask"].shape[1:] == (48, 64)


def test_coco_and_voc_renderings_give_the_same_boxes_classes_and_masks(coco_job, tmp_path, tf):
    root = tmp_path / "voc"
    write_voc(root, SCENES)
    voc = tfrecorder.convert(str(root), str(tmp_path / "out"), progress=False)
    assert voc.metadata["discarded"] == 0
    assert voc.metadata["rows_in"] == len(SCENES) + sum(len(s.objects) for s in SCENES)
    coco_clean = tfrecorder.convert(str(write_coco(tmp_path / "coco", SCENES)), str(tmp_path / "out2"), progress=False)
    voc_records, coco_records = _records(tf, voc["tfrecord_dir"]), _records(tf, coco_clean["tfrecord_dir"])
    assert set(voc_records) == set(coco_records) == {s.name for s in SCENES}
    for name, example in voc_records.items():
        assert _by_class(example) == _by_class(coco_records[name]), name
    scene = SCENES[2]
    semantic = instance_masks.decode_png(voc_records[scene.name]["image/segmentation/class/encoded"])
    assert set(np.unique(semantic)) == {0, 8, 12, 15}  # VOC ids of cat, dog, person
    assert list(voc_records[scene.name]["image/object/difficult"]) == [0, 0, 1]
    element = next(iter(tfrecorder.load(voc["tfrecord_dir"], "validation", shuffle_buffer=None)))
    assert element["segmentation"].shape == (48, 64)
    label_map = detection_keys.parse_label_map((Path(voc["tfrecord_dir"]) / "label_map.pbtxt").read_text())
    assert label_map[8] == "cat" and len(label_map) == 20  # the OD API's pascal_label_map.pbtxt ids


@pytest.mark.parametrize("polygons", [False, True])
def test_yolo_boxes_and_polygons(tmp_path, tf, polygons):
    write_yolo(tmp_path / "yolo", SCENES[:4], polygons=polygons)
    result = tfrecorder.convert(str(tmp_path / "yolo"), str(tmp_path / "out"), progress=False)
    assert result.metadata["discarded"] == 0
    records = _records(tf, result["tfrecord_dir"])
    example = records["scene002"]
    assert [n.decode() for n in example["image/object/class/text"]] == [o.label for o in SCENES[2].objects]
    x0, y0, x1, y1 = SCENES[2].objects[0].box
    np.testing.assert_allclose([example["image/object/bbox/xmin"][0], example["image/object/bbox/ymax"][0]],
                               [x0 / 64, y1 / 48], atol=1e-5)
    assert len(example["masks"]) == (3 if polygons else 0)
    assert detection_keys.parse_label_map((Path(result["tfrecord_dir"]) / "label_map.pbtxt").read_text()) == {
        1: "cat", 2: "dog", 3: "person"}


def test_bundle_replay_counts_exactly(tmp_path):
    path = write_coco(tmp_path, SCENES[:4])
    result = tfrecorder.convert(str(path), str(tmp_path / "out"), progress=False,
                                beam_options={"direct_runner_bundle_repeat": 1})
    metadata = result.metadata
    assert metadata["rows_in"] == 4 + 6 and metadata["rows_written"] == 10 and metadata["records_written"] == 4


def test_table_level_problems_fail_before_work_starts(tmp_path):
    empty = tmp_path / "instances_x.json"
    empty.write_text('{"images": [], "annotations": [{"id": 1}], "categories": []}')
    with pytest.raises(ValueError, match="without images"):
        tfrecorder.convert(str(empty), str(tmp_path / "out"), progress=False)
    broken = tmp_path / "instances_y.json"
    broken.write_text('{"images": [{"id": 1, "file_name": "a.png"}, {"id": 2 "file_name": "b.png"}]}')
    with pytest.raises(ValueError, match="not valid COCO JSON"):
        tfrecorder.convert(str(broken), str(tmp_path / "out"), progress=False)
    table = tmp_path / "t.csv"
    table.write_text("image_uri,label\na.png,cat\n")
    with pytest.raises(ValueError, match="image_root applies to COCO"):
        tfrecorder.convert(str(table), str(tmp_path / "out"), image_root=str(tmp_path), progress=False)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_coco_file_and_its_images_on_gcs(gcs, tmp_path, tf):
    path = write_coco(tmp_path / "coco", SCENES[:2])
    gcs.upload("gs://tfr-coco/annotations/instances_val.json", path.read_bytes())
    for scene in SCENES[:2]:
        gcs.upload(f"gs://tfr-coco/images/{scene.name}.png", (tmp_path / "coco" / "train" / f"{scene.name}.png").read_bytes())
    result = tfrecorder.convert("gs://tfr-coco/annotations/instances_val.json", str(tmp_path / "out"),
                                image_root="gs://tfr-coco/images", progress=False)
    assert result.metadata["discarded"] == 0 and result.metadata["splits"]["VALIDATION"]["records"] == 2
    records = _records(tf, result["tfrecord_dir"])
    np.testing.assert_array_equal(records["scene000"]["masks"][0], SCENES[0].objects[0].mask)


def test_a_voc_folder_on_gcs(gcs, tmp_path, tf):
    root = write_voc(tmp_path / "voc", SCENES[:2])
    for path in root.rglob("*"):
        if path.is_file():
            gcs.upload(f"gs://tfr-voc/VOC/{path.relative_to(root).as_posix()}", path.read_bytes())
    result = tfrecorder.convert("gs://tfr-voc/VOC", str(tmp_path / "out"), progress=False)
    assert result.metadata["discarded"] == 0 and result.metadata["records_written"] == 2
    records = _records(tf, result["tfrecord_dir"])
    np.testing.assert_array_equal(records["scene000"]["masks"][0], SCENES[0].objects[0].mask)
    assert records["scene000"]["image/segmentation/class/encoded"].startswith(b"\x89PNG")


def test_coco_files_of_one_dataset_convert_as_one_job_with_their_splits(tmp_path, tf):
    """instances_train + instances_val (a glob), both numbering their images from 1: each file's images
    keep its split, its folder and its ids (an id in both files is no duplicate); a bad annotation of the
    val file is discarded under its file's key."""
    write_coco(tmp_path, SCENES[:5], name="train2017")
    val = coco_document(SCENES[5:])  # ids 1..3 again
    val["annotations"].append({"id": 990, "image_id": 99, "category_id": 2, "bbox": [1, 1, 5, 5], "iscrowd": 0})
    write_coco(tmp_path, SCENES[5:], name="val2017", document=val)
    result = tfrecorder.convert(str(tmp_path / "annotations" / "instances_*2017.json"), str(tmp_path / "out"),
                                progress=False)
    metadata = result.metadata
    objects = sum(len(scene.objects) for scene in SCENES)
    assert metadata["rows_in"] == len(SCENES) + objects + 1 and metadata["discarded"] == 1
    assert {s: info["records"] for s, info in metadata["splits"].items()} == {"TRAIN": 5, "VALIDATION": 3}
    assert [(d["image_key"], d["reason"]) for d in discards_of(result["tfrecord_dir"])] == [
        ("instances_val2017.json:99", "unknown image id: no image has id 'instances_val2017.json:99'")]
    records = _records(tf, result["tfrecord_dir"])
    for number, scene in enumerate(SCENES):
        example = records[scene.name]
        assert example["split"] == ("TRAIN" if number < 5 else "VALIDATION")
        assert example["image/source_id"].decode() == str(number + 1 if number < 5 else number - 4)
        for obj, mask in zip(scene.objects, example["masks"]):
            np.testing.assert_array_equal(mask, obj.mask)


def test_split_option_for_a_coco_file_whose_name_says_none(tmp_path):
    path = write_coco(tmp_path, SCENES[:3], name="photos")
    loose = path.with_name("dataset.json")
    path.rename(loose)
    result = tfrecorder.convert(str(loose), str(tmp_path / "out"), image_root=str(tmp_path / "photos"),
                                split="validation", progress=False)
    assert list(result.metadata["splits"]) == ["VALIDATION"] and result.metadata["discarded"] == 0
    with pytest.raises(ValueError, match="split must be one of train, validation, test or unassigned"):
        tfrecorder.convert(str(loose), str(tmp_path / "bad"), split="val", progress=False)
    assert not (tmp_path / "bad").exists() or not any((tmp_path / "bad").iterdir())


def test_coco_files_on_gcs_find_their_image_folders(gcs, tmp_path):
    """gs://b/coco/annotations/instances_{train,val}.json with their images in gs://b/coco/{train,val}/."""
    for name, items in (("train", SCENES[:2]), ("val", SCENES[2:3])):
        path = write_coco(tmp_path / "coco", items, name=name)
        gcs.upload(f"gs://tfr-coco-split/coco/annotations/{path.name}", path.read_bytes())
        for scene in items:
            gcs.upload(f"gs://tfr-coco-split/coco/{name}/{scene.name}.png",
                       (tmp_path / "coco" / name / f"{scene.name}.png").read_bytes())
    result = tfrecorder.convert("gs://tfr-coco-split/coco/annotations/instances_*.json", str(tmp_path / "out"),
                                validate="header", progress=False)
    assert result.metadata["discarded"] == 0
    assert {s: info["records"] for s, info in result.metadata["splits"].items()} == {"TRAIN": 2, "VALIDATION": 1}
