"""Statistics of object-detection jobs (box CSVs, COCO/VOC/YOLO datasets), per split, in bounded memory (issue 29).

A detection job writes one Example per image, with its boxes. Its statistics are those of a table of
written images (tfrecorder.rows.dataset_statistics, the same mergeable sketches and statistics.json
layout) whose fixed columns describe each image:

  image       the written image: width, height, byte-size distributions, formats, channels
  label       the image's box labels as a list: `labels.counts` counts boxes per class, `list_lengths`
              is the boxes-per-image distribution, `missing_classes` the label map's classes without
              a box in the split
  box_area    each box's area as a fraction of the image (0-1), one value per box
  box_aspect  each box's width / height in pixels (boxes of zero height left out)

and each split also says `images` and `boxes` (exact counts). `image_row` turns one encoded image into
such a row; `DetectionStatistics` adds the box count to DatasetStatistics.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, Optional, Sequence

import pyarrow as pa

from tfrecorder.core import types
from tfrecorder.core.schema import Schema
from tfrecorder.rows.dataset_statistics import DatasetStatistics

IMAGE, LABEL, BOX_AREA, BOX_ASPECT = "image", "label", "box_area", "box_aspect"
# the boxes' labels: a list of labels, every box counted (a MultiLabel cell would count a class once per image)
BOX_LABELS = types.ColumnType("BoxLabels", "bytes", is_label=True, dtype="string", element=types.StringInput)
_FLOATS = types.list_of(types.FloatInput)
STATISTICS_SCHEMA = Schema({IMAGE: types.ImageUri, LABEL: BOX_LABELS, BOX_AREA: _FLOATS, BOX_ASPECT: _FLOATS})
_ARROW_TYPES = {LABEL: pa.list_(pa.string()), BOX_AREA: pa.list_(pa.float64()), BOX_ASPECT: pa.list_(pa.float64())}

Box = Sequence[float]  # (xmin, ymin, xmax, ymax), relative to the image (0-1)


@dataclasses.dataclass(frozen=True)
class EncodedImage:
    """What a detection encoder wrote for one image: the image bytes in the Example, their ImageInfo,
    the image's statistics row (`image_row`) and the source rows inside the Example (as discarded.csv
    would list them: what duplicates="drop" discards when it drops the image)."""

    data: bytes
    info: Any
    row: dict
    inside: tuple = ()


def image_row(labels: Iterable[str], boxes: Iterable[Box], height: int, width: int) -> dict[str, list]:
    """One written image as a statistics row: its box labels, areas (fractions of the image) and
    aspect ratios (width / height in pixels of the original image: `height`, `width`)."""
    areas, aspects = [], []
    for xmin, ymin, xmax, ymax in boxes:
        box_width, box_height = max(xmax - xmin, 0.0), max(ymax - ymin, 0.0)
        areas.append(box_width * box_height)
        if box_height > 0 and height > 0:
            aspects.append(box_width * width / (box_height * height))
    return {LABEL: [str(label) for label in labels], BOX_AREA: areas, BOX_ASPECT: aspects}


class DetectionStatistics(DatasetStatistics):
    """DatasetStatistics of STATISTICS_SCHEMA rows (`image_row`), with the exact box count per split."""

    def __init__(self, schema: Schema = STATISTICS_SCHEMA) -> None:
        super().__init__(schema)
        self.boxes: dict[str, int] = {}

    def add_rows(self, split: str, rows: Sequence[Mapping[str, Any]],
                 images: Optional[Mapping[str, Sequence[tuple[str, int, int, int, int]]]] = None) -> None:
        """Add `image_row`s written to `split`; `images[IMAGE]`: (format, height, width, channels, bytes)
        of each row's written image."""
        if not rows:
            return
        self.rows[split] = self.rows.get(split, 0) + len(rows)
        features = self._split(split)
        facts = (images or {}).get(IMAGE, ())
        self.add_images(features[IMAGE], facts, len(rows) - len(facts))
        for column, kind in _ARROW_TYPES.items():
            self._add_column(features[column], self.schema[column], column,
                             pa.array([row.get(column) or [] for row in rows], type=kind))
        self.boxes[split] = self.boxes.get(split, 0) + sum(len(row.get(LABEL) or ()) for row in rows)

    def merge(self, other: DatasetStatistics) -> "DetectionStatistics":
        super().merge(other)
        for split, count in getattr(other, "boxes", {}).items():
            self.boxes[split] = self.boxes.get(split, 0) + count
        return self

    def to_json(self, vocabularies: Optional[Mapping[str, Sequence[str]]] = None) -> dict[str, Any]:
        """statistics.json of a detection job: the table document, `task` "object_detection", and per
        split `images` (= `rows`) and `boxes`."""
        document = super().to_json(vocabularies)
        for split, info in document["splits"].items():
            info["images"] = info["rows"]
            info["boxes"] = self.boxes.get(split, 0)
        return {**document, "task": "object_detection"}
