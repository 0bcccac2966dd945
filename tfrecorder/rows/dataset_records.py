"""The records a detection dataset (COCO, Pascal VOC, YOLO) reads into, and how one image's records join.

Every dataset source yields plain dicts of three kinds (`record`):
  category  {category_id, label}: the dataset's own id and name (COCO's categories, YOLO's names)
  image     {image_key, image_uri, split, width, height, segmentation_uri, objects_uri, ref}
  object    {image_key, annotation_id, category_id or label, box, box_units, segmentation, is_crowd,
             area, difficult, truncated, view, instance_index, ref}
`image_key` joins objects to their image inside the pipeline (COCO's image id; a VOC or YOLO file's
stem): the pipeline groups every image and object record by it, and `join_image` decides what one
image's group becomes — an image to encode with its objects, and discards (an object whose image id is
unknown, every record of a duplicated image id, an object whose category is unknown). Categories are
gathered in the pipeline too (`label_map`): the driver never reads the whole dataset.

Rows, as metadata.json counts them: every image record and every object record. Each is either inside
a written Example or a line of discarded.csv.
"""
from __future__ import annotations

import dataclasses
import pickle
from typing import Any, Iterable, Mapping, Optional, Sequence

from tfrecorder.core import splits, types
from tfrecorder.core.schema import Schema
from tfrecorder.errors import RowError

RECORD, CATEGORY, IMAGE, OBJECT = "record", "category", "image", "object"
DATASET_COLUMNS = (RECORD, "ref", "image_key", "image_uri", "split", "annotation_id", "category_id", "label")
PIXELS, RELATIVE = "pixels", "relative"
# Pascal VOC's 20 classes: their ids in the OD API's pascal_label_map.pbtxt and the values of
# SegmentationClass masks (alphabetical, from 1; 0 is background, 255 the "void" border)
VOC_CLASSES = ("aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow",
               "diningtable", "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa", "train",
               "tvmonitor")

Row = dict[str, Any]


# Every field a record may hold, in the order `pack` lays them out
FIELDS = (RECORD, "ref", "image_key", "image_uri", "split", "source_id", "width", "height", "segmentation_uri",
          "objects_uri", "annotation_id", "category_id", "label", "box", "box_units", "segmentation", "is_crowd",
          "area", "difficult", "truncated", "view", "instance_index")


def pack(row: Row) -> bytes:
    """A record as one bytes value: the pickled tuple of its FIELDS' values (fields outside FIELDS are
    dropped). What the pipeline groups by image is held as one small object per record, without key
    names: a runner that keeps a GroupByKey's input in memory (Beam's in-process runner keeps it
    decoded) holds ≈300 bytes per COCO annotation instead of ≈800 of dicts, lists and floats."""
    return pickle.dumps(tuple(row.get(field) for field in FIELDS), protocol=pickle.HIGHEST_PROTOCOL)


def unpack(packed: bytes) -> Row:
    """The record `pack` made (fields that were None are left out). Only ever given `pack`'s own bytes."""
    return {field: value for field, value in zip(FIELDS, pickle.loads(packed)) if value is not None}


def is_dataset_table(columns: Sequence[str]) -> bool:
    """A table whose rows are dataset records (a COCO, VOC or YOLO source)."""
    return tuple(columns) == DATASET_COLUMNS


def dataset_schema() -> Schema:
    """The roles of a dataset's records, as metadata.json's input schema records them."""
    return Schema({"image_uri": types.ImageUri, "split": types.SplitKey})


def category(category_id: int, label: str) -> Row:
    return {RECORD: CATEGORY, "category_id": int(category_id), "label": str(label)}


def for_discard(row: Row) -> Row:
    """A record as discarded.csv keeps it: without its (possibly large) segmentation, with a `ref` naming
    it (COCO's records carry none until discarded: "annotation id 905")."""
    kept = {k: v for k, v in row.items() if k != "segmentation"}
    if kept.get("ref") is None and kept.get(RECORD) == OBJECT:
        kept["ref"] = f"annotation id {kept.get('annotation_id')}"
    return kept


class LabelMapAccumulator:
    """Category ids and names seen in the records, merged into the job's label map (`result`): declared
    categories (COCO's, data.yaml's) win; else the ids objects carry with their names (a YOLO folder
    without data.yaml); else the names of objects that have no id (VOC)."""

    def __init__(self) -> None:
        self.ids: dict[int, str] = {}
        self.seen: dict[int, str] = {}
        self.names: set[str] = set()

    def add(self, row: Row) -> None:
        if row.get(RECORD) == CATEGORY:
            self.ids.setdefault(int(row["category_id"]), str(row["label"]))
        elif row.get(RECORD) == OBJECT and row.get("label") is not None:
            if row.get("category_id") is None:
                self.names.add(str(row["label"]))
            elif isinstance(row.get("category_id"), int):
                self.seen.setdefault(row["category_id"], str(row["label"]))

    def merge(self, other: "LabelMapAccumulator") -> None:
        for key, name in other.ids.items():
            self.ids.setdefault(key, name)
        for key, name in other.seen.items():
            self.seen.setdefault(key, name)
        self.names |= other.names

    def result(self) -> dict[int, str]:
        return label_map(self.ids or self.seen, self.names)


def label_map(ids: Mapping[int, str], names: Iterable[str]) -> dict[int, str]:
    """The job's label map: the dataset's own ids when it has them (COCO, YOLO); else, for named objects
    (VOC), the OD API's Pascal ids when every name is a VOC class, or the sorted names from 1."""
    if ids:
        return dict(sorted(ids.items()))
    names = sorted(set(names))
    if names and all(name in VOC_CLASSES for name in names):
        return {VOC_CLASSES.index(name) + 1: name for name in VOC_CLASSES}
    return {index: name for index, name in enumerate(names, start=1)}


@dataclasses.dataclass
class JoinedImage:
    """One image and the objects that joined it (each object row with its category id and name)."""

    key: str
    split: str
    image: Row
    objects: list[tuple[Row, int, str]]

    @property
    def uri(self) -> str:
        return str(self.image["image_uri"])


def join_image(key: str, records: Iterable[Row], labels: Mapping[int, str], split_ratios: Sequence[float],
               by_content: bool = False) -> tuple[Optional[JoinedImage], list[tuple[Row, str]]]:
    """The image of one key with its objects, and the (row, reason) discards of its group. An UNASSIGNED
    image's split is chosen from its URI; with `by_content` (issue 29) it stays UNASSIGNED, for the
    encode step to choose from its image bytes."""
    records = list(records)
    images = [r for r in records if r.get(RECORD) == IMAGE]
    objects = [r for r in records if r.get(RECORD) == OBJECT]
    if not images:
        return None, [(for_discard(r), f"unknown image id: no image has id {key!r}") for r in objects]
    if len(images) > 1:
        reason = f"duplicate image id: {len(images)} images have id {key!r}"
        return None, [(for_discard(r), reason) for r in images + objects]
    image = images[0]
    try:
        split = _split_of(image, split_ratios, by_content)
    except RowError as exc:
        return None, [(for_discard(r), str(exc)) for r in images + objects]
    ids_by_name = {name: i for i, name in labels.items()}
    joined, discards = [], []
    for row in sorted(objects, key=_object_order):
        category_id = row.get("category_id")
        if category_id is None:
            category_id = ids_by_name.get(str(row.get("label")))
            if category_id is None:
                discards.append((for_discard(row), f"unknown category: {row.get('label')!r}"))
                continue
        elif category_id not in labels:
            discards.append((for_discard(row), f"unknown category id: {category_id!r}"))
            continue
        joined.append((row, int(category_id), labels[category_id]))
    return JoinedImage(key, split, image, joined), discards


def _object_order(row: Row) -> tuple:
    """Objects in a stable order whatever order the group arrives in (annotation id, else source order)."""
    key = row.get("annotation_id")
    return (0, key, "") if isinstance(key, int) else (1, 0, str(key))


def _split_of(image: Row, split_ratios: Sequence[float], by_content: bool = False) -> str:
    raw = image.get("split")
    name = splits.normalize_split(raw)
    if name is None:
        raise RowError(f"unknown split: {raw!r} (expected TRAIN, VALIDATION, TEST or UNASSIGNED)")
    if name == splits.UNASSIGNED and not by_content:
        return splits.assign_split(str(image["image_uri"]), split_ratios)
    return name
