"""Object detection jobs: box rows → one tf.train.Example per image with the TF Object Detection API keys.

Input is long format, one row per box: `image_uri, label, xmin, ymin, xmax, ymax` (+ `split`), from a
DataFrame or parsed from an AutoML CSV / Vertex AI JSONL file (tfrecorder.sources.annotation_files). A row whose
label and four coordinates are all empty says "this image has no boxes". The logic here is pure (no
Beam): `check_box_row` checks one row, `merge_image_rows` decides an image's split from its rows, and
`DetectionEncoder.encode` reads the image and serialises the Example. The Beam wiring is in
beam_pipelines/graphs/detection_graph.py. The keys written, and label_map.pbtxt, are the format
layer's (tfrecorder.format.detection_keys); so is `source_id`, the decimal id derived from an image's URI.
"""
from __future__ import annotations

import dataclasses
import math
import posixpath
from typing import Any, Iterable, Mapping, Optional, Sequence

from tfrecorder.core import splits
from tfrecorder.core import types
from tfrecorder.errors import InvalidImage, RowError
from tfrecorder.io import decode_check, image_probe
from tfrecorder.format.detection_keys import (CLASS_LABEL, CLASS_TEXT, ENCODED, FILENAME, FORMAT, HEIGHT, SOURCE_ID, URI,
                                              WIDTH, XMAX, XMIN, YMAX, YMIN, source_id)
from tfrecorder.format.example_encoder import Feature, encode_example
from tfrecorder.rows.detection_statistics import EncodedImage, image_row
from tfrecorder.rows.row_encoding import DecodeLookup, ImageReader, probe_read_image, resolve_uri
from tfrecorder.rows.value_coercion import is_missing
from tfrecorder.core.schema import IMAGE_COLUMN, LABEL_COLUMN, SPLIT_COLUMN, Schema

BOX_COLUMNS = ("xmin", "ymin", "xmax", "ymax")
BOX_UNITS = ("relative", "pixels")
TOLERANCE = 1e-6  # relative coordinates this far outside [0, 1] are rounding noise and are clamped
CONFLICTING_SPLITS = "conflicting splits"


def is_detection_table(columns: Iterable[str]) -> bool:
    """A table is a detection table when it has the four box columns."""
    present = {str(c).lower() for c in columns}
    return all(c in present for c in BOX_COLUMNS)


def detection_schema(columns: Sequence[str]) -> Schema:
    """The fixed roles of a detection table; ValueError naming what is missing."""
    names = [str(c) for c in columns]
    missing = [c for c in (IMAGE_COLUMN, LABEL_COLUMN, *BOX_COLUMNS) if c not in names]
    if missing:
        raise ValueError(f"a detection table needs columns image_uri, label, xmin, ymin, xmax, ymax; "
                         f"missing {missing} (table columns: {names})")
    roles: dict[str, types.ColumnType] = {IMAGE_COLUMN: types.ImageUri, LABEL_COLUMN: types.StringLabel}
    roles.update({c: types.FloatInput for c in BOX_COLUMNS})
    if SPLIT_COLUMN in names:
        roles[SPLIT_COLUMN] = types.SplitKey
    return Schema(roles)


def check_box_units(box_units: str) -> str:
    if box_units not in BOX_UNITS:
        raise ValueError(f"box_units must be 'relative' (0-1, the default) or 'pixels', got {box_units!r}")
    return box_units


@dataclasses.dataclass(frozen=True)
class Box:
    label: str
    xmin: float
    ymin: float
    xmax: float
    ymax: float


def _blank(value: Any) -> bool:
    return is_missing(value) or (isinstance(value, str) and not value.strip())


def _number(value: Any, column: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise RowError(f"invalid box: {column} is not a number ({value!r})") from None
    if not math.isfinite(number):
        raise RowError(f"invalid box: {column} is not a finite number ({value!r})")
    return number


def check_box_row(row: Mapping[str, Any], box_units: str = "relative") -> Optional[Box]:
    """The row's box (None for an image-without-boxes row), or RowError with the specific reason.

    Relative boxes must lie in [0, 1] (values within TOLERANCE outside are clamped); pixel boxes are
    checked against the image's size when it is read (`DetectionEncoder`).
    """
    if _blank(row.get(IMAGE_COLUMN)):
        raise RowError("empty image URI: column 'image_uri'")
    label, coordinates = row.get(LABEL_COLUMN), [row.get(c) for c in BOX_COLUMNS]
    if _blank(label) and all(_blank(v) for v in coordinates):
        return None
    if _blank(label):
        raise RowError("invalid box: the box has no label")
    if isinstance(label, (list, tuple)):
        raise RowError(f"invalid box: label must be one name, got {label!r}")
    blank = [c for c, v in zip(BOX_COLUMNS, coordinates) if _blank(v)]
    if blank:
        raise RowError(f"invalid box: {', '.join(blank)} missing")
    xmin, ymin, xmax, ymax = (_number(v, c) for c, v in zip(BOX_COLUMNS, coordinates))
    if xmin > xmax:
        raise RowError(f"invalid box: xmin {xmin:g} > xmax {xmax:g}")
    if ymin > ymax:
        raise RowError(f"invalid box: ymin {ymin:g} > ymax {ymax:g}")
    if box_units == "relative":
        outside = [f"{c} {v:g}" for c, v in zip(BOX_COLUMNS, (xmin, ymin, xmax, ymax))
                   if not -TOLERANCE <= v <= 1 + TOLERANCE]
        if outside:
            raise RowError(f"box outside the image: {', '.join(outside)} not in [0, 1]")
        xmin, ymin, xmax, ymax = (min(max(v, 0.0), 1.0) for v in (xmin, ymin, xmax, ymax))
    elif min(xmin, ymin) < 0:
        raise RowError(f"box outside the image: negative pixel coordinate ({xmin:g}, {ymin:g})")
    return Box(str(label).strip(), xmin, ymin, xmax, ymax)


def merge_image_rows(uri: str, raw_splits: Iterable[Any], split_ratios: Sequence[float],
                     by_content: bool = False) -> str:
    """The split of an image from its rows' split cells; RowError if they disagree or are unknown.

    UNASSIGNED images are assigned by hashing the image URI; with `by_content` (issue 29) they stay
    UNASSIGNED here, and the encode step assigns them from their image bytes (splits.split_of_digest),
    so that byte-identical images land in one split.
    """
    names = set()
    for raw in raw_splits:
        name = splits.normalize_split(raw)
        if name is None:
            raise RowError(f"unknown split: {raw!r} (expected TRAIN, VALIDATION, TEST or UNASSIGNED)")
        names.add(name)
    if len(names) > 1:
        raise RowError(f"{CONFLICTING_SPLITS}: rows of {uri} say {', '.join(sorted(names))}")
    split = names.pop()
    if split == splits.UNASSIGNED and not by_content:
        return splits.assign_split(uri, split_ratios)
    return split


def image_name(uri: str) -> str:
    return posixpath.basename(uri.replace("\\", "/").rstrip("/")) or uri


class DetectionEncoder:
    """Encode the rows of one image (already checked) into a detection Example."""

    def __init__(self, label_ids: Mapping[str, int], base_dir: str = "", box_units: str = "relative",
                 image_size: Optional[tuple[int, int]] = None,
                 validate: str = decode_check.DEFAULT_VALIDATION,
                 max_image_pixels: int = image_probe.DEFAULT_MAX_IMAGE_PIXELS) -> None:
        self.label_ids = label_ids
        self.base_dir = base_dir
        self.box_units = box_units
        self.image_size = tuple(image_size) if image_size else None
        self.validate = validate
        self.max_image_pixels = max_image_pixels
        self.image_kinds: set = set()  # what RowEncoder collects for metadata "images"; none for detection
        self.written: Optional[EncodedImage] = None  # the last image encoded (statistics, duplicates: issue 29)

    def resolve(self, uri: str) -> str:
        return resolve_uri(uri, self.base_dir)

    def encode(self, uri: str, rows: Sequence[tuple[Any, Optional[Box]]], read_image: ImageReader,
               decoded: Optional[DecodeLookup] = None) -> tuple[Optional[bytes], int, list[tuple[Any, str]]]:
        """(Example bytes or None, rows inside it, [(row, reason)] discarded).

        `decoded(uri, bytes)`: TensorFlow's verdict when the caller decoded the image already (decode
        mode, as in RowEncoder.encode); without it the image is decoded here.

        `rows` pairs each original row with its checked Box (None: no-box row). A problem with the
        image discards all of its rows; a box that does not fit (pixel box outside the image, label
        not among the TRAIN labels) discards that row only. An image none of whose rows survive is
        not written.
        """
        self.written = None
        try:
            resolved = self.resolve(uri)
            data = read_image(resolved)
            info = probe_read_image(resolved, data, self.validate, decoded, self.max_image_pixels)
            original = (info.height, info.width)
            if self.image_size and original != self.image_size:
                data, info = image_probe.resize_image(data, info, self.image_size, self.max_image_pixels)
        except (RowError, InvalidImage) as exc:
            return None, 0, [(row, str(exc)) for row, _box in rows]
        kept: list[Box] = []
        inside, discards, kept_rows = 0, [], []
        for row, box in rows:
            try:
                if box is not None:
                    kept.append(self._fit(box, *original))
                inside += 1
                kept_rows.append(row)
            except RowError as exc:
                discards.append((row, str(exc)))
        if inside == 0:
            return None, 0, discards
        features = {
            ENCODED: Feature("bytes", (data,)),
            FORMAT: Feature("bytes", (info.format.encode(),)),
            HEIGHT: Feature("int64", (info.height,)),
            WIDTH: Feature("int64", (info.width,)),
            FILENAME: Feature("bytes", (image_name(uri).encode("utf-8"),)),
            SOURCE_ID: Feature("bytes", (source_id(uri).encode("ascii"),)),
            URI: Feature("bytes", (uri.encode("utf-8"),)),
            XMIN: Feature("float", [b.xmin for b in kept]),
            YMIN: Feature("float", [b.ymin for b in kept]),
            XMAX: Feature("float", [b.xmax for b in kept]),
            YMAX: Feature("float", [b.ymax for b in kept]),
            CLASS_TEXT: Feature("bytes", [b.label.encode("utf-8") for b in kept]),
            CLASS_LABEL: Feature("int64", [self.label_ids[b.label] for b in kept]),
        }
        self.written = EncodedImage(data, info, image_row([b.label for b in kept],
                                                          [(b.xmin, b.ymin, b.xmax, b.ymax) for b in kept], *original),
                                    tuple(kept_rows))
        return encode_example(features), inside, discards

    def _fit(self, box: Box, height: int, width: int) -> Box:
        """The box in relative coordinates with a known label; RowError if it does not fit the image."""
        if box.label not in self.label_ids:
            raise RowError(f"unknown label: {box.label!r} is not among the TRAIN labels")
        if self.box_units == "relative":
            return box
        if box.xmax > width + TOLERANCE or box.ymax > height + TOLERANCE:
            raise RowError(f"box outside the image: ({box.xmin:g}, {box.ymin:g}, {box.xmax:g}, {box.ymax:g}) "
                           f"pixels, image is {width}x{height}")
        return Box(box.label, box.xmin / width, box.ymin / height, min(box.xmax / width, 1.0),
                   min(box.ymax / height, 1.0))
