"""Serialise `tf.train.Example` protos straight to bytes, without TensorFlow.

Workers build one Example per row; going through the protobuf classes costs a copy of every image
and an import of TensorFlow. The wire format is small and stable, so we write it directly, features in
sorted name order. Every map entry is byte-identical to what `tf.train.Example` serialises (tested);
protobuf's own map order is an implementation detail and carries no meaning.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

class Feature:
    """One feature value list, tagged with its kind: "bytes", "int64" or "float"."""

    __slots__ = ("kind", "values")

    def __init__(self, kind: str, values: Sequence) -> None:
        if kind not in ("bytes", "int64", "float"):
            raise ValueError(f"unknown feature kind {kind!r}")
        self.kind = kind
        self.values = values

    def __repr__(self) -> str:
        return f"Feature({self.kind!r}, {self.values!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Feature) and self.kind == other.kind and list(self.values) == list(other.values)


def bytes_feature(*values: bytes) -> Feature:
    return Feature("bytes", values)


def int64_feature(*values: int) -> Feature:
    return Feature("int64", values)


def float_feature(*values: float) -> Feature:
    return Feature("float", values)


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64 negatives are encoded as 10-byte two's complement varints
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _length_delimited(field_tag: bytes, payload: bytes) -> bytes:
    return field_tag + _varint(len(payload)) + payload


_TAG_1_LEN = b"\x0a"  # field 1, wire type 2
_TAG_2_LEN = b"\x12"  # field 2, wire type 2
_TAG_3_LEN = b"\x1a"  # field 3, wire type 2


def _encode_feature(feature: Feature) -> bytes:
    """Feature message: oneof bytes_list = 1, float_list = 2, int64_list = 3."""
    if feature.kind == "bytes":
        body = b"".join(_length_delimited(_TAG_1_LEN, bytes(v)) for v in feature.values)
        return _length_delimited(_TAG_1_LEN, body)
    if feature.kind == "float":
        packed = np.asarray(feature.values, dtype="<f4").tobytes()
        body = _length_delimited(_TAG_1_LEN, packed) if packed else b""
        return _length_delimited(_TAG_2_LEN, body)
    packed = b"".join(_varint(int(v)) for v in feature.values)
    body = _length_delimited(_TAG_1_LEN, packed) if packed else b""
    return _length_delimited(_TAG_3_LEN, body)


def encode_example(features: Mapping[str, Feature]) -> bytes:
    """Serialise {name: Feature} as a tf.train.Example (features in sorted name order)."""
    entries = []
    for name in sorted(features):
        entry = _length_delimited(_TAG_1_LEN, name.encode("utf-8")) + _length_delimited(
            _TAG_2_LEN, _encode_feature(features[name])
        )
        entries.append(_length_delimited(_TAG_1_LEN, entry))
    return _length_delimited(_TAG_1_LEN, b"".join(entries))

