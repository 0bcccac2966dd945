"""YOLO datasets as a conversion source: a data.yaml (names, train/val/test) or images/ + labels/ folders.

Recognised from content: a YAML file (or a folder holding `data.yaml`) with `names` and at least one of
`train`, `val`, `test`; or a folder holding `images/` and `labels/`. A split's images are a folder (or a
list of folders, or a .txt list of image paths); each image's labels are the file of the same stem under
the matching `labels/` folder (Ultralytics' rule: the last `images` path component becomes `labels`).
A label line is `class cx cy w h` (normalised to the image), or `class x1 y1 x2 y2 ...` (YOLO-seg: a
normalised polygon of at least 3 points, its box the polygon's bounds). Class k has id k + 1 in the
records and label_map.pbtxt (0 is the OD API's background); its name is `names[k]`, or "k" without a
data.yaml. Each split entry is one part; the driver reads data.yaml and a sample of the first images.
A line that cannot be read is the discard of that object; a missing label file means no objects.
"""
from __future__ import annotations

import dataclasses
import os
import posixpath
from typing import Any, Iterator, Optional, Sequence

import pandas as pd

from tfrecorder.core.schema import IMAGE_SUFFIXES, Schema
from tfrecorder.io import storage
from tfrecorder.rows.dataset_records import DATASET_COLUMNS, IMAGE, OBJECT, RECORD, RELATIVE, Row, category
from tfrecorder.sources.source_protocol import REASONED, SAMPLE_ROWS, Table, top_names

SPLIT_KEYS = (("train", "TRAIN"), ("val", "VALIDATION"), ("test", "TEST"))
MAX_LABEL_BYTES = 16 << 20
MAX_YAML_BYTES = 1 << 20


def _join(base: str, name: str) -> str:
    if "://" in name or os.path.isabs(name):
        return name
    return storage.join(base, name) if storage.is_remote(base) else os.path.normpath(os.path.join(base, name))


def _load_yaml(path: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(storage.read_bytes(path, MAX_YAML_BYTES).decode("utf-8", "replace"))
    except yaml.YAMLError as exc:
        raise ValueError(f"{path} is not valid YAML: {str(exc).splitlines()[0]}") from None


def _names(document: Any) -> dict[int, str]:
    names = document.get("names") if isinstance(document, dict) else None
    if isinstance(names, list):
        return {index: str(name) for index, name in enumerate(names)}
    if isinstance(names, dict):
        try:
            return {int(k): str(v) for k, v in names.items()}
        except (TypeError, ValueError):
            pass
    raise ValueError("a YOLO data.yaml needs `names`: a list of class names or {index: name}")


def labels_path(image: str) -> str:
    """The label file of an image: the last `images` folder of its path becomes `labels`, suffix .txt."""
    text = image.replace("\\", "/")
    head, marker, tail = text.rpartition("/images/")
    stem = posixpath.splitext(tail if marker else text)[0]
    return f"{head}/labels/{stem}.txt" if marker else f"{stem}.txt"


def parse_line(line: str) -> Optional[tuple[int, list[float], Optional[list[float]]]]:
    """(class, [xmin, ymin, xmax, ymax], polygon or None) in relative units; ValueError with the reason."""
    fields = line.split()
    if not fields:
        return None
    try:
        cls = int(fields[0])
        values = [float(v) for v in fields[1:]]
    except ValueError:
        raise ValueError("invalid YOLO line: a field is not a number") from None
    if cls < 0:
        raise ValueError(f"unknown category id: class {cls}")
    if len(values) == 4:
        cx, cy, w, h = values
        return cls, [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], None
    if len(values) % 2:
        raise ValueError(f"invalid YOLO line: {len(values)} coordinates after the class")
    if len(values) < 6:
        raise ValueError(f"invalid polygon: fewer than 3 points ({len(values) // 2})")
    xs, ys = values[0::2], values[1::2]
    return cls, [min(xs), min(ys), max(xs), max(ys)], values


def image_records(image_uri: str, key: str, split: Optional[str], label_text: Optional[str],
                  names: dict[int, str]) -> Iterator[Any]:
    """The image record and its object records (or (row, reason) discards) from one label file's text."""
    yield {RECORD: IMAGE, "ref": image_uri, "image_key": key, "image_uri": image_uri, "split": split}
    for number, line in enumerate((label_text or "").splitlines(), start=1):
        row: Row = {RECORD: OBJECT, "ref": f"{labels_path(image_uri)} line {number}", "image_key": key,
                    "annotation_id": number, "box_units": RELATIVE}
        try:
            parsed = parse_line(line)
        except ValueError as exc:
            yield REASONED, (row, str(exc))
            continue
        if parsed is None:
            continue
        cls, box, polygon = parsed
        row.update(category_id=cls + 1, label=names.get(cls, str(cls)), box=box,
                   segmentation=[polygon] if polygon else None)
        yield row


def _is_image(path: str) -> bool:
    return path.lower().endswith(IMAGE_SUFFIXES)


@dataclasses.dataclass(frozen=True)
class YoloRows:
    """A YOLO dataset as workers read it: one part per (split, images folder or list file)."""

    root: str
    parts: tuple[tuple[str, str], ...]
    names: tuple[tuple[int, str], ...]
    declared: bool  # names come from data.yaml (else "k" per class seen)
    kind: str = "yolo"

    def known_parts(self) -> list[tuple[str, str]]:
        return list(self.parts)

    def scan_units(self) -> list:
        return []

    def scan(self, unit: Any) -> Any:
        raise NotImplementedError("a YOLO dataset's parts are its splits: nothing to scan")

    def plan_parts(self, scans: Sequence[Any]) -> list[tuple[str, str]]:
        return list(self.parts)

    def images(self, part: tuple[str, str]) -> Iterator[str]:
        _split, location = part
        path = _join(self.root, location)
        if path.lower().endswith(".txt") and not storage.is_dir(path):
            base = posixpath.dirname(path) if storage.is_remote(path) else os.path.dirname(path)
            for line in storage.read_bytes(path).decode("utf-8", "replace").splitlines():
                if line.strip():
                    yield _join(base, line.strip())
            return
        yield from sorted(p for p in storage.list_files(path) if _is_image(p))

    def read_part(self, part: tuple[str, str], columns: Sequence[str], schema: Schema) -> Iterator[Any]:
        if part == ("", "") and self.declared:  # the categories part
            for index, name in self.names:
                yield category(index + 1, name)
            return
        names = dict(self.names)
        for image in self.images(part):
            try:
                text = storage.read_bytes(labels_path(image), MAX_LABEL_BYTES).decode("utf-8", "replace")
            except FileNotFoundError:
                text = None  # YOLO's convention: an image without a label file has no objects
            except OSError as exc:
                yield REASONED, ({RECORD: IMAGE, "ref": image, "image_uri": image}, f"label file unreadable: {exc}")
                continue
            key = os.path.relpath(image, self.root).replace(os.sep, "/") if not storage.is_remote(image) else image
            yield from image_records(key, key, part[0] or None, text, names)  # local: relative to the root

    @property
    def reads_batches(self) -> bool:
        return False

    def read_batches(self, part: Any, columns: Sequence[str], schema: Schema, batch_rows: int) -> Iterator[Any]:
        raise NotImplementedError("YOLO datasets are read record by record")


@dataclasses.dataclass
class YoloTable(Table):
    rows: Any = None

    def worker_files(self) -> list[str]:
        return [self.rows.root]

    def row_source(self, schema: Schema, work_dir: str) -> YoloRows:
        return self.rows


def _yaml_parts(root: str, document: dict) -> list[tuple[str, str]]:
    base = _join(root, str(document.get("path") or "."))
    parts = []
    for key, split in SPLIT_KEYS:
        entries = document.get(key)
        for entry in entries if isinstance(entries, list) else [entries] if entries else []:
            parts.append((split, os.path.relpath(_join(base, str(entry)), root)
                          if not storage.is_remote(root) else _join(base, str(entry))))
    return parts


def _folder_parts(root: str) -> list[tuple[str, str]]:
    images = _join(root, "images")
    parts = [(split, f"images/{key}") for key, split in SPLIT_KEYS if storage.is_dir(_join(images, key))]
    return parts or [("", "images")]


def open_yolo(path: str, listed: Optional[Sequence[str]] = None) -> Optional[YoloTable]:
    """A YoloTable if `path` is a YOLO data.yaml or a folder of one (or images/ + labels/), else None.
    `listed`: every file under the folder, when the caller listed it (then it is not listed again)."""
    is_dir = listed is not None or storage.is_dir(path)
    yaml_path = _join(path, "data.yaml") if is_dir else path
    names = top_names(path, listed) if listed is not None else None
    has_yaml = ("data.yaml" in names) if names is not None else is_dir and storage.exists(yaml_path)
    if is_dir and not has_yaml:
        folders = ({"images", "labels"} <= names) if names is not None else (
            storage.is_dir(_join(path, "images")) and storage.is_dir(_join(path, "labels")))
        if not folders:
            return None
        yaml_path = None
    elif not is_dir and not path.lower().endswith((".yaml", ".yml")):
        return None
    root = path if is_dir else (posixpath.dirname(path) if storage.is_remote(path) else os.path.dirname(path))
    root = root if storage.is_remote(root) else os.path.abspath(root)
    if yaml_path is not None:
        document = _load_yaml(yaml_path)
        if not isinstance(document, dict) or not any(document.get(k) for k, _ in SPLIT_KEYS):
            if not is_dir:
                return None  # some other YAML file
            raise ValueError(f"{yaml_path} is not a YOLO data.yaml: it names no train/val/test images")
        names, parts = _names(document), _yaml_parts(root, document)
    else:
        names, parts = {}, _folder_parts(root)
    rows = YoloRows(root, tuple(parts) + ((("", ""),) if yaml_path is not None else ()),
                    tuple(sorted(names.items())), yaml_path is not None)
    sample = []
    for part in rows.parts:
        if part == ("", ""):
            continue
        for image in rows.images(part):
            sample.append({RECORD: IMAGE, "image_uri": image, "split": part[0] or None})
            if len(sample) >= 100:
                break
        if sample:
            break
    if not sample:
        raise ValueError(f"{path} is a YOLO dataset without images")
    frame = pd.DataFrame(sample[:SAMPLE_ROWS], columns=list(DATASET_COLUMNS))
    return YoloTable(list(DATASET_COLUMNS), frame, root, len(sample), True, rows=rows)
