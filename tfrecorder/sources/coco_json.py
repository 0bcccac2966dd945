"""COCO instance files (`instances_*.json`) read as a stream: never the whole file in memory.

A COCO file is one JSON object holding `images`, `annotations` and `categories` arrays (plus `info`,
`licenses`). COCO 2017 train is ≈450 MB in one line; `json.load` would hold several GB of Python
objects. Here each array is streamed item by item with ijson (its C backend where installed), so
reading one section costs one pass over the file and memory for one item at a time. The driver reads
only the first bytes (to recognise the format) and a sample of `images`; the pipeline streams each
section as one part (coco_source), and annotations meet their images in the pipeline, keyed by image id.

Items become dataset records (tfrecorder.rows.dataset_records); an item that cannot be one (no id, no
file name, a bbox that is not four numbers) becomes a (row, reason) discard.
"""
from __future__ import annotations

import itertools
import json
import math
import re
import posixpath
from typing import Any, Iterator, Optional, Union

from tfrecorder.io import storage
from tfrecorder.rows.dataset_records import IMAGE, OBJECT, RECORD, category, for_discard
from tfrecorder.rows.instance_masks import compact_polygons

SECTIONS = ("categories", "images", "annotations")
SNIFF_BYTES = 1 << 20  # the head read to recognise a COCO file
TAIL_BYTES = 4 << 20  # the tail read for a file's categories (COCO's 80 take ≈6 KB, LVIS's 1,203 ≈1 MB)
_CATEGORIES_KEY = re.compile(rb'(\\*)"categories"\s*:\s*\[')
_TOP_KEYS = {"info", "licenses", "images", "annotations", "categories", "type"}

Parsed = Union[dict, tuple[dict, str]]


def _ijson():
    import ijson

    return ijson


def looks_like_coco(path: str) -> bool:
    """Whether a file's head is a JSON object whose top-level keys are COCO's (images/annotations first
    among info, licenses): read at most SNIFF_BYTES."""
    with storage.open_read(path) as stream:
        head = stream.read(SNIFF_BYTES)
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text.startswith(b"{"):
        return False
    ijson = _ijson()
    keys: set[str] = set()
    try:
        for prefix, event, value in ijson.parse(text):
            if prefix == "" and event == "map_key":
                if value not in _TOP_KEYS:
                    return False
                keys.add(value)
                if value in ("images", "annotations"):
                    return True
    except ijson.JSONError:
        pass  # the head ends mid-document
    return bool(keys & {"images", "annotations"})


def split_of_file(path: str) -> Optional[str]:
    """The split a COCO file's name says (instances_train2017.json → TRAIN), else None (assigned by hash)."""
    name = posixpath.basename(path.replace("\\", "/")).lower()
    for word, split in (("train", "TRAIN"), ("val", "VALIDATION"), ("test", "TEST")):
        if word in name:
            return split
    return None


def _items(path: str, section: str) -> Iterator[Any]:
    """The items of one top-level array, streamed; ValueError naming the file if it is not valid JSON."""
    ijson = _ijson()
    with storage.open_read(path) as stream:
        try:
            yield from ijson.items(stream, f"{section}.item", use_float=True)
        except ijson.JSONError as exc:
            raise ValueError(f"{path} is not valid COCO JSON: {exc}") from None


def image_record(item: Any, split: Optional[str]) -> Parsed:
    """A COCO `images` item as an image record (or a discard)."""
    if not isinstance(item, dict):
        return {RECORD: IMAGE, "ref": "image"}, f"invalid image: not an object ({type(item).__name__})"
    image_id = item.get("id")
    ref = f"image id {image_id}"
    row = {RECORD: IMAGE, "ref": ref, "image_key": None if image_id is None else str(image_id),
           "source_id": None if image_id is None else str(image_id),
           "image_uri": item.get("file_name") or item.get("coco_url"), "split": split,
           "width": item.get("width"), "height": item.get("height")}
    if image_id is None or isinstance(image_id, (dict, list)):
        return row, "invalid image: no id"
    if not isinstance(row["image_uri"], str) or not row["image_uri"].strip():
        return row, f"invalid image: image id {image_id} has no file_name"
    return row


def _box(bbox: Any) -> Optional[list[float]]:
    if not isinstance(bbox, (list, tuple)) or len(bbox) != 4:
        return None
    try:
        x, y, w, h = (float(v) for v in bbox)
    except (TypeError, ValueError):
        return None
    return [x, y, x + w, y + h] if all(math.isfinite(v) for v in (x, y, w, h)) else None


def object_record(item: Any) -> Parsed:
    """A COCO `annotations` item as an object record (or a discard)."""
    if not isinstance(item, dict):
        return {RECORD: OBJECT, "ref": "annotation"}, f"invalid annotation: not an object ({type(item).__name__})"
    annotation_id = item.get("id")
    image_id = item.get("image_id")
    row = {RECORD: OBJECT, "annotation_id": annotation_id,  # no "ref": for_discard names the annotation id
           "image_key": None if image_id is None else str(image_id), "category_id": item.get("category_id"),
           "box": _box(item.get("bbox")), "segmentation": compact_polygons(item.get("segmentation") or None),
           "is_crowd": item.get("iscrowd", 0), "area": item.get("area")}  # box_units: PIXELS, the default
    if image_id is None or isinstance(image_id, (dict, list)):
        return for_discard(row), "invalid annotation: no image_id"
    if not isinstance(row["category_id"], int) or isinstance(row["category_id"], bool):
        return for_discard(row), f"unknown category id: {row['category_id']!r}"
    if row["box"] is None:
        return for_discard(row), f"invalid box: bbox {item.get('bbox')!r} is not [x, y, width, height]"
    return row


def category_record(item: Any) -> Optional[dict]:
    if isinstance(item, dict) and isinstance(item.get("id"), int) and isinstance(item.get("name"), str):
        return category(item["id"], item["name"])
    return None  # an unusable category: its annotations are discarded as of an unknown category id


def iter_section(path: str, section: str, split: Optional[str] = None) -> Iterator[Parsed]:
    """The records of one section of a COCO file (category records, image records or object records);
    images take `split` when given, else the split the file's name says (`split_of_file`)."""
    split = split if split is not None else split_of_file(path)
    for item in _items(path, section):
        if section == "categories":
            record = category_record(item)
            if record is not None:
                yield record
        elif section == "images":
            yield image_record(item, split)
        else:
            yield object_record(item)


def _categories_at_end(path: str) -> Optional[list]:
    """The `categories` array when it is the document's last member and lies in its last TAIL_BYTES (as
    in COCO's own files), read from that range alone; else None."""
    size = storage.size(path)
    start = max(0, size - TAIL_BYTES)
    tail = storage.read_range(path, start, size - start)
    decoder = json.JSONDecoder()
    for match in reversed(list(_CATEGORIES_KEY.finditer(tail))):
        backslashes = len(match.group(1))
        if backslashes % 2:  # an escaped quote: inside some string
            continue
        try:
            text = tail[match.end() - 1:].decode("utf-8")
            value, end = decoder.raw_decode(text)
        except ValueError:
            continue
        if text[end:].strip() == "}":  # the array closes the top-level object: the document's own key
            return value if isinstance(value, list) else None
    return None


def read_categories(path: str) -> dict[int, str]:
    """A COCO file's categories as {id: name} (unusable items left out), for the driver's check that the
    files of one dataset agree. Read from the file's tail when they are its last member (COCO's own
    files: one range read), else streamed up to the end of the `categories` array (memory for the
    categories; a pass over the file when they come late)."""
    items = _categories_at_end(path)
    if items is None:
        ijson = _ijson()
        with storage.open_read(path) as stream:
            try:
                items = next(ijson.items(stream, "categories", use_float=True), None)
            except ijson.JSONError as exc:
                raise ValueError(f"{path} is not valid COCO JSON: {exc}") from None
    records = (category_record(item) for item in (items if isinstance(items, list) else []))
    return {r["category_id"]: r["label"] for r in records if r is not None}


def sample_images(path: str, count: int, split: Optional[str] = None) -> list[dict]:
    """The first `count` image records (the driver's sample); ValueError if the file has none or its
    JSON is broken before then."""
    images = [r for r in itertools.islice(iter_section(path, "images", split), count) if isinstance(r, dict)]
    if not images:
        raise ValueError(f"{path} is a COCO file without images: there is nothing to convert")
    return images

