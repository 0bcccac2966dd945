"""tfrecorder.rows.detection_encoder: box rows checked and merged per image, label maps, pixel boxes normalised."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tfrecorder
from tfrecorder.format import detection_keys
from tfrecorder.format.finished_job import JobInfo
from tfrecorder.rows import detection_encoder
from tfrecorder.errors import RowError
from support.boxes import box_table
from support.detection_records import discards_of, read_od_records


# --- pure logic -------------------------------------------------------------------------------------

@pytest.mark.parametrize("row, reason", [
    ({"image_uri": "x.jpg", "label": "cat", "xmin": 0.5, "ymin": 0.1, "xmax": 0.2, "ymax": 0.9}, "xmin 0.5 > xmax 0.2"),
    ({"image_uri": "x.jpg", "label": "cat", "xmin": 0.1, "ymin": 0.9, "xmax": 0.2, "ymax": 0.3}, "ymin 0.9 > ymax 0.3"),
    ({"image_uri": "x.jpg", "label": "cat", "xmin": 0.1, "ymin": 0.1, "xmax": 1.2, "ymax": 0.3},
     "box outside the image: xmax 1.2 not in [0, 1]"),
    ({"image_uri": "x.jpg", "label": "cat", "xmin": "abc", "ymin": 0.1, "xmax": 0.2, "ymax": 0.3},
     "invalid box: xmin is not a number ('abc')"),
    ({"image_uri": "x.jpg", "label": "cat", "xmin": float("nan"), "ymin": 0.1, "xmax": 0.2, "ymax": 0.3},
     "invalid box: xmin missing"),
    ({"image_uri": "x.jpg", "label": None, "xmin": 0.1, "ymin": 0.1, "xmax": 0.2, "ymax": 0.3},
     "invalid box: the box has no label"),
    ({"image_uri": None, "label": "cat", "xmin": 0.1, "ymin": 0.1, "xmax": 0.2, "ymax": 0.3}, "empty image URI"),
])
def test_bad_boxes_have_specific_reasons(row, reason):
    with pytest.raises(RowError) as caught:
        detection_encoder.check_box_row(row)
    assert reason in str(caught.value)


def test_box_rows_rounding_noise_clamped_and_no_box_rows():
    box = detection_encoder.check_box_row({"image_uri": "x", "label": " cat ", "xmin": -1e-9, "ymin": "0.25",
                                   "xmax": 1 + 1e-9, "ymax": 0.5})
    assert box == detection_encoder.Box("cat", 0.0, 0.25, 1.0, 0.5)
    assert detection_encoder.check_box_row({"image_uri": "x", "label": "", "xmin": None, "ymin": None, "xmax": None,
                                    "ymax": None}) is None
    assert detection_encoder.check_box_row({"image_uri": "x", "label": "cat", "xmin": 10, "ymin": 20, "xmax": 300,
                                    "ymax": 400}, "pixels") == detection_encoder.Box("cat", 10, 20, 300, 400)


def test_conflicting_splits_and_unassigned_images_hash_on_the_uri():
    with pytest.raises(RowError, match="conflicting splits: rows of x.jpg say TEST, TRAIN"):
        detection_encoder.merge_image_rows("x.jpg", ["TRAIN", "test"], (0.8, 0.1, 0.1))
    assert detection_encoder.merge_image_rows("x.jpg", ["train", "TRAIN"], (0.8, 0.1, 0.1)) == "TRAIN"
    assigned = {detection_encoder.merge_image_rows(f"{i}.jpg", [None, ""], (0.5, 0.25, 0.25)) for i in range(50)}
    assert assigned == {"TRAIN", "VALIDATION", "TEST"}


# --- end to end ---------------------------------------------------------------------------------------

def test_pixel_boxes_are_normalised_by_the_true_image_size(photos, tmp_path, tf):
    a, b = str(photos["a.jpg"]), str(photos["b.png"])  # 40x60 and 50x80 (h x w)
    table = pd.DataFrame({
        "image_uri": [a, a, b],
        "label": ["cat", "dog", "cat"],
        "xmin": [6, 0, 40], "ymin": [4, 0, 25], "xmax": [30, 61, 80], "ymax": [40, 10, 50],
        "split": ["TRAIN", "TRAIN", "TRAIN"],
    })
    result = table.tensorflow.to_tfr(str(tmp_path), box_units="pixels", progress=False)  # the pandas accessor
    records = read_od_records(tf, result["tfrecord_dir"])
    np.testing.assert_allclose(records[a]["image/object/bbox/xmin"], [0.1])
    np.testing.assert_allclose(records[a]["image/object/bbox/ymin"], [0.1])
    np.testing.assert_allclose(records[a]["image/object/bbox/xmax"], [0.5])
    np.testing.assert_allclose(records[a]["image/object/bbox/ymax"], [1.0])
    np.testing.assert_allclose(records[b]["image/object/bbox/xmin"], [0.5])
    [reason] = [row["reason"] for row in discards_of(result["tfrecord_dir"])]
    assert reason == "box outside the image: (0, 0, 61, 10) pixels, image is 60x40"
    assert result["rows_in"] == 3 and result.metadata["rows_written"] == 2


def test_box_units_and_missing_columns_are_table_errors(photos, tmp_path):
    table = box_table(photos)
    with pytest.raises(ValueError, match="box_units must be"):
        tfrecorder.convert(table, tmp_path, box_units="inches")
    with pytest.raises(ValueError, match=r"missing \['image_uri'\]"):
        tfrecorder.convert(table.rename(columns={"image_uri": "path"}), tmp_path)


def test_model_garden_tf_example_decoder_reads_a_detection_job(detection_job, photos, tf):
    """Model Garden's own decoder, when tf-models-official is importable. Its dependency set pins other
    TensorFlow versions, so it is not a test requirement; installed beside this venv with `pip install
    --no-deps --target DIR tf-models-official tf-keras gin-config tensorflow-datasets etils toml promise
    tensorflow_metadata immutabledict scipy pycocotools opencv-python-headless matplotlib cycler kiwisolver
    fonttools` and PYTHONPATH=DIR, it passes. Without it, test_detection_job_writes_od_api_records checks
    the same keys and dtypes."""
    decoder_module = pytest.importorskip("official.vision.dataloaders.tf_example_decoder")
    decoder = decoder_module.TfExampleDecoder()
    metadata = json.loads((Path(detection_job["tfrecord_dir"]) / "metadata.json").read_text())
    shard = Path(detection_job["tfrecord_dir"]) / metadata["splits"]["TRAIN"]["shards"][0]["file"]
    decoded = {}
    for record in tf.data.TFRecordDataset(str(shard)):
        out = decoder.decode(record)
        decoded[out["source_id"].numpy().decode()] = out
    a = decoded[detection_keys.source_id(str(photos["a.jpg"]))]
    assert tuple(a["image"].shape) == (40, 60, 3) and int(a["height"]) == 40 and int(a["width"]) == 60
    boxes = {int(c): tuple(b) for c, b in zip(a["groundtruth_classes"].numpy(), a["groundtruth_boxes"].numpy())}
    np.testing.assert_allclose(boxes[2], [0.2, 0.1, 0.6, 0.5])  # Model Garden's [ymin, xmin, ymax, xmax]
    np.testing.assert_allclose(boxes[1], [0.0, 0.0, 1.0, 1.0])


def model_garden_keys(tf) -> dict:
    """The keys Model Garden's default TfExampleDecoder (official/vision/dataloaders/tf_example_decoder.py)
    parses, as it parses them."""
    return {
        "image/encoded": tf.io.FixedLenFeature((), tf.string),
        "image/height": tf.io.FixedLenFeature((), tf.int64, -1),
        "image/width": tf.io.FixedLenFeature((), tf.int64, -1),
        **{f"image/object/bbox/{c}": tf.io.VarLenFeature(tf.float32) for c in ("xmin", "xmax", "ymin", "ymax")},
        "image/object/class/label": tf.io.VarLenFeature(tf.int64),
        "image/object/area": tf.io.VarLenFeature(tf.float32),
        "image/object/is_crowd": tf.io.VarLenFeature(tf.int64),
        "image/source_id": tf.io.FixedLenFeature((), tf.string),
    }


def model_garden_process_source_id(tf, source_id):
    """Model Garden's official/vision/dataloaders/utils.py process_source_id, which its RetinaNet and
    Mask R-CNN eval parsers apply to the decoder's source_id (the COCO image id)."""
    if source_id.dtype == tf.string:
        source_id = tf.strings.to_number(source_id, tf.int64)
    return tf.cond(tf.equal(tf.size(source_id), 0), lambda: tf.constant(-1, tf.int64), lambda: tf.identity(source_id))


def test_source_ids_parse_as_model_gardens_eval_parsers_parse_them(detection_job, photos, tf):
    """Every record's image/source_id is the int64 Model Garden's eval parsers make of it: distinct per
    image, derived from the URI (kept in image/uri), the same in every run."""
    job = JobInfo.read(detection_job["tfrecord_dir"])
    ids = []
    for record in (record for split in job.splits for path in job.shard_paths(split)
                   for record in tf.data.TFRecordDataset(path)):
        parsed = model_garden_process_source_id(tf, tf.io.parse_single_example(record, model_garden_keys(tf))[
            "image/source_id"])
        assert parsed.dtype == tf.int64 and int(parsed) > 0
        ids.append(int(parsed))
    by_uri = {uri: int(example["image/source_id"]) for uri, example in read_od_records(tf, job.tfrecord_dir).items()}
    uris = [str(photos[name]) for name in ("a.jpg", "b.png", "c.jpg")]
    assert sorted(ids) == sorted(by_uri.values()) and len(set(ids)) == 3
    assert by_uri == {uri: int(detection_keys.source_id(uri)) for uri in uris}
    # A hash of the URI's bytes, not of the process (Python's hash() would change every run):
    assert detection_keys.source_id("gs://bucket/images/a.jpg") == "6492742613928872618"
    assert all(0 <= int(detection_keys.source_id(f"img{i}.jpg")) < 2 ** 63 for i in range(1000))


def test_model_garden_retinanet_and_mask_rcnn_eval_parsers_read_a_detection_job(detection_job, photos, tf):
    """Model Garden's default TfExampleDecoder, then its RetinaNet and Mask R-CNN eval parsers, on every
    record (when tf-models-official is importable; see the decoder test above for how to install it)."""
    decoder_module = pytest.importorskip("official.vision.dataloaders.tf_example_decoder")
    from official.vision.dataloaders import maskrcnn_input, retinanet_input

    anchors = dict(output_size=[64, 64], min_level=3, max_level=5, num_scales=1, aspect_ratios=[1.0], anchor_size=4.0)
    parsers = {"retinanet": retinanet_input.Parser(**anchors, dtype="float32").parse_fn(is_training=False),
               "maskrcnn": maskrcnn_input.Parser(**anchors).parse_fn(is_training=False)}
    decoder = decoder_module.TfExampleDecoder()
    job = JobInfo.read(detection_job["tfrecord_dir"])
    for name, parse in parsers.items():
        seen = set()
        for path in (path for split in job.splits for path in job.shard_paths(split)):
            for record in tf.data.TFRecordDataset(path):
                _image, labels = parse(decoder.decode(record))
                seen.add(int(labels["groundtruths"]["source_id"]))
        assert seen == {int(detection_keys.source_id(str(photos[n]))) for n in ("a.jpg", "b.png", "c.jpg")}, name
