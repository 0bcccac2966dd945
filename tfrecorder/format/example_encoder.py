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


_SMALL_VARINTS = [bytes((i,)) for i in range(128)]


def varint(value: int) -> bytes:
    """The protobuf varint of an int64 (negatives as 10-byte two's complement)."""
    if 0 <= value < 128:
        return _SMALL_VARINTS[value]
    if value < 0:
        value += 1 << 64  # int64 negatives are encoded as 10-byte two's complement varints
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


TAG_1_LEN = b"\x0a"  # field 1, wire type 2
TAG_2_LEN = b"\x12"  # field 2, wire type 2
TAG_3_LEN = b"\x1a"  # field 3, wire type 2
LIST_TAGS = {"bytes": TAG_1_LEN, "float": TAG_2_LEN, "int64": TAG_3_LEN}  # Feature's oneof fields


def _value_list_pieces(feature: Feature) -> tuple[list, int]:
    """The serialised value list of one Feature as pieces (values are not copied) and its length.

    BytesList/FloatList/Int64List: field 1 holds the values (bytes: one field each; numbers: packed).
    """
    if feature.kind == "bytes":
        pieces: list = []
        size = 0
        for value in feature.values:
            length = len(value)
            prefix = varint(length)
            pieces += (TAG_1_LEN, prefix, value)
            size += 1 + len(prefix) + length
        return pieces, size
    if feature.kind == "float":
        with np.errstate(over="ignore"):  # beyond float32's range is ±inf, as tf.train.Example stores it
            packed = np.asarray(feature.values, dtype="<f4").tobytes()
    else:
        packed = b"".join([varint(int(v)) for v in feature.values])
    if not packed:
        return [], 0
    prefix = varint(len(packed))
    return [TAG_1_LEN, prefix, packed], 1 + len(prefix) + len(packed)


def value_list_bytes(feature: Feature) -> bytes:
    """The serialised value list of one Feature (what tfrecorder.format.column_wire frames per row)."""
    return b"".join(_value_list_pieces(feature)[0])


_ENTRIES: dict[tuple, tuple[tuple, int]] = {}  # (name, kind, values) → serialised map entry, for small values
_MAX_ENTRIES = 65536
_MAX_CACHED_BYTES = 16  # formats, short categories: values that repeat


def _entry_key(name: str, feature: Feature):
    """A cache key for features whose values repeat across rows (labels, sizes, formats), else None.

    Floats are never cached: equal floats can differ in bits (0.0 and -0.0). Equal int64 and bytes
    values always serialise the same way."""
    values = feature.values
    if feature.kind == "int64" and len(values) <= 4:
        return name, "int64", tuple(values)
    if feature.kind == "bytes" and len(values) == 1 and type(values[0]) is bytes and len(values[0]) <= _MAX_CACHED_BYTES:
        return name, "bytes", values[0]
    return None


def _entry(name: str, feature: Feature) -> tuple[tuple, int]:
    """One serialised features-map entry as pieces (values not copied) and its size."""
    values, values_size = _value_list_pieces(feature)
    values_prefix = varint(values_size)
    feature_size = 1 + len(values_prefix) + values_size  # Feature { <list> = 1|2|3 }
    feature_prefix = varint(feature_size)
    name_bytes = name.encode("utf-8")
    name_prefix = varint(len(name_bytes))
    entry_size = 1 + len(name_prefix) + len(name_bytes) + 1 + len(feature_prefix) + feature_size
    entry_prefix = varint(entry_size)
    return ((TAG_1_LEN, entry_prefix, TAG_1_LEN, name_prefix, name_bytes, TAG_2_LEN, feature_prefix,
             LIST_TAGS[feature.kind], values_prefix, *values), 1 + len(entry_prefix) + entry_size)


def example_pieces(features: Mapping[str, Feature]) -> list:
    """Pieces whose concatenation is the Example; lengths are computed, so no value is copied. A writer
    that frames the pieces itself (framing.write_record_pieces) never copies an image's bytes at all."""
    entries: list = []
    entries_size = 0
    for name in sorted(features):
        feature = features[name]
        key = _entry_key(name, feature)
        found = _ENTRIES.get(key) if key is not None else None
        if found is None:
            found = _entry(name, feature)
            if key is not None:
                if len(_ENTRIES) >= _MAX_ENTRIES:
                    _ENTRIES.clear()
                _ENTRIES[key] = (b"".join(found[0]),), found[1]
        entries += found[0]
        entries_size += found[1]
    return [TAG_1_LEN, varint(entries_size), *entries]  # Example { Features features = 1 { map = 1 } }


def encode_example(features: Mapping[str, Feature]) -> bytes:
    """Serialise {name: Feature} as a tf.train.Example (features in sorted name order)."""
    return b"".join(example_pieces(features))
