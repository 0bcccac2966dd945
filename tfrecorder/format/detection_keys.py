"""What a detection job puts on disk: the TF Object Detection API feature keys and label_map.pbtxt, both ways.

Written keys (what the OD API's and Model Garden's TfExampleDecoder read, unchanged):
image/encoded, image/format, image/height, image/width, image/filename (the file name),
image/source_id, image/object/bbox/{xmin,ymin,xmax,ymax} (normalised floats),
image/object/class/text, image/object/class/label (ids from 1, as in label_map.pbtxt); and
image/uri, the image URI as given. `image/source_id` is a decimal number (`source_id`): Model
Garden's eval parsers turn it into an int64 (COCO image ids), so it is derived from the URI by a hash,
the same in every run and retry, rather than holding the URI itself. tfrecorder.rows.detection_encoder
writes them; `load` and `inspect` (tfrecorder.reading) read them.
"""
from __future__ import annotations

import hashlib
import re
from typing import Any, Mapping, Sequence

from tfrecorder.format.file_names import LABEL_MAP_FILE

TASK = "detection"  # metadata.json "task" of a detection job

ENCODED, FORMAT, HEIGHT, WIDTH = "image/encoded", "image/format", "image/height", "image/width"
FILENAME, SOURCE_ID, URI = "image/filename", "image/source_id", "image/uri"
XMIN, YMIN, XMAX, YMAX = "image/object/bbox/xmin", "image/object/bbox/ymin", "image/object/bbox/xmax", "image/object/bbox/ymax"
CLASS_TEXT, CLASS_LABEL = "image/object/class/text", "image/object/class/label"
# Datasets (COCO, Pascal VOC, YOLO): what the OD API's create_coco_tf_record.py and create_pascal_tf_record.py add
MASK, IS_CROWD, AREA = "image/object/mask", "image/object/is_crowd", "image/object/area"
DIFFICULT, TRUNCATED, VIEW = "image/object/difficult", "image/object/truncated", "image/object/view"
SEGMENTATION, SEGMENTATION_FORMAT = "image/segmentation/class/encoded", "image/segmentation/class/format"


def source_id(uri: str) -> str:
    """An image's `image/source_id`: the first 63 bits of the SHA-256 of its URI (as given, UTF-8), as
    decimal text. A positive int64 for Model Garden's eval parsers (`tf.strings.to_number(id, tf.int64)`),
    the same for the same URI in every run, retry and process; two of a billion images share one
    with a chance of about 1 in 20."""
    digest = hashlib.sha256(uri.encode("utf-8")).digest()
    return str(int.from_bytes(digest[:8], "big") >> 1)


def label_ids(vocabulary: Sequence[str]) -> dict[str, int]:
    """Label name → id, ids from 1 in the vocabulary's (sorted) order; 0 is the OD API's background."""
    return {name: index for index, name in enumerate(vocabulary, start=1)}


def label_map_pbtxt(vocabulary: Sequence[str]) -> str:
    """The OD API's label_map.pbtxt text: `item { id: 1 name: 'cat' }` per label."""
    return label_map_of({i: name for name, i in label_ids(vocabulary).items()})


def label_map_of(items: Mapping[int, str]) -> str:
    """label_map.pbtxt of a dataset's own category ids (COCO's sparse ids kept), in id order."""
    return "".join(f"item {{\n  id: {i}\n  name: {_quoted(name)}\n}}\n" for i, name in sorted(items.items()))


def _quoted(name: str) -> str:
    return "'" + name.replace("\\", "\\\\").replace("'", "\\'") + "'"


_ITEM = re.compile(r"item\s*\{\s*id:\s*(\d+)\s*name:\s*'((?:[^'\\]|\\.)*)'\s*\}")


def parse_label_map(text: str) -> dict[int, str]:
    """Id → label name of a label_map.pbtxt as `label_map_pbtxt` writes it; ValueError for other text."""
    items = {int(match.group(1)): re.sub(r"\\(.)", r"\1", match.group(2)) for match in _ITEM.finditer(text)}
    if _ITEM.sub("", text).strip():
        raise ValueError(f"not a {LABEL_MAP_FILE} as tfrecorder writes it: {text[:80]!r}")
    return items


def feature_spec() -> dict[str, dict[str, Any]]:
    """metadata.json "features" of a detection job (the same shape as every other job's)."""
    scalar = {ENCODED: "string", FORMAT: "string", HEIGHT: "int64", WIDTH: "int64", FILENAME: "string",
              SOURCE_ID: "string", URI: "string"}
    lists = {XMIN: "float32", YMIN: "float32", XMAX: "float32", YMAX: "float32", CLASS_TEXT: "string",
             CLASS_LABEL: "int64"}
    spec = {name: {"dtype": dtype, "shape": [], "allow_missing": False} for name, dtype in scalar.items()}
    spec.update({name: {"dtype": dtype, "shape": None, "allow_missing": False} for name, dtype in lists.items()})
    return spec


def dataset_feature_spec() -> dict[str, dict[str, Any]]:
    """metadata.json "features" of a dataset job (COCO, VOC, YOLO): the detection keys, the per-object
    lists every dataset record holds, and the optional semantic mask (absent when the image has none)."""
    spec = feature_spec()
    lists = {MASK: "string", IS_CROWD: "int64", AREA: "float32", DIFFICULT: "int64", TRUNCATED: "int64",
             VIEW: "string"}
    spec.update({name: {"dtype": dtype, "shape": None, "allow_missing": False} for name, dtype in lists.items()})
    spec.update({name: {"dtype": "string", "shape": [], "allow_missing": True}
                 for name in (SEGMENTATION, SEGMENTATION_FORMAT)})
    return spec


def dataset_metadata(label_map: Mapping[int, str], dataset: str) -> dict[str, Any]:
    """The detection part of metadata.json for a dataset job: the dataset's own ids, masks' keys."""
    document = detection_metadata([], "pixels")
    document["label_map"] = {str(i): name for i, name in sorted(label_map.items())}
    document["detection"].update(dataset=dataset, masks=MASK, is_crowd=IS_CROWD, area=AREA, difficult=DIFFICULT,
                                 segmentation=SEGMENTATION)
    return document


def detection_metadata(vocabulary: Sequence[str], box_units: str) -> dict[str, Any]:
    """The detection-specific part of metadata.json: task, id mapping, where the boxes live."""
    return {
        "task": TASK,
        "label_map": {str(i): name for name, i in label_ids(vocabulary).items()},
        "label_map_file": LABEL_MAP_FILE,
        "detection": {"image": ENCODED, "uri": URI, "source_id": SOURCE_ID, "boxes": [YMIN, XMIN, YMAX, XMAX],
                      "class_label": CLASS_LABEL, "class_text": CLASS_TEXT, "box_units_in": box_units,
                      "box_order": "ymin,xmin,ymax,xmax"},
    }
