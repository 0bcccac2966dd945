"""Row → tf.train.Example: the pure heart of conversion, testable without Beam.

`prepare_row` decides a row's split and checks its labels (cheap, before any image is read);
`RowEncoder.encode` reads and probes the row's images and serialises the Example. Problems with one
row raise `RowError(reason)`, which the pipeline turns into a line of `discarded.csv`.
"""
from __future__ import annotations

import json
import math
import posixpath
from typing import Any, Callable, Mapping, Optional, Sequence

from tfrecorder import images, splits, types
from tfrecorder.example_encoder import Feature, encode_example
from tfrecorder.schema import Schema

ImageReader = Callable[[str], bytes]


class RowError(ValueError):
    """A row that cannot be converted; the message is the reason written to discarded.csv."""


def is_missing(value: Any) -> bool:
    """None, NaN, NaT and pandas.NA count as missing; empty strings do not."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    try:
        import pandas as pd

        return value is pd.NA or value is pd.NaT
    except ImportError:  # pragma: no cover - pandas is a dependency
        return False


def resolve_uri(uri: str, base_dir: str) -> str:
    """Absolute paths and URLs stay; relative paths are taken relative to `base_dir` (the CSV's folder)."""
    if "://" in uri or uri.startswith("/") or not base_dir:
        return uri
    return posixpath.join(base_dir, uri) if "://" in base_dir else posixpath.normpath(posixpath.join(base_dir, uri))


def image_feature_prefix(column: str) -> str:
    """`image_uri` → `image`, `mask_uri` → `mask`, `photo` → `photo`."""
    return column[: -len("_uri")] if column.endswith("_uri") and len(column) > 4 else column


def split_key(row: Mapping[str, Any], schema: Schema) -> str:
    """The stable key hashed for automatic split assignment: the first image URI, else the whole row."""
    for column in schema.image_columns:
        value = row.get(column)
        if not is_missing(value):
            return str(value)
    return json.dumps({k: str(row.get(k)) for k in sorted(schema)}, sort_keys=True)


def prepare_row(row: Mapping[str, Any], schema: Schema, split_ratios: Sequence[float]) -> str:
    """Return the row's split (assigning UNASSIGNED rows by hash) or raise RowError."""
    split_column = schema.split_column
    raw = row.get(split_column) if split_column else None
    split = splits.normalize_split(raw)
    if split is None:
        raise RowError(f"unknown split: {raw!r} (expected TRAIN, VALIDATION, TEST or UNASSIGNED)")
    for column in schema.label_columns:
        value = row.get(column)
        if is_missing(value) or (isinstance(value, str) and not value.strip()):
            raise RowError(f"empty label: column {column!r}")
        if schema[column] == types.IntegerLabel:
            _to_int(value, column, "integer label")
    for column in schema.image_columns:
        value = row.get(column)
        if is_missing(value) or not str(value).strip():
            raise RowError(f"empty image URI: column {column!r}")
    if split == splits.UNASSIGNED:
        split = splits.assign_split(split_key(row, schema), split_ratios)
    return split


def _to_int(value: Any, column: str, what: str = "integer") -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    try:
        import numpy as np

        if isinstance(value, np.integer):
            return int(value)
    except ImportError:  # pragma: no cover
        pass
    raise RowError(f"invalid {what}: column {column!r} has {value!r}")


def _to_float(value: Any, column: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise RowError(f"invalid number: column {column!r} has {value!r}") from None


class RowEncoder:
    """Encode prepared rows of one table into serialized tf.train.Example bytes."""

    def __init__(
        self,
        schema: Schema,
        vocabularies: Mapping[str, Sequence[str]],
        base_dir: str = "",
        image_size: Optional[tuple[int, int]] = None,
        full_decode: bool = False,
    ) -> None:
        self.schema = schema
        self.label_index = {col: {label: i for i, label in enumerate(v)} for col, v in vocabularies.items()}
        self.base_dir = base_dir
        self.image_size = tuple(image_size) if image_size else None
        self.full_decode = full_decode

    def image_uris(self, row: Mapping[str, Any]) -> list[str]:
        """The resolved URIs of the images `encode` will read for this row (for prefetching)."""
        return [resolve_uri(str(row.get(c)), self.base_dir) for c in self.schema.image_columns if not is_missing(row.get(c))]

    def _image_features(self, column: str, uri: str, read_image: ImageReader) -> dict[str, Feature]:
        data = read_image(resolve_uri(uri, self.base_dir))
        try:
            info = images.probe_image(data, full_decode=self.full_decode)
            if self.image_size and (info.height, info.width) != self.image_size:
                data, info = images.resize_image(data, info, self.image_size)
        except images.InvalidImage as exc:
            raise RowError(str(exc)) from None
        prefix = image_feature_prefix(column)
        return {
            prefix: Feature("bytes", (data,)),
            f"{prefix}_format": Feature("bytes", (info.format.encode(),)),
            f"{prefix}_height": Feature("int64", (info.height,)),
            f"{prefix}_width": Feature("int64", (info.width,)),
            f"{prefix}_channels": Feature("int64", (info.channels,)),
            f"{prefix}_uri": Feature("bytes", (uri.encode("utf-8"),)),
        }

    def encode(self, row: Mapping[str, Any], read_image: ImageReader) -> tuple[bytes, int]:
        """Serialise one row, reading its images with `read_image`.

        Returns (Example bytes, number of labels not in the vocabulary).
        """
        features: dict[str, Feature] = {}
        unknown_labels = 0
        for column, role in self.schema.items():
            value = row.get(column)
            if role == types.SplitKey:
                continue
            if role == types.ImageUri:
                features.update(self._image_features(column, str(value), read_image))
            elif role == types.StringLabel:
                index = self.label_index.get(column, {}).get(str(value), -1)
                unknown_labels += index < 0
                features[column] = Feature("int64", (index,))
            elif is_missing(value):
                continue  # inputs that are missing are left out of the Example
            elif role in (types.IntegerLabel, types.IntegerInput):
                features[column] = Feature("int64", (_to_int(value, column),))
            elif role == types.FloatInput:
                features[column] = Feature("float", (_to_float(value, column),))
            else:
                text = value if isinstance(value, str) else str(value)
                features[column] = Feature("bytes", (text.encode("utf-8"),))
        return encode_example(features), unknown_labels


def feature_spec(schema: Schema) -> dict[str, dict[str, Any]]:
    """The feature spec stored in metadata.json: name → {dtype, shape, allow_missing}."""
    spec: dict[str, dict[str, Any]] = {}
    for column, role in schema.items():
        if role == types.ImageUri:
            prefix = image_feature_prefix(column)
            for suffix, dtype in (("", "string"), ("_format", "string"), ("_height", "int64"),
                                  ("_width", "int64"), ("_channels", "int64"), ("_uri", "string")):
                spec[prefix + suffix] = {"dtype": dtype, "shape": [], "allow_missing": False}
        elif role.is_label:
            spec[column] = {"dtype": "int64", "shape": [], "allow_missing": False}
        elif role != types.SplitKey:
            dtype = {"int64": "int64", "float": "float32", "bytes": "string"}[role.feature_dtype]
            spec[column] = {"dtype": dtype, "shape": [], "allow_missing": True}
    return spec
