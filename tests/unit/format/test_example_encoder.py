"""Our hand-written Example serialisation must equal TensorFlow's, byte for byte."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tfrecorder.format.example_encoder import Feature, encode_example


def tf_serialize(tf, features: dict[str, Feature]) -> bytes:
    proto = tf.train.Example()
    proto.features.SetInParent()
    for name, feature in features.items():
        target = proto.features.feature[name]
        if feature.kind == "bytes":
            target.bytes_list.value.extend(feature.values)
            target.bytes_list.SetInParent()
        elif feature.kind == "int64":
            target.int64_list.value.extend(feature.values)
            target.int64_list.SetInParent()
        else:
            target.float_list.value.extend(feature.values)
            target.float_list.SetInParent()
    return proto.SerializeToString(deterministic=True)


CASES = {
    "image_like": {
        "image": Feature("bytes", (bytes(range(256)) * 600,)),
        "image_format": Feature("bytes", (b"jpeg",)),
        "image_height": Feature("int64", (375,)),
        "label": Feature("int64", (-1,)),
        "weight": Feature("float", (0.25,)),
    },
    "extremes": {
        "big": Feature("int64", (2**63 - 1, -(2**63), 0, 1, -1, 127, 128, 300)),
        "floats": Feature("float", (math.inf, -math.inf, 1e-30, 3.5, -0.0)),
        "text": Feature("bytes", ("ünïcødé, \"quoted\"\n\ttab".encode(), b"")),
    },
    "empty_lists": {
        "no_bytes": Feature("bytes", ()),
        "no_ints": Feature("int64", ()),
        "no_floats": Feature("float", ()),
    },
    "no_features": {},
}


def split_entries(data: bytes) -> tuple[bytes, list[bytes]]:
    """(outer framing, raw bytes of each Features map entry) of a serialised Example."""
    from google.protobuf.internal.decoder import _DecodeVarint

    length, start = _DecodeVarint(data, 1)
    body, entries, pos = data[start:start + length], [], 0
    while pos < len(body):
        size, after_tag = _DecodeVarint(body, pos + 1)
        entries.append(body[pos:after_tag + size])
        pos = after_tag + size
    return data[:start], entries


@pytest.mark.parametrize("name", sorted(CASES))
def test_bytes_equal_tensorflow(tf, name):
    """Each map entry is byte-identical; only the order of map entries (not significant) may differ."""
    ours, theirs = encode_example(CASES[name]), tf_serialize(tf, CASES[name])
    assert len(ours) == len(theirs)
    our_head, our_entries = split_entries(ours)
    their_head, their_entries = split_entries(theirs)
    assert our_head == their_head
    assert sorted(our_entries) == sorted(their_entries)
    assert tf.train.Example.FromString(ours) == tf.train.Example.FromString(theirs)


@pytest.mark.parametrize("feature", [f for case in CASES.values() for f in case.values()], ids=repr)
def test_single_feature_examples_are_identical(tf, feature):
    assert encode_example({"f": feature}) == tf_serialize(tf, {"f": feature})


def test_order_of_insertion_does_not_matter(tf):
    forward = {"a": Feature("int64", (1,)), "b": Feature("bytes", (b"x",))}
    backward = dict(reversed(list(forward.items())))
    assert encode_example(forward) == encode_example(backward)


def test_parses_back_with_tensorflow(tf):
    data = encode_example({"x": Feature("float", (1.5, float("nan"))), "n": Feature("int64", (-5,))})
    parsed = tf.io.parse_single_example(
        data, {"x": tf.io.FixedLenFeature([2], tf.float32), "n": tf.io.FixedLenFeature([], tf.int64)}
    )
    assert parsed["n"].numpy() == -5
    assert parsed["x"].numpy()[0] == 1.5 and np.isnan(parsed["x"].numpy()[1])


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown feature kind"):
        Feature("double", (1.0,))


def test_bytes_like_values_encode_like_bytes():
    data = bytes(range(200))
    expected = encode_example({"v": Feature("bytes", (data,))})
    for value in (bytearray(data), memoryview(data)):
        assert encode_example({"v": Feature("bytes", (value,))}) == expected
