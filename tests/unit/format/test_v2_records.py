"""tfrecorder.format.legacy.v2_records: TFRecorder 2.0's base64 raw-pixel images, read with numpy and TensorFlow."""
from __future__ import annotations

import base64
import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import tfrecorder
from support.tfrecorder2_writer import source_pixels
from tfrecorder.core import types
from tfrecorder.errors import RowError
from tfrecorder.format.example_decoder import parse_example
from tfrecorder.format.example_encoder import bytes_feature, encode_example, int64_feature
from tfrecorder.format.legacy.v2_records import PIXEL_MISMATCH, decode_pixels, pixel_array, png_bytes, png_or_raw, upgrade_record
from tfrecorder.io.image_channels import convert_channels
from tfrecorder.core.schema import Schema


def _by_name(dataset) -> dict[str, dict]:
    return {x["image_name"].numpy().decode(): {k: v.numpy() for k, v in x.items()} for x in dataset}


def test_load_returns_pixels_and_label_indices(legacy_job, legacy_table):
    datasets = tfrecorder.load(str(legacy_job))
    assert list(datasets) == ["TRAIN", "VALIDATION", "TEST"]
    vocabulary = datasets.vocabularies["label"]
    labels = {Path(r.image_uri).name: r.label for r in legacy_table.itertuples()}
    paths = {Path(r.image_uri).name: r.image_uri for r in legacy_table.itertuples()}
    for split in ("VALIDATION", "TEST"):
        for name, x in _by_name(datasets[split]).items():
            expected = source_pixels(paths[name])
            assert x["image"].dtype == np.uint8 and x["image"].shape == expected.shape
            np.testing.assert_array_equal(x["image"], expected)
            index = int(x["label"])
            assert (vocabulary[index] if index >= 0 else None) == (labels[name] if labels[name] in vocabulary else None)
            assert x["split"].decode() == split
    assert "fox" not in vocabulary  # a VALIDATION-only label came back as -1


def test_load_options_resize_channels_and_supervised(legacy_job, tf):
    batch = next(iter(tfrecorder.load(str(legacy_job), "test", batch_size=4, image_size=(8, 10), channels=3)))
    assert batch["image"].shape == (1, 8, 10, 3) and batch["image"].dtype == tf.uint8
    image, label = next(iter(tfrecorder.load(str(legacy_job), "validation", as_supervised=True, channels=1)))
    assert image.shape[2] == 1 and label.dtype == tf.int64
    raw = next(iter(tfrecorder.load(str(legacy_job), "test", decode_images=False)))
    assert raw["image"].dtype == tf.string  # as stored: base64 pixels, what TFRecorder 2.0's load() returned


def test_load_names_inconsistent_pixels(legacy_job, tf):
    with pytest.raises(tf.errors.InvalidArgumentError, match="pixel data does not match"):
        list(tfrecorder.load(str(legacy_job), "train"))


def legacy_record(pixels: np.ndarray, label: int = 1, channels=None, encoded=None) -> dict[str, list]:
    """A parsed TFRecorder 2.0 record: URL-safe base64 pixels with their stated shape."""
    height, width, stored = pixels.shape
    return {"image": [encoded if encoded is not None else base64.b64encode(pixels.tobytes(), altchars=b"-_")],
            "image_height": [height], "image_width": [width], "image_channels": [channels or stored],
            "image_name": [b"a.png"], "label": [label], "split": [b"TRAIN"]}


PIXELS = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3) * 7


def test_pixel_array_reads_the_stated_shape_and_names_every_mismatch():
    np.testing.assert_array_equal(pixel_array(legacy_record(PIXELS)), PIXELS)
    gray = PIXELS[:, :, :1]
    assert pixel_array(legacy_record(gray)).shape == (2, 3, 1)
    with pytest.raises(RowError, match=f"{PIXEL_MISMATCH}: 18 bytes for 2x3x1"):
        pixel_array(legacy_record(PIXELS, channels=1))
    with pytest.raises(RowError, match="2x3x4 is not an image shape"):
        pixel_array(legacy_record(PIXELS, channels=4))
    with pytest.raises(RowError, match="not URL-safe base64"):
        pixel_array(legacy_record(PIXELS, encoded=b"ab*c"))
    with pytest.raises(RowError, match="'image_height' must hold one value, has 0"):
        pixel_array({**legacy_record(PIXELS), "image_height": []})


def test_png_bytes_are_lossless_and_png_or_raw_keeps_unreadable_bytes():
    for pixels in (PIXELS, PIXELS[:, :, :1]):
        with Image.open(io.BytesIO(png_bytes(pixels))) as image:
            assert image.format == "PNG"
            decoded = np.asarray(image)
        np.testing.assert_array_equal(decoded.reshape(pixels.shape), pixels)
    data, kind = png_or_raw(legacy_record(PIXELS))
    assert kind == "png" and data == png_bytes(PIXELS)
    assert png_or_raw(legacy_record(PIXELS, channels=1)) == (legacy_record(PIXELS)["image"][0], "bin")


def test_upgrade_record_stores_a_png_keeps_label_indices_and_counts_unknown_labels():
    schema = Schema({"split": types.SplitKey, "image_uri": types.ImageUri, "label": types.StringLabel})

    def encoded(record):
        return encode_example({"image": bytes_feature(*record["image"]), "image_name": bytes_feature(b"a.png"),
                               "split": bytes_feature(b"TRAIN"), "label": int64_feature(*record["label"]),
                               **{n: int64_feature(*record[n]) for n in ("image_height", "image_width", "image_channels")}})

    upgraded, unknown = upgrade_record(encoded(legacy_record(PIXELS, label=-1)), schema)
    example = parse_example(upgraded)
    assert unknown == 1 and example["label"] == [-1] and "split" not in example
    assert example["image_format"] == [b"png"] and example["image_uri"] == [b"a.png"]
    assert (example["image_height"], example["image_width"], example["image_channels"]) == ([2], [3], [3])
    assert example["image"] == [png_bytes(PIXELS)]
    assert upgrade_record(encoded(legacy_record(PIXELS, label=0)), schema)[1] == 0
    with pytest.raises(RowError, match=PIXEL_MISMATCH):
        upgrade_record(encoded(legacy_record(PIXELS, channels=1)), schema)
    with pytest.raises(RowError, match="feature 'label' is missing"):
        upgrade_record(encode_example({"image_name": bytes_feature(b"x")}),
                       Schema({"label": types.IntegerLabel, "split": types.SplitKey}))
    with pytest.raises(RowError, match="unparsable record"):
        upgrade_record(b"\x0a\x05broken", schema)


def test_decode_pixels_converts_channels_resizes_and_refuses_mismatched_pixel_data(tf):
    data = tf.constant(base64.b64encode(PIXELS.tobytes(), altchars=b"-_"))
    height, width = tf.constant(2, tf.int64), tf.constant(3, tf.int64)
    image = decode_pixels(data, height, width, tf.constant(3, tf.int64), None, None)
    np.testing.assert_array_equal(image.numpy(), PIXELS)
    gray = decode_pixels(data, height, width, tf.constant(3, tf.int64), (4, 6), 1)
    assert gray.shape == (4, 6, 1) and gray.dtype == tf.uint8
    expected = tf.image.resize(convert_channels(tf, tf.constant(PIXELS), 1), (4, 6))  # as load() converts, then resizes
    np.testing.assert_array_equal(gray.numpy(), expected.numpy().round().clip(0, 255).astype(np.uint8))
    with pytest.raises(tf.errors.InvalidArgumentError, match=PIXEL_MISMATCH):
        decode_pixels(data, height, width, tf.constant(1, tf.int64), None, None)
