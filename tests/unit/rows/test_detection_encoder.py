"""tfrecorder.rows.detection_encoder: box rows checked and merged per image, label maps, pixel boxes normalised."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tfrecorder
from tfrecorder.rows import detection_encoder
from tfrecorder.rows.row_encoding import RowError
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


def test_label_map_ids_start_at_one_in_vocabulary_order():
    text = detection_encoder.label_map_pbtxt(["cat", "dog's"])
    assert text == "item {\n  id: 1\n  name: 'cat'\n}\nitem {\n  id: 2\n  name: 'dog\\'s'\n}\n"


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
    a = decoded[str(photos["a.jpg"])]
    assert tuple(a["image"].shape) == (40, 60, 3) and int(a["height"]) == 40 and int(a["width"]) == 60
    boxes = {int(c): tuple(b) for c, b in zip(a["groundtruth_classes"].numpy(), a["groundtruth_boxes"].numpy())}
    np.testing.assert_allclose(boxes[2], [0.2, 0.1, 0.6, 0.5])  # Model Garden's [ymin, xmin, ymax, xmax]
    np.testing.assert_allclose(boxes[1], [0.0, 0.0, 1.0, 1.0])
