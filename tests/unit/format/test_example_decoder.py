"""Our TensorFlow-free Example parser reads what TensorFlow writes, and what we write."""
from __future__ import annotations

import math

from tfrecorder.format.example_decoder import parse_example
from tfrecorder.format.example_encoder import Feature, encode_example


def test_parses_tensorflow_examples(tf):
    example = tf.train.Example(features=tf.train.Features(feature={
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"\xff\xd8abc", b""])),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[-1, 0, 2**63 - 1, -(2**63)])),
        "score": tf.train.Feature(float_list=tf.train.FloatList(value=[0.5, -2.25])),
        "empty": tf.train.Feature(),
    }))
    parsed = parse_example(example.SerializeToString())
    assert parsed == {"image": [b"\xff\xd8abc", b""], "label": [-1, 0, 2**63 - 1, -(2**63)],
                      "score": [0.5, -2.25], "empty": []}


def test_round_trips_our_encoder():
    features = {"text": Feature("bytes", ("ünï".encode(),)), "n": Feature("int64", (7,)),
                "x": Feature("float", (math.inf,)), "none": Feature("int64", ())}
    assert parse_example(encode_example(features)) == {"text": ["ünï".encode()], "n": [7], "x": [math.inf], "none": []}
