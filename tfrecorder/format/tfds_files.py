"""TensorFlow Datasets files of a job directory, so `tfds.builder_from_directory(job_dir)` reads it as is.

Pure Python (TFDS is not imported at conversion time): from metadata.json this writes
- `dataset_info.json`: name (the job name in snake_case), version 1.0.0, file format "tfrecord", and per
  split its shard lengths, bytes and the file-name template `{SPLIT}-{SHARD_X_OF_Y}.{FILEFORMAT}`,
  which is exactly the shard names the job already has (`train-00000-of-00004.tfrecord`); for a job
  with one label, the supervised keys `as_supervised=True` pairs (`supervised_keys`);
- `features.json`: the FeaturesDict TFDS parses the records with;
- `<label>.labels.txt`: the class names of each string label (its vocabulary), one per line.

Mapping (what TFDS cannot express is left out of features.json; the records are unchanged):
- image columns → `Image` (uint8; a static channel count when the job saw one, else None: decoded as
  stored, as `load()` does; encoding format kept when the job saw one; a column holding GIF or WebP
  images stays encoded bytes, a string `Tensor`, as TFDS decodes those to 4-D frames), plus `<image>_format`,
  `_uri` as `Text` and `_height`, `_width`, `_channels` as int64 `Tensor`s;
- string labels → `ClassLabel` (names = vocabulary), unless the column's name cannot name a file in
  the job directory (TFDS reads `<name>.labels.txt` there: a `/` or `\\` in it, or too long), then an
  int64 `Tensor` scalar, like integer labels;
- integer, float32 and datetime (int64 ns) inputs → `Tensor` of their dtype and shape ([n] lists
  fixed, variable-length lists as shape (None,)); string inputs → `Text`, string lists → `Tensor`;
- left out: inputs that may be missing (TFDS has no "absent" value) and DoubleInput (float64 stored as
  its bit pattern, which TFDS cannot reinterpret).
Gzip jobs get no TFDS files: TFDS reads TFRecord shards uncompressed and has no setting for gzip.
"""
from __future__ import annotations

import json
import re
from typing import Any, Mapping, Optional

from tfrecorder.core import types
from tfrecorder.io import storage
from tfrecorder.format.feature_spec import image_feature_prefix
from tfrecorder.core.schema import Schema

DATASET_INFO_FILE = "dataset_info.json"
FEATURES_FILE = "features.json"
LABELS_SUFFIX = ".labels.txt"
VERSION = "1.0.0"
FILE_TEMPLATE = "{SPLIT}-{SHARD_X_OF_Y}.{FILEFORMAT}"
MAX_FILE_NAME_BYTES = 255  # the longest file name common local file systems allow (ext4, APFS, NTFS)
_CLASSES = "tensorflow_datasets.core.features."
_IMAGE = _CLASSES + "image_feature.Image"
_TENSOR = _CLASSES + "tensor_feature.Tensor"
_TEXT = _CLASSES + "text_feature.Text"
_CLASS_LABEL = _CLASSES + "class_label_feature.ClassLabel"
_DICT = _CLASSES + "features_dict.FeaturesDict"
_FRAMES_FORMATS = {"gif", "webp"}  # tf.image.decode_image (which TFDS calls) returns 4-D frames for these


def tfds_name(job_name: str) -> str:
    """A TFDS dataset name: snake_case letters, digits and underscores, starting with a letter."""
    name = re.sub(r"[^a-z0-9]+", "_", str(job_name or "tfrecorder").lower()).strip("_")
    return name if name[:1].isalpha() else f"job_{name}"


def _shape(dimensions: list) -> dict:
    return {"dimensions": [str(-1 if d is None else d) for d in dimensions]}


def _tensor(dtype: str, shape: Optional[list], description: str = "") -> dict:
    dims = [None] if shape is None else list(shape)
    return {"pythonClassName": _TENSOR, "tensor": {"shape": _shape(dims), "dtype": dtype, "encoding": "none"},
            "description": description}


def _text(description: str = "") -> dict:
    return {"pythonClassName": _TEXT, "text": {}, "description": description}


def _image(kinds: Mapping[str, list]) -> dict:
    channels = kinds.get("channels", [])
    formats = kinds.get("formats", [])
    animated = sorted(set(formats) & _FRAMES_FORMATS)
    if animated:  # TFDS's Image decoder returns [frames, H, W, C] for these, breaking its shape: keep bytes
        return _tensor("string", [], f"encoded image bytes (includes {', '.join(animated)}, which TFDS's Image "
                                     "decodes to 4-D frames)")
    # One channel count seen: a static channel dimension. Several: None, which TFDS decodes as stored
    # (tf.image.decode_image with channels=0), like load() does.
    content = {"shape": _shape([None, None, channels[0] if len(channels) == 1 else None]), "dtype": "uint8"}
    if len(formats) == 1 and formats[0] in ("png", "jpeg"):
        content["encodingFormat"] = formats[0]
    return {"pythonClassName": _IMAGE, "image": content,
            "description": "encoded image bytes" + (f" ({', '.join(formats)})" if formats else "")}


def labels_file_fits(column: str) -> bool:
    """Whether `<column>.labels.txt` is one file name directly in the job directory, where TFDS looks for it
    (a column named `../../x` must not make the conversion write, or TFDS read, outside it)."""
    name = column + LABELS_SUFFIX
    return not any(c in name for c in "/\\\0") and len(name.encode("utf-8")) <= MAX_FILE_NAME_BYTES


def tfds_features(metadata: Mapping[str, Any]) -> tuple[dict, dict[str, list[str]]]:
    """(features.json document, {label feature: class names}) for a job's metadata.json."""
    schema = Schema.from_json(metadata.get("schema", {}))
    spec = metadata["features"]
    images = metadata.get("images", {})
    features: dict[str, dict] = {}
    labels: dict[str, list[str]] = {}
    for column, role in schema.items():
        if role == types.ImageUri:
            prefix = image_feature_prefix(column)
            features[prefix] = _image(images.get(prefix, {}))
            features[f"{prefix}_format"] = _text("image format: jpeg, png, gif, bmp or webp")
            features[f"{prefix}_uri"] = _text("the image's source URI")
            for suffix in ("height", "width", "channels"):
                features[f"{prefix}_{suffix}"] = _tensor("int64", [], f"stored image {suffix}")
        elif role == types.StringLabel and not labels_file_fits(column):
            features[column] = _tensor("int64", [], f"class index into metadata.json's vocabularies[{column!r}]")
        elif role == types.StringLabel:
            names = [str(n) for n in metadata.get("vocabularies", {}).get(column, [])]
            labels[column] = names
            features[column] = {"pythonClassName": _CLASS_LABEL, "classLabel": {"numClasses": str(len(names))},
                                "description": f"class index into {column}{LABELS_SUFFIX}"}
        elif role == types.SplitKey or column not in spec:
            continue
        else:
            feature = spec[column]
            if feature["allow_missing"] or feature.get("stored_as"):
                continue
            if feature["dtype"] == "string" and feature["shape"] == []:
                features[column] = _text()
            else:
                features[column] = _tensor(feature["dtype"], feature["shape"])
    return {"pythonClassName": _DICT, "featuresDict": {"features": features}}, labels


def supervised_keys(metadata: Mapping[str, Any]) -> Optional[tuple[Any, str]]:
    """What TFDS's `as_supervised=True` pairs, for a job with exactly one label among the TFDS features:
    (first image, label) when the job has images, as `load(as_supervised=True)` pairs them; else
    ({feature: feature} of every other TFDS feature, label). None when there is no such pair (no label,
    several labels, nothing but the label): TFDS then refuses as_supervised with its own message."""
    features = tfds_features(metadata)[0]["featuresDict"]["features"]
    schema = Schema.from_json(metadata.get("schema", {}))
    labels = [column for column in schema.label_columns if column in features]
    if len(labels) != 1:
        return None
    images = [prefix for column in schema.image_columns if (prefix := image_feature_prefix(column)) in features]
    if images:
        return images[0], labels[0]
    inputs = {name: name for name in features if name != labels[0]}
    return (inputs, labels[0]) if inputs else None


def _supervised_keys_json(keys: tuple[Any, str]) -> dict:
    """TFDS's SupervisedKeys proto as JSON: a tuple of nests, each a feature key or a dict of nests."""
    def nest(value: Any) -> dict:
        if isinstance(value, dict):
            return {"dict": {"dict": {key: nest(item) for key, item in value.items()}}}
        return {"featureKey": value}

    return {"tuple": {"items": [nest(item) for item in keys]}}


def dataset_info(metadata: Mapping[str, Any]) -> dict:
    """The dataset_info.json document (protobuf JSON of tfds DatasetInfo; int64 fields as strings)."""
    splits = []
    for split, info in metadata["splits"].items():
        splits.append({
            "name": split.lower(),
            "numBytes": str(info["bytes"]),
            "shardLengths": [str(s["records"]) for s in info["shards"]],
            "filepathTemplate": FILE_TEMPLATE,
        })
    keys = supervised_keys(metadata)
    return {
        "name": tfds_name(metadata.get("job_name", "")),
        "version": VERSION,
        "fileFormat": "tfrecord",
        "description": f"tfrecorder job {metadata.get('job_name', '')}, converted {metadata.get('created_utc', '')}",
        "moduleName": "tfrecorder",
        "releaseNotes": {VERSION: "Written by tfrecorder."},
        "splits": splits,
        **({} if keys is None else {"supervisedKeys": _supervised_keys_json(keys)}),
    }


def write_tfds_files(job_dir: str, metadata: Mapping[str, Any]) -> list[str]:
    """Write dataset_info.json, features.json and label files into `job_dir`; returns their names.

    Gzip jobs get none: TFDS reads a split's files as uncompressed TFRecords.
    """
    if metadata.get("compression"):
        return []
    features, labels = tfds_features(metadata)
    files = {DATASET_INFO_FILE: json.dumps(dataset_info(metadata), indent=2),
             FEATURES_FILE: json.dumps(features, indent=2)}
    for column, names in labels.items():
        files[column + LABELS_SUFFIX] = "".join(f"{name}\n" for name in names)
    for name, text in files.items():
        storage.write_bytes(storage.join(job_dir, name), text.encode("utf-8"))
    return sorted(files)
