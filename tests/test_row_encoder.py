"""Row → Example without Beam."""
from __future__ import annotations

import pytest

import imagegen
from tfrecorder import Schema, types
from tfrecorder.row_encoder import RowEncoder, RowError, prepare_row, resolve_uri
from tfrecorder.splits import DEFAULT_SPLIT_RATIOS

SCHEMA = Schema({"split": types.SplitKey, "image_uri": types.ImageUri, "label": types.StringLabel,
                 "age": types.IntegerInput, "score": types.FloatInput, "note": types.StringInput})
JPEG = imagegen.odd_images()["rgb.jpg"][0]


def read(uri):
    if uri != "/data/a.jpg":
        raise RowError(f"missing file: {uri}")
    return JPEG


def encoder(**kwargs):
    return RowEncoder(SCHEMA, {"label": ["cat", "dog"]}, **kwargs)


def parse(tf, data):
    spec = {"image": tf.io.FixedLenFeature([], tf.string), "image_format": tf.io.FixedLenFeature([], tf.string),
            "image_height": tf.io.FixedLenFeature([], tf.int64), "image_width": tf.io.FixedLenFeature([], tf.int64),
            "image_channels": tf.io.FixedLenFeature([], tf.int64), "image_uri": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64), "age": tf.io.VarLenFeature(tf.int64),
            "score": tf.io.VarLenFeature(tf.float32), "note": tf.io.VarLenFeature(tf.string)}
    return tf.io.parse_single_example(data, spec)


def test_encodes_image_and_typed_columns(tf):
    row = {"split": "TRAIN", "image_uri": "a.jpg", "label": "dog", "age": "7", "score": 0.5, "note": "hi, there"}
    data, unknown = encoder(base_dir="/data").encode(row, read)
    parsed = parse(tf, data)
    assert parsed["image"].numpy() == JPEG
    assert parsed["image_format"].numpy() == b"jpeg"
    assert (parsed["image_height"].numpy(), parsed["image_width"].numpy(), parsed["image_channels"].numpy()) == (24, 32, 3)
    assert parsed["image_uri"].numpy() == b"a.jpg"
    assert parsed["label"].numpy() == 1 and unknown == 0
    assert parsed["age"].values.numpy().tolist() == [7]
    assert parsed["note"].values.numpy().tolist() == [b"hi, there"]


def test_missing_inputs_are_left_out_and_unknown_labels_are_minus_one(tf):
    row = {"split": "TEST", "image_uri": "/data/a.jpg", "label": "emu", "age": None, "score": float("nan"), "note": None}
    data, unknown = encoder().encode(row, read)
    parsed = parse(tf, data)
    assert parsed["label"].numpy() == -1 and unknown == 1
    assert parsed["age"].values.shape[0] == parsed["score"].values.shape[0] == parsed["note"].values.shape[0] == 0


@pytest.mark.parametrize(
    "row, reason",
    [({"image_uri": "/data/nope.jpg", "label": "cat"}, "missing file"),
     ({"image_uri": "/data/a.jpg", "label": "cat", "age": "seven"}, "invalid integer"),
     ({"image_uri": "/data/a.jpg", "label": "cat", "score": "high"}, "invalid number")],
)
def test_row_errors(row, reason):
    with pytest.raises(RowError, match=f"^{reason}"):
        encoder().encode(row, read)


@pytest.mark.parametrize(
    "row, reason",
    [({"split": "dev", "image_uri": "a", "label": "x"}, "unknown split"),
     ({"split": "TRAIN", "image_uri": "a", "label": "  "}, "empty label"),
     ({"split": "TRAIN", "image_uri": "a", "label": None}, "empty label"),
     ({"split": "TRAIN", "image_uri": None, "label": "x"}, "empty image URI")],
)
def test_prepare_row_rejects(row, reason):
    with pytest.raises(RowError, match=f"^{reason}"):
        prepare_row(row, SCHEMA, DEFAULT_SPLIT_RATIOS)


def test_image_uris_are_resolved_for_prefetch():
    row = {"image_uri": "a.jpg", "label": "cat"}
    assert encoder(base_dir="/data").image_uris(row) == ["/data/a.jpg"]
    assert encoder().image_uris({"image_uri": None}) == []


def test_prepare_assigns_unassigned_rows_by_uri():
    row = {"split": "UNASSIGNED", "image_uri": "gs://b/x.jpg", "label": "cat"}
    assert prepare_row(row, SCHEMA, DEFAULT_SPLIT_RATIOS) == prepare_row(dict(row, split=None), SCHEMA, DEFAULT_SPLIT_RATIOS)
    assert prepare_row(row, SCHEMA, (1.0, 0.0, 0.0)) == "TRAIN"


def test_resolve_uri():
    assert resolve_uri("img/a.jpg", "/data/csvdir") == "/data/csvdir/img/a.jpg"
    assert resolve_uri("../a.jpg", "/data/csvdir") == "/data/a.jpg"
    assert resolve_uri("/abs/a.jpg", "/data") == "/abs/a.jpg"
    assert resolve_uri("gs://b/a.jpg", "/data") == "gs://b/a.jpg"
    assert resolve_uri("a.jpg", "gs://b/dir") == "gs://b/dir/a.jpg"
