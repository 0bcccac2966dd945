"""Row → tf.train.Example: the pure heart of conversion, testable without Beam.

`prepare_row` decides a row's split and checks its labels (cheap, before any image is read);
`RowEncoder.encode` reads and probes the row's images and serialises the Example. Problems with one
row raise `RowError(reason)`, which the pipeline turns into a line of `discarded.csv`. How each value
becomes a feature is tfrecorder.rows.value_coercion.
"""
from __future__ import annotations

import json
import posixpath
from typing import Any, Callable, Mapping, Optional, Sequence

from tfrecorder.core import splits
from tfrecorder.core import types
from tfrecorder.errors import InvalidImage, RowError
from tfrecorder.format.example_encoder import Feature, example_pieces
from tfrecorder.format.feature_spec import IMAGE_FEATURES, image_feature_prefix
from tfrecorder.io import decode_check, image_probe
from tfrecorder.rows.value_coercion import input_values, is_missing, multi_label_names, to_int
from tfrecorder.core.schema import Schema

ImageReader = Callable[[str], bytes]
DecodeLookup = Callable[[str, bytes], decode_check.Verdict]  # (uri, bytes) → TensorFlow's verdict


def resolve_uri(uri: str, base_dir: str) -> str:
    """Absolute paths and URLs stay; relative paths are taken relative to `base_dir` (the CSV's folder)."""
    if "://" in uri or uri.startswith("/") or not base_dir:
        return uri
    return posixpath.join(base_dir, uri) if "://" in base_dir else posixpath.normpath(posixpath.join(base_dir, uri))


def split_key(row: Mapping[str, Any], schema: Schema) -> str:
    """The stable key hashed for automatic split assignment: the first image URI, else the whole row."""
    for column in schema.image_columns:
        value = row.get(column)
        if not is_missing(value):
            return str(value)
    return json.dumps({k: str(row.get(k)) for k in sorted(schema)}, sort_keys=True)


def empty_image_uri(value: Any, column: str) -> Optional[str]:
    """The discard reason when an image column's value names no image (missing or blank), else None."""
    return f"empty image URI: column {column!r}" if is_missing(value) or not str(value).strip() else None


def content_splits(schema: Schema, grouped_by_image: bool = False) -> bool:
    """Whether a job's UNASSIGNED rows get their split from their image bytes (issue 29): every job of
    images — rows of images, and detection or COCO/VOC/YOLO jobs (`grouped_by_image`), whose images
    are given it when encoded (beam_pipelines.graphs.detection_graph.written_image)."""
    return bool(schema.image_columns)


def unassigned(row: Mapping[str, Any], schema: Schema) -> bool:
    """Whether the row leaves its split to tfrecorder (no split column, or an empty/UNASSIGNED cell)."""
    split_column = schema.split_column
    return splits.normalize_split(row.get(split_column) if split_column else None) == splits.UNASSIGNED


def prepare_row(row: Mapping[str, Any], schema: Schema, split_ratios: Sequence[float]) -> str:
    """Return the row's split (assigning UNASSIGNED rows by hash) or raise RowError.

    In a job of image rows (JobConfig.content_splits) the encoder replaces the split of an UNASSIGNED
    row by one chosen from its image bytes once read (splits.split_of_digest); until then this one,
    from the URI, is a placeholder (the count step takes such rows as possibly TRAIN:
    table_stats.StatsCounter)."""
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
            to_int(value, column, "integer label")
        elif schema[column] == types.MultiLabel:
            multi_label_names(value, column)
    for column in schema.image_columns:
        reason = empty_image_uri(row.get(column), column)
        if reason:
            raise RowError(reason)
    if split == splits.UNASSIGNED:
        split = splits.assign_split(split_key(row, schema), split_ratios)
    return split


def probe_read_image(uri: str, data: bytes, validate: str, decoded: Optional[DecodeLookup] = None,
                     max_pixels: int = image_probe.DEFAULT_MAX_IMAGE_PIXELS) -> image_probe.ImageInfo:
    """The info of image bytes read from `uri` under the validation mode; InvalidImage(reason) when it is
    refused (an image over `max_pixels` in either mode). In decode mode `decoded(uri, data)` gives
    TensorFlow's verdict when the caller decoded the image already; without it the image is decoded here."""
    verdict = decoded(uri, data) if decoded and validate != decode_check.HEADER else None
    return decode_check.check_image(data, validate, verdict, max_pixels)


_IMAGE, _STRING_LABEL, _MULTI_LABEL, _INPUT = "image", "string label", "multi label", "input"
_KINDS = {types.ImageUri: _IMAGE, types.StringLabel: _STRING_LABEL, types.MultiLabel: _MULTI_LABEL}


def input_feature(role: types.ColumnType, value: Any, column: str) -> Feature:
    """The Feature of one present input or integer-label value (RowError if it does not fit): every
    Feature of a row is built in this module, from the values tfrecorder.rows.value_coercion checks."""
    return Feature(role.feature_dtype, input_values(role, value, column))


class RowEncoder:
    """Encode prepared rows of one table into serialized tf.train.Example bytes."""

    def __init__(
        self,
        schema: Schema,
        vocabularies: Mapping[str, Sequence[str]],
        base_dir: str = "",
        image_size: Optional[tuple[int, int]] = None,
        validate: str = decode_check.DEFAULT_VALIDATION,
        max_image_pixels: int = image_probe.DEFAULT_MAX_IMAGE_PIXELS,
    ) -> None:
        self.schema = schema
        self.label_index = {col: {label: i for i, label in enumerate(v)} for col, v in vocabularies.items()}
        self.base_dir = base_dir
        self.image_size = tuple(image_size) if image_size else None
        self.validate = validate
        self.max_image_pixels = max_image_pixels
        self.image_kinds: set[tuple[str, str, int]] = set()  # (feature prefix, format, channels) written
        self.row_images: list[tuple[str, str, image_probe.ImageInfo, bytes]] = []  # (column, resolved uri, info, bytes)
        self._image_columns = schema.image_columns
        self._plan = [(column, _KINDS.get(role, _INPUT), role) for column, role in schema.items()
                      if role != types.SplitKey]  # roles compared once, not per row

    def image_uris(self, row: Mapping[str, Any]) -> list[str]:
        """The resolved URIs of the images `encode` will read for this row (for prefetching)."""
        return [resolve_uri(str(row.get(c)), self.base_dir) for c in self._image_columns if not is_missing(row.get(c))]

    def _image_features(self, column: str, uri: str, read_image: ImageReader,
                        decoded: Optional[DecodeLookup]) -> dict[str, Feature]:
        resolved = resolve_uri(uri, self.base_dir)
        data = read_image(resolved)
        try:
            info = probe_read_image(resolved, data, self.validate, decoded, self.max_image_pixels)
            if self.image_size and (info.height, info.width) != self.image_size:
                data, info = image_probe.resize_image(data, info, self.image_size, self.max_image_pixels)
        except InvalidImage as exc:
            raise RowError(str(exc)) from None
        prefix = image_feature_prefix(column)
        self.image_kinds.add((prefix, info.format, info.channels))
        self.row_images.append((column, resolved, info, data))  # for statistics and duplicates (issue 29)
        values = (data, info.format.encode(), info.height, info.width, info.channels, uri.encode("utf-8"))
        return {prefix + suffix: Feature("bytes" if dtype == "string" else dtype, (value,))
                for (suffix, dtype), value in zip(IMAGE_FEATURES, values)}

    def encode(self, row: Mapping[str, Any], read_image: ImageReader,
               decoded: Optional[DecodeLookup] = None) -> tuple[bytes, int]:
        """Serialise one row, reading its images with `read_image`.

        In decode mode `decoded(uri, bytes)` supplies TensorFlow's verdict when the caller decoded the
        images already (in parallel); without it they are decoded here. Returns (Example bytes,
        number of labels not in the vocabulary).
        """
        pieces, unknown_labels = self.encode_pieces(row, read_image, decoded)
        return b"".join(pieces), unknown_labels

    def encode_pieces(self, row: Mapping[str, Any], read_image: ImageReader,
                      decoded: Optional[DecodeLookup] = None) -> tuple[list, int]:
        """`encode`, with the Example as pieces to frame without joining them (framing.write_record_pieces)."""
        features: dict[str, Feature] = {}
        unknown_labels = 0
        self.row_images = []
        for column, kind, role in self._plan:
            value = row.get(column)
            if kind is _IMAGE:
                features.update(self._image_features(column, str(value), read_image, decoded))
            elif kind is _STRING_LABEL:
                index = self.label_index.get(column, {}).get(str(value), -1)
                unknown_labels += index < 0
                features[column] = Feature("int64", (index,))
            elif kind is _MULTI_LABEL:
                known = self.label_index.get(column, {})
                names = multi_label_names(value, column)
                unknown_labels += sum(name not in known for name in names)
                features[column] = Feature("int64", [known[name] for name in names if name in known])
            elif is_missing(value):
                continue  # inputs that are missing are left out of the Example
            else:
                features[column] = input_feature(role, value, column)
        return example_pieces(features), unknown_labels
