"""The feature spec of metadata.json, both ways: written from a Schema, read back as tf.io parse specs."""
from __future__ import annotations

from support import imagegen
from tfrecorder import Schema
from tfrecorder.format.example_decoder import parse_example
from tfrecorder.format.feature_spec import IMAGE_FEATURES, feature_spec, image_feature_prefix, parse_spec
from tfrecorder.rows.row_encoding import RowEncoder

STRUCTURED = Schema({"n": "IntegerInput", "x": "FloatInput", "d": "DoubleInput", "s": "StringInput", "t": "DatetimeInput",
                     "box": "FloatInput[4]", "ids": "IntegerInput[]", "tags": "StringInput[]", "ds": "DoubleInput[2]"})


def test_feature_spec_entries_for_every_role():
    schema = Schema({"split": "SplitKey", "label": "StringLabel", "k": "IntegerLabel", **STRUCTURED.to_json()})
    spec = feature_spec(schema, nullable_columns={"x", "d", "s", "box", "ids", "label"})
    assert spec == {
        "label": {"dtype": "int64", "shape": [], "allow_missing": False},
        "k": {"dtype": "int64", "shape": [], "allow_missing": False},
        "n": {"dtype": "int64", "shape": [], "allow_missing": False},
        "x": {"dtype": "float32", "shape": [], "allow_missing": True, "default": 0.0},
        "d": {"dtype": "float64", "shape": [], "allow_missing": True, "default": 0.0, "stored_as": "float64_bits"},
        "s": {"dtype": "string", "shape": [], "allow_missing": True, "default": ""},
        "t": {"dtype": "int64", "shape": [], "allow_missing": False},
        "box": {"dtype": "float32", "shape": [4], "allow_missing": True, "default": [0.0, 0.0, 0.0, 0.0]},
        "ids": {"dtype": "int64", "shape": None, "allow_missing": True, "default": []},
        "tags": {"dtype": "string", "shape": None, "allow_missing": False},
        "ds": {"dtype": "float64", "shape": [2], "allow_missing": False, "stored_as": "float64_bits"},
    }
    assert all(entry["allow_missing"] for name, entry in feature_spec(schema).items() if name not in ("label", "k"))


def test_image_prefix_drops_only_a_uri_suffix():
    assert [image_feature_prefix(c) for c in ("image_uri", "mask_uri", "photo", "_uri")] == ["image", "mask", "photo", "_uri"]


def test_the_encoder_writes_exactly_the_image_features_the_spec_declares(tf):
    schema = Schema({"photo_uri": "ImageUri", "label": "StringLabel"})
    data = imagegen.odd_images()["rgb.jpg"][0]
    example, _ = RowEncoder(schema, {"label": ["cat"]}).encode({"photo_uri": "/a.jpg", "label": "cat"}, lambda uri: data)
    spec = feature_spec(schema)
    assert set(parse_example(example)) == set(spec) == {"photo" + suffix for suffix, _ in IMAGE_FEATURES} | {"label"}
    parsed = tf.io.parse_single_example(example, parse_spec(spec))
    assert parsed["photo"].numpy() == data and parsed["photo_uri"].numpy() == b"/a.jpg"


def test_parse_spec_reads_nullable_and_variable_length_features_ragged(tf):
    spec = parse_spec(feature_spec(STRUCTURED, nullable_columns={"x"}))
    assert isinstance(spec["x"], tf.io.RaggedFeature) and isinstance(spec["ids"], tf.io.RaggedFeature)
    assert spec["n"] == tf.io.FixedLenFeature([], tf.int64) and spec["box"] == tf.io.FixedLenFeature([4], tf.float32)
    assert spec["d"].dtype == tf.int64  # float64 stored as its bits
