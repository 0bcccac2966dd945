"""tfrecorder.rows.instance_encoder: a joined dataset image → an OD API Example with masks, checks per object."""
from __future__ import annotations

import numpy as np
import pytest

from support.datasets import rle_of
from tfrecorder.format import detection_keys as keys
from tfrecorder.rows import instance_masks
from tfrecorder.rows.dataset_records import IMAGE, OBJECT, PIXELS, RECORD, RELATIVE, JoinedImage
from tfrecorder.rows.instance_encoder import InstanceEncoder, relative_box
from tfrecorder.sample_data import encode_image, photo_array

H, W = 20, 30


@pytest.fixture(scope="module")
def png() -> bytes:
    from PIL import Image

    return encode_image(Image.fromarray(photo_array(H, W, 1)), "PNG")


def _object(annotation_id, box, segmentation=None, units=PIXELS, **extra):
    return ({RECORD: OBJECT, "annotation_id": annotation_id, "box": box, "box_units": units,
             "segmentation": segmentation, **extra}, 3, "cat")


def _joined(objects, **image):
    return JoinedImage("42", "TRAIN", {RECORD: IMAGE, "image_uri": "a.png", "source_id": "42", **image}, objects)


def _parse(tf, data):
    example = tf.train.Example.FromString(data).features.feature
    return {k: (v.bytes_list.value or v.int64_list.value or v.float_list.value) for k, v in example.items()}


def _encode(png, joined, files=None):
    files = files or {}
    return InstanceEncoder(validate="header").encode(
        joined, lambda uri: png, lambda uri: files[uri] if uri in files else (_ for _ in ()).throw(FileNotFoundError(uri)))


def test_masks_boxes_and_flags_round_trip(png, tf):
    mask = np.zeros((H, W), np.uint8)
    mask[2:8, 3:12] = 1
    joined = _joined([_object(1, [3, 2, 12, 8], rle_of(mask), is_crowd=1, area=54.0),
                      _object(2, [0, 0, 30, 20], [[0, 0, 29, 0, 29, 19]], difficult=1, truncated=1, view="Left")])
    data, inside, discards = _encode(png, joined)
    assert discards == [] and inside == 3
    parsed = _parse(tf, data)
    masks = [instance_masks.decode_png(m) for m in parsed[keys.MASK]]
    np.testing.assert_array_equal(masks[0], mask)
    assert masks[1].shape == (H, W) and masks[1][0, 0] == 1 and masks[1][19, 0] == 0
    np.testing.assert_allclose(parsed[keys.XMIN], [0.1, 0.0])
    np.testing.assert_allclose(parsed[keys.YMAX], [0.4, 1.0])
    assert list(parsed[keys.IS_CROWD]) == [1, 0] and list(parsed[keys.DIFFICULT]) == [0, 1]
    assert list(parsed[keys.TRUNCATED]) == [0, 1] and list(parsed[keys.VIEW]) == [b"", b"Left"]
    assert parsed[keys.AREA][0] == 54.0 and parsed[keys.AREA][1] == float(masks[1].sum())
    assert list(parsed[keys.CLASS_LABEL]) == [3, 3] and list(parsed[keys.SOURCE_ID]) == [b"42"]
    assert keys.SEGMENTATION not in parsed


@pytest.mark.parametrize("obj, reason", [
    (_object(1, [3, 2, 3, 8]), "degenerate box"),
    (_object(1, [3, 2, 40, 8]), "box outside the image"),
    (_object(1, [-5, 2, 4, 8]), "box outside the image"),
    (_object(1, None), "invalid box"),
    (_object(1, [1, 1, 5, 5], [[1, 1, 5, 5]]), "invalid polygon: fewer than 3 points"),
    (_object(1, [1, 1, 5, 5], {"size": [H + 1, W], "counts": [(H + 1) * W]}), "RLE size mismatch"),
])
def test_a_bad_object_is_discarded_alone(png, tf, obj, reason):
    data, inside, discards = _encode(png, _joined([obj, _object(2, [1, 1, 5, 5])]))
    assert inside == 2 and len(discards) == 1 and discards[0][1].startswith(reason)
    assert len(_parse(tf, data)[keys.XMIN]) == 1


def test_an_unreadable_image_discards_the_image_and_its_objects(png):
    joined = _joined([_object(1, [1, 1, 5, 5])])
    data, inside, discards = _encode(b"not an image", joined)
    assert data is None and inside == 0 and len(discards) == 2


def test_objects_only_boxes_get_box_masks_when_others_have_masks_and_yolo_polygons_scale(png, tf):
    joined = _joined([_object(1, [0.1, 0.1, 0.5, 0.5], [[0.1, 0.1, 0.5, 0.1, 0.5, 0.5, 0.1, 0.5]], units=RELATIVE),
                      _object(2, [0, 0, 10, 10])])
    parsed = _parse(tf, _encode(png, joined)[0])
    masks = [instance_masks.decode_png(m) for m in parsed[keys.MASK]]
    assert masks[0][2, 3] == 1 and masks[0][15, 20] == 0
    assert masks[1].sum() == 100


def test_voc_masks_from_object_and_class_pngs(png, tf):
    objects = np.zeros((H, W), np.uint8)
    objects[1:4, 1:5], objects[10:15, 10:20] = 1, 2
    semantic = (objects > 0).astype(np.uint8) * 8
    files = {"SegmentationObject/x.png": instance_masks.encode_png(objects),
             "SegmentationClass/x.png": instance_masks.encode_png(semantic)}
    joined = _joined([_object(1, [1, 1, 5, 4], instance_index=1), _object(2, [10, 10, 20, 15], instance_index=2)],
                     objects_uri="SegmentationObject/x.png", segmentation_uri="SegmentationClass/x.png")
    parsed = _parse(tf, _encode(png, joined, files)[0])
    masks = [instance_masks.decode_png(m) for m in parsed[keys.MASK]]
    np.testing.assert_array_equal(masks[1], (objects == 2).astype(np.uint8))
    np.testing.assert_array_equal(instance_masks.decode_png(parsed[keys.SEGMENTATION][0]), semantic)
    assert list(parsed[keys.SEGMENTATION_FORMAT]) == [b"png"]
    missing = _joined([_object(1, [1, 1, 5, 4])], segmentation_uri="SegmentationClass/none.png")
    data, _inside, discards = _encode(png, missing, files)
    assert data is None and discards[0][1].startswith("semantic mask")


def test_relative_box_clamps_rounding_noise():
    assert relative_box({"box": [0, 0, 1 + 1e-9, 1], "box_units": RELATIVE}, 10, 10)[2] == 1.0


def test_model_garden_decoder_reads_masks(png, tf):
    """Model Garden's TfExampleDecoder(include_mask=True), when tf-models-official is importable (see
    tests/unit/rows/test_detection_encoder.py for how to install it beside this venv)."""
    decoder_module = pytest.importorskip("official.vision.dataloaders.tf_example_decoder")
    mask = np.zeros((H, W), np.uint8)
    mask[2:8, 3:12] = 1
    data, _inside, _discards = _encode(png, _joined([_object(1, [3, 2, 12, 8], rle_of(mask))]))
    out = decoder_module.TfExampleDecoder(include_mask=True).decode(tf.constant(data))
    np.testing.assert_array_equal(out["groundtruth_instance_masks"].numpy()[0] > 0.5, mask.astype(bool))
