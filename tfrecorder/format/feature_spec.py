"""The feature spec of metadata.json, both ways: written from a Schema, read back as a parse spec.

`feature_spec` describes every feature a conversion writes (name → dtype, shape ([] / [n] / null),
allow_missing + default, stored_as); `parse_spec` turns that description into the spec
`tf.io.parse_example` uses (load() and verify() read shards with it). An image column `x_uri`
becomes the features `IMAGE_FEATURES` lists under the prefix `x` (docs/format.md).
"""
from __future__ import annotations

from typing import Any, Collection, Mapping, Optional

from tfrecorder.core import types
from tfrecorder.core.schema import Schema

# (suffix, dtype) of the features one image column writes, in the order the encoder writes them.
IMAGE_FEATURES = (("", "string"), ("_format", "string"), ("_height", "int64"), ("_width", "int64"),
                  ("_channels", "int64"), ("_uri", "string"))


def image_feature_prefix(column: str) -> str:
    """`image_uri` → `image`, `mask_uri` → `mask`, `photo` → `photo`."""
    return column[: -len("_uri")] if column.endswith("_uri") and len(column) > 4 else column


_DEFAULTS = {"string": "", "int64": 0, "float32": 0.0, "float64": 0.0}


def input_spec(role: types.ColumnType, allow_missing: bool) -> dict[str, Any]:
    """metadata.json feature entry of an input or label column (see docs/structured-data.md)."""
    shape = [] if role.element is None else (None if role.length is None else [role.length])
    entry: dict[str, Any] = {"dtype": role.dtype, "shape": shape, "allow_missing": allow_missing}
    if allow_missing:
        scalar = _DEFAULTS[role.dtype]
        entry["default"] = scalar if shape == [] else [] if shape is None else [scalar] * role.length
    if role.stored_as:
        entry["stored_as"] = role.stored_as
    return entry


def feature_spec(schema: Schema, nullable_columns: Optional[Collection[str]] = None) -> dict[str, dict[str, Any]]:
    """The feature spec stored in metadata.json: name → {dtype, shape, allow_missing[, default, stored_as]}.

    Inputs in `nullable_columns` (the columns where the driver's scan found a missing value) may be
    absent from an Example; None means "any input may be missing". Labels and images never are.
    """
    spec: dict[str, dict[str, Any]] = {}
    for column, role in schema.items():
        if role == types.ImageUri:
            prefix = image_feature_prefix(column)
            for suffix, dtype in IMAGE_FEATURES:
                spec[prefix + suffix] = {"dtype": dtype, "shape": [], "allow_missing": False}
        elif role == types.MultiLabel:  # vocabulary indices of the names present (unknown names left out)
            spec[column] = {"dtype": "int64", "shape": None, "allow_missing": False, "multi_label": True}
        elif role.is_label:
            spec[column] = input_spec(role, False)
        elif role != types.SplitKey:
            spec[column] = input_spec(role, nullable_columns is None or column in nullable_columns)
    return spec


def parse_spec(features: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The `tf.io.parse_example` spec for metadata.json "features" (values still as stored).

    Features that may be missing and variable-length lists are parsed ragged, so an absent feature
    shows up as an empty row rather than a parse error or a silent default.
    """
    import tensorflow as tf

    spec = {}
    for name, feature in features.items():
        dtype = _wire_dtype(tf, feature)
        if feature["allow_missing"] or feature["shape"] is None:
            spec[name] = tf.io.RaggedFeature(dtype, row_splits_dtype=tf.int64)
        else:
            spec[name] = tf.io.FixedLenFeature(feature["shape"], dtype)
    return spec


def _wire_dtype(tf, feature: Mapping[str, Any]):
    if feature.get("stored_as") == "float64_bits":
        return tf.int64
    return {"string": tf.string, "int64": tf.int64, "float32": tf.float32, "float64": tf.float32}[feature["dtype"]]
