"""Row → Example without Beam."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from support import imagegen
from support import readers
from tfrecorder import Schema
from tfrecorder.core import types
from tfrecorder.format.feature_spec import feature_spec
from tfrecorder.errors import RowError
from tfrecorder.rows.row_encoding import RowEncoder, prepare_row, resolve_uri
from tfrecorder.core.splits import DEFAULT_SPLIT_RATIOS

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


def test_pieces_hold_the_image_bytes_themselves():
    """The pipeline frames the pieces (framing.write_record_pieces): the image is never copied."""
    row = {"split": "TRAIN", "image_uri": "a.jpg", "label": "dog", "age": "7", "score": 0.5, "note": "hi"}
    pieces, unknown = encoder(base_dir="/data").encode_pieces(row, read)
    assert (b"".join(pieces), unknown) == encoder(base_dir="/data").encode(row, read)
    assert any(piece is JPEG for piece in pieces)


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


STRUCTURED = Schema({"n": "IntegerInput", "x": "FloatInput", "d": "DoubleInput", "s": "StringInput", "t": "DatetimeInput",
                     "box": "FloatInput[4]", "ids": "IntegerInput[]", "tags": "StringInput[]", "ds": "DoubleInput[2]"})


def structured(tf, row):
    data, _ = RowEncoder(STRUCTURED, {}).encode(row, read)
    return data, readers.parse_example(data, feature_spec(STRUCTURED))


def test_python_and_numpy_values_encode_exactly(tf):
    row = {"n": np.int64(-2**63), "x": np.float32(0.1), "d": 0.1, "s": "a,\"b\"\n\tü", "t": pd.Timestamp("2020-01-01T01:00:00.000000001+01:00"),
           "box": np.array([0.0, 0.5, np.nan, np.inf], dtype=np.float32), "ids": [2**63 - 1, True], "tags": ("", "ünï"),
           "ds": [float("-inf"), 1e-308]}
    data, parsed = structured(tf, row)
    assert parsed["n"] == -2**63 and parsed["x"] == float(np.float32(0.1)) and parsed["d"] == 0.1
    assert parsed["s"] == "a,\"b\"\n\tü".encode() and parsed["t"] == 1577836800_000000001
    assert parsed["box"][:2] == [0.0, 0.5] and math.isnan(parsed["box"][2]) and parsed["box"][3] == math.inf
    assert parsed["ids"] == [2**63 - 1, 1] and parsed["tags"] == [b"", "ünï".encode()] and parsed["ds"] == [-math.inf, 1e-308]
    # The same bytes through TensorFlow's own parser: fixed shapes, ragged lists, float64 as bit patterns.
    tf_parsed = tf.io.parse_single_example(data, {
        "box": tf.io.FixedLenFeature([4], tf.float32), "ids": tf.io.VarLenFeature(tf.int64),
        "d": tf.io.FixedLenFeature([], tf.int64), "ds": tf.io.FixedLenFeature([2], tf.int64)})
    assert tf_parsed["box"].shape == (4,) and tf_parsed["ids"].values.numpy().tolist() == [2**63 - 1, 1]
    assert tf.bitcast(tf_parsed["d"], tf.float64).numpy() == 0.1
    assert tf.bitcast(tf_parsed["ds"], tf.float64).numpy().tolist() == [-math.inf, 1e-308]


def test_csv_text_values_encode_like_their_types(tf):
    row = {"n": " TRUE ", "x": "-inf", "d": "0.1", "s": "", "t": "1970-01-01T00:00:01Z", "box": "[1, 2.5, NaN, -Infinity]",
           "ids": "[]", "tags": '["a, b", ""]', "ds": "[0.1, 0.2]"}
    _, parsed = structured(tf, row)
    assert parsed["n"] == 1 and parsed["x"] == -math.inf and parsed["d"] == 0.1 and parsed["s"] == b""
    assert parsed["t"] == 1_000_000_000 and parsed["box"][:2] == [1.0, 2.5] and math.isnan(parsed["box"][2])
    assert parsed["ids"] == [] and parsed["ids_missing"] is False and parsed["tags"] == [b"a, b", b""]
    assert parsed["ds"] == [0.1, 0.2]


def test_missing_values_are_left_out_and_flagged(tf):
    row = {"n": pd.NA, "x": float("nan"), "d": np.float32("nan"), "s": None, "t": pd.NaT, "box": None, "ids": None,
           "tags": float("nan"), "ds": None}
    data, parsed = structured(tf, row)
    assert data == tf.train.Example(features=tf.train.Features()).SerializeToString()  # no features at all
    assert all(parsed[f"{name}_missing"] for name in STRUCTURED)
    assert parsed["box"] == [0.0] * 4 and parsed["ids"] == [] and parsed["s"] == b"" and parsed["ds"] == [0.0, 0.0]


@pytest.mark.parametrize("column, value, reason", [
    ("n", 2**63, "integer out of int64 range"), ("n", np.uint64(2**64 - 1), "integer out of int64 range"),
    ("n", "1.5", "invalid integer"), ("n", float("inf"), "invalid integer"), ("x", "abc", "invalid number"),
    ("t", "yesterday", "invalid datetime"), ("t", pd.Timestamp("2500-01-01"), "invalid datetime"),
    ("box", [1, 2, 3], "wrong list length"), ("ids", [1, None], "missing list element"),
    ("ids", "1,2", "invalid list"), ("ids", 5, "invalid list"), ("tags", "[1", "invalid list"),
])
def test_structured_row_errors(column, value, reason):
    with pytest.raises(RowError, match=f"^{reason}: column '{column}'"):
        RowEncoder(STRUCTURED, {}).encode({column: value}, read)


def test_multi_label_rows_encode_vocabulary_indices_and_count_unknown_names():
    from tfrecorder.format.example_decoder import parse_example

    schema = Schema({"label": types.MultiLabel, "split": types.SplitKey})
    assert Schema.infer(pd.DataFrame({"label": [["a"], []]}))["label"] == types.MultiLabel
    encoder = RowEncoder(schema, {"label": ["cat", "dog", "sun"]})
    data, unknown = encoder.encode({"label": ["sun", "owl", "cat", "sun"], "split": "TRAIN"}, read_image=None)
    assert parse_example(data)["label"] == [2, 0] and unknown == 1
    data, unknown = encoder.encode({"label": '["dog"]', "split": "TRAIN"}, read_image=None)  # CSV text
    assert parse_example(data)["label"] == [1] and unknown == 0
    assert prepare_row({"label": [], "split": "TRAIN"}, schema, (1.0, 0.0, 0.0)) == "TRAIN"
    with pytest.raises(RowError, match="empty label"):
        prepare_row({"label": ["cat", " "], "split": "TRAIN"}, schema, (1.0, 0.0, 0.0))
    with pytest.raises(RowError, match="invalid list"):
        prepare_row({"label": "cat", "split": "TRAIN"}, schema, (1.0, 0.0, 0.0))
