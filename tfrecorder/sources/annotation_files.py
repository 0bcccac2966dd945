"""AutoML Vision CSVs and Vertex AI JSONL import files, read as rows of a table.

Headerless AutoML CSVs are recognised from their content: the first field is an ML_USE value
(TRAIN/VALIDATION/TEST/UNASSIGNED, any case) or, when that column is omitted, an image path or URL.
The rest of a line says what the file is:
  classification  ML_USE,PATH,LABEL
  multi-label     ML_USE,PATH,LABEL,LABEL,...
  detection       ML_USE,PATH,LABEL,X_MIN,Y_MIN,,,X_MAX,Y_MAX,,  (2 vertices)
                  ML_USE,PATH,LABEL,X1,Y1,X2,Y2,X3,Y3,X4,Y4    (4 vertices: min/max taken)
                  ML_USE,PATH,,,,,,,,,                          (an image without boxes)
Vertex AI JSONL (`.jsonl`): one JSON object per line with imageGcsUri, classificationAnnotation,
classificationAnnotations or boundingBoxAnnotations, and the split in
dataItemResourceLabels["aiplatform.googleapis.com/ml_use"].

Rows come out in the shape the rest of tfrecorder reads: {line, split, image_uri, label[, xmin, ymin,
xmax, ymax]} (detection: one row per box; multi-label: `label` is a list). The driver reads only a
sample to recognise the format; the pipeline streams the whole file through `iter_rows`, and a line
that cannot be read becomes a (row, reason) discard naming its line number.
"""
from __future__ import annotations

import csv
import io
import itertools
import json
from typing import Any, Iterator, Optional, Union


from tfrecorder.core import types
from tfrecorder.io import storage
from tfrecorder.rows.detection_encoder import BOX_COLUMNS
from tfrecorder.sources import csv_text
from tfrecorder.core.schema import IMAGE_SUFFIXES, Schema
from tfrecorder.core.splits import SPLITS, UNASSIGNED

AUTOML_CLASSIFICATION, AUTOML_MULTILABEL, AUTOML_DETECTION = "automl_classification", "automl_multilabel", "automl_detection"
VERTEX_JSONL = "vertex_jsonl"
FORMATS = (AUTOML_CLASSIFICATION, AUTOML_MULTILABEL, AUTOML_DETECTION, VERTEX_JSONL)
SNIFF_LINES = 1000
LINE = "line"
ML_USE_KEY = "aiplatform.googleapis.com/ml_use"
_VERTEX_SPLITS = {"training": "TRAIN", "validation": "VALIDATION", "test": "TEST"}
_ML_USE = set(SPLITS) | {UNASSIGNED}

Row = dict[str, Any]
Parsed = Union[Row, tuple[Row, str]]


def _is_path(text: str) -> bool:
    text = text.strip()
    return "://" in text or text.startswith("/") or text.lower().endswith(IMAGE_SUFFIXES)


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _has_ml_use(fields: list[str]) -> bool:
    return bool(fields) and fields[0].strip().upper() in _ML_USE


def _looks_automl(fields: list[str]) -> bool:
    return bool(fields) and (_has_ml_use(fields) and len(fields) >= 2 or _is_path(fields[0]))


def _automl_kind(lines: list[list[str]]) -> str:
    """Detection if most lines have a label plus 8 numeric-or-empty coordinates; multi-label if a line has
    more than one label; else single-label classification."""
    rests = [fields[2:] if _has_ml_use(fields) else fields[1:] for fields in lines]
    boxy = sum(len(rest) == 9 and all(not f.strip() or _is_number(f) for f in rest[1:]) for rest in rests)
    if rests and boxy * 2 >= len(rests):
        return AUTOML_DETECTION
    if any(len([f for f in rest if f.strip()]) > 1 for rest in rests):
        return AUTOML_MULTILABEL
    return AUTOML_CLASSIFICATION


def _sample_lines(path: str) -> list[str]:
    """The first non-blank lines, for sniffing only: bytes that are not UTF-8 (a table in another encoding,
    a gzip file) become U+FFFD here, so any file can be sniffed."""
    with storage.open_read(path) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace", newline="")
        return [line for line in itertools.islice(text, SNIFF_LINES) if line.strip()]


def _jsonl_kind(lines: list[str]) -> Optional[str]:
    """A Vertex AI JSONL file if its first line is a JSON object naming imageGcsUri."""
    try:
        first = json.loads(lines[0])
    except ValueError:
        return None
    return VERTEX_JSONL if isinstance(first, dict) and "imageGcsUri" in first else None


def detect_format(path: str) -> Optional[str]:
    """The annotation format of a file from its name and first lines, or None (an ordinary table)."""
    lines = _sample_lines(path)
    if not lines:
        return None
    if path.lower().endswith(".jsonl") or lines[0].lstrip().startswith("{"):
        return _jsonl_kind(lines) or (VERTEX_JSONL if path.lower().endswith(".jsonl") else None)
    first = next(csv.reader([lines[0]]))
    if not _looks_automl(first):
        return None
    return _automl_kind(list(csv.reader(lines)))


def _jsonl_task(path: str) -> str:
    """What a JSONL file holds (from its first lines): detection, multi-label or classification."""
    found = set()
    for line in _sample_lines(path):
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            found.update(k for k in ("boundingBoxAnnotations", "classificationAnnotations") if k in item)
    if "boundingBoxAnnotations" in found:
        return AUTOML_DETECTION
    return AUTOML_MULTILABEL if "classificationAnnotations" in found else AUTOML_CLASSIFICATION


def columns_for(task: str) -> list[str]:
    base = [LINE, "split", "image_uri", "label"]
    return base + list(BOX_COLUMNS) if task == AUTOML_DETECTION else base


def schema_for(task: str) -> Optional[Schema]:
    """Roles of a classification/multi-label annotation table (detection tables have their own)."""
    if task == AUTOML_DETECTION:
        return None
    label = types.MultiLabel if task == AUTOML_MULTILABEL else types.StringLabel
    return Schema({"split": types.SplitKey, "image_uri": types.ImageUri, "label": label})


def task_of(fmt: str, path: str) -> str:
    return _jsonl_task(path) if fmt == VERTEX_JSONL else fmt


def iter_rows(path: str, fmt: str) -> Iterator[Parsed]:
    """Every row of an annotation file; unreadable lines as (row, reason) naming the line number."""
    if fmt == VERTEX_JSONL:
        yield from _iter_jsonl(path, _jsonl_task(path))
    else:
        yield from _iter_automl(path, fmt)


def _text(value: str) -> Optional[str]:
    value = value.strip()
    return value or None


def _automl_row(number: int, fields: list[str], fmt: str) -> Parsed:
    split = _text(fields[0]) if _has_ml_use(fields) else None
    rest = fields[2:] if _has_ml_use(fields) else fields[1:]
    path = fields[1] if _has_ml_use(fields) else fields[0]
    row: Row = {LINE: number, "split": split, "image_uri": _text(path)}
    labels = [label.strip() for label in rest if label.strip()]
    if fmt == AUTOML_MULTILABEL:
        return {**row, "label": labels}
    if fmt == AUTOML_CLASSIFICATION:
        row["label"] = labels[0] if labels else None
        if len(labels) > 1:
            return row, f"malformed AutoML row: line {number} has {len(labels)} labels, single-label expects one"
        return row
    row.update({"label": _text(rest[0]) if rest else None, **{c: None for c in BOX_COLUMNS}})
    if len(rest) != 9:
        return row, f"malformed AutoML row: line {number} has {len(fields)} fields, a detection row has " \
                    f"{11 if split is not None else 10}"
    coordinates = [c.strip() for c in rest[1:]]
    if not any(coordinates):
        return row
    vertices = [coordinates[i:i + 2] for i in range(0, 8, 2)]
    present = [all(v) for v in vertices]
    if present == [True, False, True, False] and not any(vertices[1] + vertices[3]):
        xs, ys = [vertices[0][0], vertices[2][0]], [vertices[0][1], vertices[2][1]]
        row.update(xmin=xs[0], ymin=ys[0], xmax=xs[1], ymax=ys[1])  # checked (numbers, order) downstream
        return row
    if all(present):
        try:
            xs, ys = [float(v[0]) for v in vertices], [float(v[1]) for v in vertices]
        except ValueError:
            return row, f"invalid box: line {number} has a coordinate that is not a number"
        row.update(xmin=min(xs), ymin=min(ys), xmax=max(xs), ymax=max(ys))
        return row
    return row, f"invalid box: line {number} needs 2 vertices (X_MIN,Y_MIN,,,X_MAX,Y_MAX,,) or 4"


def _invalid_text(number: int, text: str) -> Optional[tuple[Row, str]]:
    """The discard of a line holding bytes that are not UTF-8 (import files are UTF-8 by their spec), else None."""
    if not csv_text.has_invalid(text):
        return None
    return {LINE: number}, f"invalid text: line {number}: byte(s) {csv_text.invalid_bytes(text)} are not valid utf-8"


def _iter_automl(path: str, fmt: str) -> Iterator[Parsed]:
    with storage.open_read(path) as raw:
        reader = csv.reader(io.TextIOWrapper(raw, encoding="utf-8-sig", errors=csv_text.INVALID, newline=""))
        for number, fields in enumerate(reader, start=1):
            if not fields or not any(f.strip() for f in fields):
                continue
            invalid = _invalid_text(number, ",".join(fields))
            if invalid is not None:
                yield invalid
                continue
            if len(fields) < 2 and not _is_path(fields[0]):
                yield {LINE: number}, f"malformed AutoML row: line {number} has no image path"
                continue
            yield _automl_row(number, fields, fmt)


def _display_name(annotation: Any) -> Optional[str]:
    return _text(str(annotation.get("displayName", ""))) if isinstance(annotation, dict) else None


def _jsonl_rows(number: int, item: dict, task: str) -> list[Parsed]:
    labels = item.get("dataItemResourceLabels") or {}
    ml_use = labels.get(ML_USE_KEY) if isinstance(labels, dict) else None
    split = _VERTEX_SPLITS.get(str(ml_use).strip().lower(), ml_use) if ml_use is not None else None
    row: Row = {LINE: number, "split": split, "image_uri": _text(str(item["imageGcsUri"]))}
    if task == AUTOML_DETECTION:
        boxes = item.get("boundingBoxAnnotations") or []
        if not isinstance(boxes, list):
            return [({**row, "label": None}, f"invalid JSONL: line {number}: boundingBoxAnnotations is not a list")]
        if not boxes:
            return [{**row, "label": None, **{c: None for c in BOX_COLUMNS}}]
        keys = {"xmin": "xMin", "ymin": "yMin", "xmax": "xMax", "ymax": "yMax"}
        return [{**row, "label": _display_name(box),
                 **{c: box.get(k) if isinstance(box, dict) else None for c, k in keys.items()}} for box in boxes]
    if task == AUTOML_MULTILABEL:
        annotations = item.get("classificationAnnotations")
        if annotations is None and "classificationAnnotation" in item:
            annotations = [item["classificationAnnotation"]]
        names = [_display_name(a) for a in annotations or []]
        return [{**row, "label": [n for n in names if n]}]
    return [{**row, "label": _display_name(item.get("classificationAnnotation"))}]


def _iter_jsonl(path: str, task: str) -> Iterator[Parsed]:
    with storage.open_read(path) as raw:
        for number, line in enumerate(io.TextIOWrapper(raw, encoding="utf-8-sig", errors=csv_text.INVALID), start=1):
            if not line.strip():
                continue
            invalid = _invalid_text(number, line)
            if invalid is not None:
                yield invalid
                continue
            try:
                item = json.loads(line)
            except ValueError as exc:
                yield {LINE: number}, f"invalid JSON: line {number}: {exc.msg}"
                continue
            if not isinstance(item, dict) or not _text(str(item.get("imageGcsUri") or "")):
                yield {LINE: number}, f"missing imageGcsUri: line {number}"
                continue
            yield from _jsonl_rows(number, item, task)
