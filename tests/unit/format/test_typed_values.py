"""tfrecorder.format.typed_values: one record → NumPy values typed by metadata.json, without TensorFlow."""
from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from support.jobbuilder import float64_bits
from tfrecorder.format.example_encoder import Feature, encode_example
from tfrecorder.format.typed_values import decode_image, record_values

FEATURES = {
    "n": {"dtype": "int64", "shape": [], "allow_missing": False},
    "x": {"dtype": "float32", "shape": [], "allow_missing": True, "default": 1.5},
    "price": {"dtype": "float64", "shape": [], "allow_missing": False, "stored_as": "float64_bits"},
    "box": {"dtype": "float32", "shape": [2, 2], "allow_missing": False},
    "tags": {"dtype": "string", "shape": None, "allow_missing": True, "default": []},
}


def test_values_are_typed_and_missing_ones_filled_and_flagged():
    record = encode_example({"n": Feature("int64", [7]), "price": Feature("int64", [float64_bits(0.1)]),
                             "box": Feature("float", [0.0, 0.5, 1.0, 0.25]), "tags": Feature("bytes", [b"a", b"b"])})
    values = record_values(record, FEATURES)
    assert values["n"] == 7 and isinstance(values["n"], np.int64)
    assert values["price"] == 0.1  # float64 restored exactly from its bits
    assert values["x"] == np.float32(1.5) and values["x_missing"] is True
    assert values["box"].shape == (2, 2) and values["box"].dtype == np.float32
    assert list(values["tags"]) == [b"a", b"b"] and values["tags_missing"] is False


def test_a_record_that_does_not_fit_metadata_is_refused():
    with pytest.raises(ValueError, match="no 'n' feature"):
        record_values(encode_example({}), FEATURES)


def test_decode_image_gives_tensorflows_channel_counts():
    def png(mode):
        out = io.BytesIO()
        Image.new(mode, (5, 3)).save(out, "PNG")
        return out.getvalue()

    assert decode_image(png("L")).shape == (3, 5, 1)
    assert decode_image(png("P")).shape == (3, 5, 3)  # palette → RGB, as tf.io.decode_image
    assert decode_image(png("RGBA")).shape == (3, 5, 4)
    assert decode_image(png("L"), channels=3).shape == (3, 5, 3)
