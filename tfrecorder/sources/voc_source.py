"""Pascal VOC folders as a conversion source: Annotations/*.xml, JPEGImages/, ImageSets/Main, masks.

Recognised from its layout: a folder holding `Annotations/` and `JPEGImages/` (VOC2007, VOC2012 and
folders written like them). Splits come from `ImageSets/Main/{train,val,test}.txt` (`trainval.txt`
when train and val are absent; without ImageSets every annotation file, split by hash). Each split
list is one part: a worker reads its ids, and per id the XML (boxes with `difficult`, `truncated`,
`pose`), plus `SegmentationClass/<id>.png` (the semantic mask: VOC class indices) and
`SegmentationObject/<id>.png` (instance k is the k-th object of the XML) when they exist. The driver
reads the first ids of one list only. Boxes are taken as the OD API's create_pascal_tf_record.py
takes them: pixel coordinates divided by the image's size.
"""
from __future__ import annotations

import dataclasses
import itertools
import os
import xml.etree.ElementTree as ElementTree
from typing import Any, Iterator, Optional, Sequence

import pandas as pd

from tfrecorder.core.schema import Schema
from tfrecorder.io import storage
from tfrecorder.rows.dataset_records import DATASET_COLUMNS, IMAGE, OBJECT, PIXELS, RECORD, Row
from tfrecorder.sources.source_protocol import REASONED, SAMPLE_ROWS, Table, top_names

SPLIT_FILES = (("TRAIN", "train"), ("VALIDATION", "val"), ("TEST", "test"))
MAX_XML_BYTES = 16 << 20  # an annotation file larger than this is discarded unread
ALL = ""  # the part of a folder without ImageSets: every Annotations/*.xml


def _join(*names: str) -> str:
    return storage.join(*names) if storage.is_remote(names[0]) else os.path.join(*names)


def looks_like_voc(path: str, listed: Optional[Sequence[str]] = None) -> bool:
    """A folder holding Annotations/ and JPEGImages/ (from its listing when given)."""
    if listed is not None:
        return {"Annotations", "JPEGImages"} <= top_names(path, listed)
    return storage.is_dir(_join(path, "Annotations")) and storage.is_dir(_join(path, "JPEGImages"))


def _text(element: Optional[ElementTree.Element], tag: str, default: Any = None) -> Any:
    found = element.find(tag) if element is not None else None
    return found.text.strip() if found is not None and found.text is not None else default


def _flag(value: Any) -> int:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return 0


def parse_annotation(root: str, image_id: str, xml: bytes, split: Optional[str]) -> list[Any]:
    """The image record and object records of one VOC annotation file; a (row, reason) discard of the
    image when the XML is malformed."""
    image: Row = {RECORD: IMAGE, "ref": f"Annotations/{image_id}.xml", "image_key": image_id, "split": split}
    try:
        document = ElementTree.fromstring(xml)
    except ElementTree.ParseError as exc:
        return [(image, f"invalid XML: {exc}")]
    image["image_uri"] = f"JPEGImages/{_text(document, 'filename') or image_id + '.jpg'}"
    size = document.find("size")
    image.update(width=_text(size, "width"), height=_text(size, "height"))
    for folder, key in (("SegmentationClass", "segmentation_uri"), ("SegmentationObject", "objects_uri")):
        mask = f"{folder}/{image_id}.png"
        image[key] = mask if storage.exists(_join(root, mask)) else None
    records: list[Any] = [image]
    for index, element in enumerate(document.findall("object"), start=1):
        box = element.find("bndbox")
        try:
            corners = [float(_text(box, tag)) for tag in ("xmin", "ymin", "xmax", "ymax")]
        except (TypeError, ValueError):
            corners = None
        records.append({RECORD: OBJECT, "ref": f"Annotations/{image_id}.xml object {index}", "image_key": image_id,
                        "annotation_id": index, "label": _text(element, "name"), "category_id": None,
                        "box": corners, "box_units": PIXELS, "difficult": _flag(_text(element, "difficult")),
                        "truncated": _flag(_text(element, "truncated")), "view": _text(element, "pose", ""),
                        "instance_index": index if image.get("objects_uri") else None})
    return records


def _ids(root: str, part: tuple[str, str]) -> Iterator[str]:
    _split, list_file = part
    if list_file == ALL:
        for path in sorted(storage.list_files(_join(root, "Annotations"))):
            name = path.replace("\\", "/").rsplit("/", 1)[-1]
            if name.lower().endswith(".xml"):
                yield name[:-4]
        return
    for line in storage.read_bytes(_join(root, list_file)).decode("utf-8", "replace").splitlines():
        fields = line.split()
        if fields:
            yield fields[0]


@dataclasses.dataclass(frozen=True)
class VocRows:
    """A VOC folder as workers read it: one part per ImageSets/Main split list."""

    root: str
    parts: tuple[tuple[str, str], ...]  # (split or "", list file relative to root, or ALL)
    kind: str = "voc"

    def known_parts(self) -> list[tuple[str, str]]:
        return list(self.parts)

    def scan_units(self) -> list:
        return []

    def scan(self, unit: Any) -> Any:
        raise NotImplementedError("a VOC folder's parts are its split lists: nothing to scan")

    def plan_parts(self, scans: Sequence[Any]) -> list[tuple[str, str]]:
        return list(self.parts)

    def read_part(self, part: tuple[str, str], columns: Sequence[str], schema: Schema) -> Iterator[Any]:
        for image_id in _ids(self.root, part):
            yield from self.read_image(part[0] or None, image_id)

    def read_image(self, split: Optional[str], image_id: str) -> Iterator[Any]:
        path = _join(self.root, "Annotations", f"{image_id}.xml")
        ref = {RECORD: IMAGE, "ref": f"Annotations/{image_id}.xml", "image_key": image_id, "split": split}
        try:
            xml = storage.read_bytes(path, MAX_XML_BYTES)
        except FileNotFoundError:
            yield REASONED, (ref, f"image missing: Annotations/{image_id}.xml does not exist")
            return
        except (OSError, ValueError) as exc:  # too large, not a regular file
            yield REASONED, (ref, f"annotation file unreadable: {exc}")
            return
        for record in parse_annotation(self.root, image_id, xml, split):
            yield (REASONED, record) if isinstance(record, tuple) else record

    @property
    def reads_batches(self) -> bool:
        return False

    def read_batches(self, part: Any, columns: Sequence[str], schema: Schema, batch_rows: int) -> Iterator[Any]:
        raise NotImplementedError("VOC folders are read record by record")


@dataclasses.dataclass
class VocTable(Table):
    rows: Any = None

    def worker_files(self) -> list[str]:
        return [self.rows.root]

    def row_source(self, schema: Schema, work_dir: str) -> VocRows:
        return self.rows


def _parts(root: str) -> tuple[tuple[str, str], ...]:
    main = ("ImageSets", "Main")
    present = {name: storage.exists(_join(root, *main, f"{name}.txt")) for name in ("train", "val", "test", "trainval")}
    parts = [(split, "/".join([*main, f"{name}.txt"])) for split, name in SPLIT_FILES if present[name]]
    if present["trainval"] and not (present["train"] or present["val"]):
        parts.insert(0, ("", "/".join([*main, "trainval.txt"])))
    return tuple(parts) or (("", ALL),)


def open_voc(path: str, listed: Optional[Sequence[str]] = None) -> Optional[VocTable]:
    """A VocTable if `path` is a Pascal VOC folder (`listed`: every file under it, when the caller listed
    it), else None; ValueError when it lists no image or its first annotation files are malformed XML."""
    if not looks_like_voc(path, listed):
        return None
    root = path if storage.is_remote(path) else os.path.abspath(path)
    rows = VocRows(root, _parts(root))
    sample: list[Row] = []
    for part in rows.parts:
        for image_id in itertools.islice(_ids(root, part), 100):
            for record in rows.read_image(part[0] or None, image_id):
                if isinstance(record, tuple) and str(record[1][1]).startswith("invalid XML"):
                    raise ValueError(f"{path} is not a readable Pascal VOC folder: Annotations/{image_id}.xml: "
                                     f"{record[1][1]}")
                if isinstance(record, dict) and record.get(RECORD) == IMAGE:
                    sample.append(record)
        if sample:
            break
    if not sample:
        raise ValueError(f"{path} is a Pascal VOC folder without images: no annotation file is listed")
    frame = pd.DataFrame(sample[:SAMPLE_ROWS], columns=list(DATASET_COLUMNS))
    return VocTable(list(DATASET_COLUMNS), frame, root, len(sample), True, rows=rows)
