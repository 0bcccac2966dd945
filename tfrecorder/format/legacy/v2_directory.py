"""Reading a directory TFRecorder 2.0 wrote, as if it were a job directory of this package.

TFRecorder 2.0 wrote no metadata.json. Its output directory holds (see docs/coming-from-tfrecorder.md):

    train-00000-of-00001.tfrecord.gz    one or more shards per split (.tfrecord when uncompressed)
    validation-… / test-…               only for splits present in the input
    discarded-data-00000-of-00001       one text line per row it dropped (a bad image, an unknown split)
    transformed_metadata/schema.pbtxt   TF Metadata schema of the records (often also at the top level)
    transform_fn/assets/vocab_…         tf.Transform vocabulary of each StringLabel, one label per line
    transform_fn/saved_model.pb         the tf.Transform graph (not needed to read the records)

Images are stored as URL-safe base64 of raw pixels (`image`), with `image_height`, `image_width`,
`image_channels` and the file's base name `image_name`. `read_metadata()` turns all this into the
metadata.json document `JobInfo` expects, marked with "legacy_format", with the record counts left
unknown (None): TFRecorder 2.0 did not record them. Every file is read through
`tfrecorder.format.job_directory.job_file`, so a symbolic link leading out of the directory is refused.
"""
from __future__ import annotations

import codecs
import re
from typing import Any, Optional

from tfrecorder.core import types
from tfrecorder.format.file_names import ShardName
from tfrecorder.format.job_directory import job_file
from tfrecorder.io import storage
from tfrecorder.core.splits import SPLITS

LEGACY_FORMAT = "TFRecorder 2.0"
SCHEMA_FILES = ("transformed_metadata/schema.pbtxt", "schema.pbtxt")
ASSETS_DIR = "transform_fn/assets"
DISCARD_PREFIX = "discarded-data"
IMAGE_FEATURES = ("image", "image_height", "image_width", "image_channels")
IMAGE_COLUMN = "image_uri"  # the column an upgraded job stores the image under (feature prefix "image")
SPLIT_FEATURE = "split"
_DISCARDS = re.compile(r"^discarded-data-\d{5,}-of-\d{5,}$")
_VOCABULARY = re.compile(r"^vocab_compute_and_apply_vocabulary(_(\d+))?_vocabulary$")
_DTYPES = {"BYTES": ("string", types.StringInput), "INT": ("int64", types.IntegerInput),
           "FLOAT": ("float32", types.FloatInput)}


def _relative_names(tfrecord_dir: str) -> list[str]:
    base = tfrecord_dir.rstrip("/").rstrip("\\")
    return [path[len(base) + 1:].replace("\\", "/") for path in storage.list_files(base)]


def is_legacy_dir(tfrecord_dir: str) -> bool:
    """True for a directory holding TFRecorder 2.0's schema.pbtxt (and no metadata.json: not checked here)."""
    return any(storage.exists(storage.join(str(tfrecord_dir), name)) for name in SCHEMA_FILES)


# --- TF Metadata text format -------------------------------------------------------------------------

_TOKEN = re.compile(r'\s*(?:#[^\n]*|([{}:])|("(?:[^"\\]|\\.)*")|([^\s{}:"#]+))')


def parse_text_proto(text: str) -> list[tuple[str, Any]]:
    """Protobuf text format as a list of (field, value); messages are nested lists, scalars str/int/float.

    Enough for TF Metadata's schema.pbtxt without depending on tensorflow_metadata.
    """
    tokens = [token for m in _TOKEN.finditer(text) if (token := m.group(1) or m.group(2) or m.group(3))]
    position = 0

    def message(closing: Optional[str]) -> list[tuple[str, Any]]:
        nonlocal position
        fields = []
        while position < len(tokens) and tokens[position] != closing:
            name = tokens[position]
            position += 1
            if position < len(tokens) and tokens[position] == ":":
                position += 1
            if position >= len(tokens):
                raise ValueError(f"schema.pbtxt ends inside field {name!r}")
            if tokens[position] == "{":
                position += 1
                fields.append((name, message("}")))
                if position >= len(tokens):
                    raise ValueError(f"schema.pbtxt ends inside message {name!r}")
                position += 1  # the closing brace
            else:
                fields.append((name, _scalar(tokens[position])))
                position += 1
        return fields

    return message(None)


def _scalar(token: str) -> Any:
    if token.startswith('"'):  # C escapes; non-ASCII text is written as octal-escaped UTF-8 bytes
        return codecs.escape_decode(token[1:-1].encode("utf-8"))[0].decode("utf-8", "replace")
    for kind in (int, float):
        try:
            return kind(token)
        except ValueError:
            pass
    return token  # enum names, true/false


def _field(message: list[tuple[str, Any]], name: str, default: Any = None) -> Any:
    return next((value for key, value in message if key == name), default)


def parse_schema(text: str) -> dict[str, dict[str, Any]]:
    """schema.pbtxt → name → {"type": BYTES|INT|FLOAT, "shape": [..] or None, "categorical", "max"}."""
    features = {}
    for key, feature in parse_text_proto(text):
        if key != "feature":
            continue
        shape = _field(feature, "shape")
        domain = _field(feature, "int_domain") or []
        kind = _field(feature, "type")
        if kind not in _DTYPES:
            raise ValueError(f"schema.pbtxt: feature {_field(feature, 'name')!r} has unsupported type {kind!r}")
        features[_field(feature, "name")] = {
            "type": kind,
            "shape": None if shape is None else [int(_field(dim, "size", -1)) for k, dim in shape if k == "dim"],
            "categorical": str(_field(domain, "is_categorical", "false")).lower() == "true",
            "max": _field(domain, "max"),
        }
    return features


# --- the synthesised metadata ------------------------------------------------------------------------


def _shards(tfrecord_dir: str, names: list[str]) -> tuple[dict[str, list[dict]], Optional[str], list[str]]:
    """(split → shard entries, compression, problems) from the shard file names."""
    by_split: dict[str, list[tuple[int, int, str]]] = {}
    compressions = set()
    for name in names:
        shard = ShardName.parse(name)
        if shard:
            by_split.setdefault(shard.split, []).append((shard.index, shard.count, name))
            compressions.add(shard.compression)
    if len(compressions) > 1:
        raise ValueError(f"{tfrecord_dir} mixes gzip (.tfrecord.gz) and uncompressed (.tfrecord) shards")
    problems = []
    splits = {}
    for split in SPLITS:
        entries = sorted(by_split.get(split, []))
        if not entries:
            continue
        counts = {count for _index, count, _name in entries}
        present = {index for index, _count, _name in entries}
        missing = sorted(set(range(max(counts))) - present)
        if len(counts) > 1 or missing:
            problems.append(f"{split}: shard files {sorted(n for *_, n in entries)} do not form one complete set"
                            + (f" (missing shard numbers {missing})" if missing else ""))
        splits[split] = [{"file": name, "records": None, "bytes": storage.size(job_file(tfrecord_dir, name))}
                         for _index, _count, name in entries]
    return splits, ("gzip" if compressions == {"gzip"} else None), problems


def _vocabularies(tfrecord_dir: str, names: list[str], categorical: list[str],
                  features: dict[str, dict[str, Any]]) -> tuple[dict[str, list[str]], list[str]]:
    """Match tf.Transform vocabulary files to the categorical (StringLabel) features."""
    files = sorted((int(m.group(2) or 0), name) for name in names
                   if name.startswith(ASSETS_DIR + "/") and (m := _VOCABULARY.match(name.rsplit("/", 1)[-1])))
    vocabularies = [storage.read_bytes(job_file(tfrecord_dir, path)).decode("utf-8").splitlines()
                    for _n, path in files]
    found: dict[str, list[str]] = {}
    notes = []
    if len(categorical) == 1 and len(vocabularies) == 1:
        found[categorical[0]] = vocabularies[0]
    else:  # several labels: tf.Transform's file order follows the schema, which the files do not keep; match sizes
        for column in categorical:
            size = features[column]["max"]
            fitting = [v for v in vocabularies if size is not None and len(v) == int(size) + 1]
            if len(fitting) == 1:
                found[column] = fitting[0]
    for column in categorical:
        if column not in found:
            notes.append(f"label {column!r}: no vocabulary file could be matched to it; its names are unknown")
    return found, notes


def _roles(features: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The schema an upgraded job gets: image group → image_uri, categorical ints → StringLabel, …"""
    schema: dict[str, str] = {}
    if all(name in features for name in IMAGE_FEATURES):
        schema[IMAGE_COLUMN] = types.ImageUri.name
    for name, feature in features.items():
        if name in IMAGE_FEATURES or (name == "image_name" and IMAGE_COLUMN in schema):
            continue
        if name == SPLIT_FEATURE and feature["type"] == "BYTES" and feature["shape"] == []:
            schema[name] = types.SplitKey.name
        elif feature["categorical"] and feature["type"] == "INT":
            schema[name] = types.StringLabel.name
        elif name == "label" and feature["type"] == "INT" and feature["shape"] == []:
            schema[name] = types.IntegerLabel.name
        else:
            role = _DTYPES[feature["type"]][1]
            shape = feature["shape"]
            if shape == []:
                schema[name] = role.name
            else:
                fixed = len(shape) == 1 and shape[0] > 0
                schema[name] = types.list_of(role, shape[0] if fixed else None).name
    return schema


def read_metadata(tfrecord_dir: str) -> dict[str, Any]:
    """A metadata.json-shaped description of a TFRecorder 2.0 directory (counts unknown: None)."""
    tfrecord_dir = str(tfrecord_dir)
    names = _relative_names(tfrecord_dir)
    schema_file = next((n for n in SCHEMA_FILES if n in names), None)
    if schema_file is None:
        raise ValueError(f"{tfrecord_dir} is not a TFRecorder 2.0 directory (no {' or '.join(SCHEMA_FILES)})")
    features = parse_schema(storage.read_bytes(job_file(tfrecord_dir, schema_file)).decode("utf-8"))
    splits, compression, problems = _shards(tfrecord_dir, names)
    if not splits:
        raise ValueError(f"{tfrecord_dir} has TFRecorder 2.0's {schema_file} but no shard files "
                         "(train-00000-of-00001.tfrecord.gz, …)")
    schema = _roles(features)
    labels = [c for c, role in schema.items() if role == types.StringLabel.name]
    vocabularies, notes = _vocabularies(tfrecord_dir, names, labels, features)
    return {
        "legacy_format": LEGACY_FORMAT,
        "compression": compression,
        "schema": schema,
        "features": {name: {"dtype": _DTYPES[f["type"]][0], "shape": _shape(f["shape"]), "allow_missing": False}
                     for name, f in features.items()},
        "pixel_images": ["image"] if IMAGE_COLUMN in schema else [],
        "vocabularies": vocabularies,
        "splits": {split: {"records": None, "bytes": sum(s["bytes"] for s in shards), "shards": shards}
                   for split, shards in splits.items()},
        "discard_files": [n for n in names if _DISCARDS.match(n)],
        "layout_problems": problems,
        "notes": notes,
    }


def _shape(shape: Optional[list[int]]) -> Optional[list[int]]:
    return None if shape is None or any(n < 0 for n in shape) else shape
