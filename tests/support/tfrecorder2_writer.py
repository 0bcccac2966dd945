"""Write datasets the way TFRecorder 2.0 wrote them, so the tests have real legacy directories.

Learned from TFRecorder 2.0's source (google/tensorflow-recorder: beam_pipeline.py, beam_image.py,
input_schema.py, converter.py), written independently; no file of its repository is copied. What
it reproduces, with TensorFlow's own writers:

- the job directory `<output_dir>/tfrecorder-<YYYYmmdd-HHMMSS>-<job_label>/`;
- images read with Pillow and stored as URL-safe base64 (`-_`) of `image.tobytes()`, with
  `image_name` (base name), `image_height`, `image_width` and `image_channels` (1 if the Pillow mode
  contains "L", else 3 — so an RGBA or palette image's bytes do not match its shape, as in 2.0);
  a row whose image cannot be read, or whose split is not TRAIN/VALIDATION/TEST, is discarded;
- StringLabel columns replaced by tf.Transform's vocabulary index (vocabulary of TRAIN labels by
  descending frequency, ties by descending value; -1 for a label outside it);
- shards `<split>-SSSSS-of-NNNNN.tfrecord[.gz]` for TRAIN and for each other split present in the
  input (an empty file when all its rows were discarded);
- `discarded-data-00000-of-00001` (one `str(row)` line per discarded row, empty file when none);
- `transformed_metadata/schema.pbtxt` and the same `schema.pbtxt` at the top level;
- `transform_fn/` as a SavedModel whose assets hold `vocab_compute_and_apply_vocabulary[_N]_vocabulary`.
"""
from __future__ import annotations

import collections
import datetime as dt
import os
import tempfile
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import pandas as pd

IMAGE_CSV_SCHEMA = {"split": "SplitKey", "image_uri": "ImageUri", "label": "StringLabel"}
SPLITS = ("TRAIN", "VALIDATION", "TEST")
_PBTXT_TYPE = {"bytes": "BYTES", "int64": "INT", "float": "FLOAT"}
_KIND = {"SplitKey": "bytes", "StringInput": "bytes", "IntegerInput": "int64", "IntegerLabel": "int64",
         "FloatInput": "float", "StringLabel": "int64"}


def _image_features(path: str) -> dict[str, Any]:
    """beam_image.ExtractImagesDoFn: Pillow image → base64 raw pixels and its size."""
    import base64

    from PIL import Image

    with Image.open(path) as image:
        image.load()
        return {
            "image_name": os.path.split(path)[-1],
            "image": base64.b64encode(image.tobytes(), altchars=b"-_"),
            "image_width": image.size[0],
            "image_height": image.size[1],
            "image_channels": 1 if "L" in image.mode else 3,
        }


def _vocabulary(values: Sequence[str]) -> list[str]:
    counts = collections.Counter(values)
    return [token for count, token in sorted(((c, t) for t, c in counts.items()), reverse=True)]


def _feature(tf, kind: str, value: Any):
    if kind == "bytes":
        value = value if isinstance(value, bytes) else str(value).encode("utf-8")
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
    if kind == "int64":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))
    return tf.train.Feature(float_list=tf.train.FloatList(value=[float(value)]))


def _schema_pbtxt(kinds: Mapping[str, str], vocab_sizes: Mapping[str, int]) -> str:
    lines = []
    for name in sorted(kinds):
        lines += ["feature {", f'  name: "{name}"', f"  type: {_PBTXT_TYPE[kinds[name]]}"]
        if name in vocab_sizes:
            lines += ["  int_domain {", "    min: -1", f"    max: {vocab_sizes[name] - 1}",
                      "    is_categorical: true", "  }"]
        lines += ["  presence {", "    min_fraction: 1.0", "  }", "  shape {", "  }", "}"]
    return "\n".join(lines) + "\n"


def _write_transform_fn(tf, job_dir: Path, vocabularies: Sequence[list[str]]) -> None:
    """A SavedModel standing for tf.Transform's transform_fn, its vocabularies as assets."""
    with tempfile.TemporaryDirectory() as scratch:
        module = tf.Module()
        assets = []
        for index, vocabulary in enumerate(vocabularies):
            suffix = "" if index == 0 else f"_{index}"
            path = Path(scratch) / f"vocab_compute_and_apply_vocabulary{suffix}_vocabulary"
            path.write_text("".join(f"{token}\n" for token in vocabulary), encoding="utf-8")
            assets.append(tf.saved_model.Asset(str(path)))
        module.assets = assets
        module.transform = tf.function(lambda x: x, input_signature=[tf.TensorSpec([None], tf.string)])
        tf.saved_model.save(module, str(job_dir / "transform_fn"))


def write_tfrecorder2_dir(
    output_dir: os.PathLike | str,
    data: pd.DataFrame,
    schema_map: Optional[Mapping[str, str]] = None,
    *,
    compression: Optional[str] = "gzip",
    num_shards: int = 0,
    job_label: str = "convert",
    now: Optional[dt.datetime] = None,
) -> Path:
    """Convert `data` as TFRecorder 2.0's `convert()` did; returns the job directory it wrote."""
    import tensorflow as tf

    schema_map = dict(schema_map or IMAGE_CSV_SCHEMA)
    split_key = next(k for k, v in schema_map.items() if v == "SplitKey")
    image_key = next((k for k, v in schema_map.items() if v == "ImageUri"), None)
    labels = [k for k, v in schema_map.items() if v == "StringLabel"]
    present = set(data[split_key])
    if "TRAIN" not in present:
        raise AttributeError("`TRAIN` set expected to be present in splits")
    stamp = (now or dt.datetime.now()).strftime("%Y%m%d-%H%M%S")
    job_dir = Path(output_dir) / f"tfrecorder-{stamp}-{job_label.replace('_', '-')}"
    job_dir.mkdir(parents=True)

    kinds = {}  # the pre-transform schema: the image column becomes the image features
    for key, role in schema_map.items():
        if role == "ImageUri":
            kinds.update(image_name="bytes", image="bytes", image_height="int64", image_width="int64",
                         image_channels="int64")
        else:
            kinds[key] = _KIND[role]
    by_split: dict[str, list[dict]] = {split: [] for split in SPLITS}
    discarded = []
    for row in data[list(schema_map)].to_dict("records"):
        if image_key is not None:
            uri = row.pop(image_key)
            try:
                row.update(_image_features(uri))
            except Exception:  # noqa: BLE001 - TFRecorder 2.0 discarded a row on any image error
                row[split_key] = "DISCARD"
        (by_split[row[split_key]] if row[split_key] in SPLITS else discarded).append(row)

    vocabularies = [_vocabulary([str(r[c]) for r in by_split["TRAIN"]]) for c in labels]
    suffix = ".tfrecord.gz" if compression else ".tfrecord"
    options = tf.io.TFRecordOptions(compression_type="GZIP" if compression else "")
    for split, rows in by_split.items():
        if split != "TRAIN" and split not in present:
            continue
        count = max(1, num_shards)
        writers = [tf.io.TFRecordWriter(str(job_dir / f"{split.lower()}-{i:05d}-of-{count:05d}{suffix}"), options)
                   for i in range(count)]
        for index, row in enumerate(rows):
            values = dict(row)
            for column, vocabulary in zip(labels, vocabularies):
                values[column] = vocabulary.index(str(row[column])) if str(row[column]) in vocabulary else -1
            example = tf.train.Example(features=tf.train.Features(
                feature={name: _feature(tf, kind, values[name]) for name, kind in kinds.items()}))
            writers[index % count].write(example.SerializeToString())
        for writer in writers:
            writer.close()
    (job_dir / "discarded-data-00000-of-00001").write_text("".join(f"{row}\n" for row in discarded))
    schema_text = _schema_pbtxt(kinds, {c: len(v) for c, v in zip(labels, vocabularies)})
    (job_dir / "transformed_metadata").mkdir()
    (job_dir / "transformed_metadata" / "schema.pbtxt").write_text(schema_text)
    (job_dir / "schema.pbtxt").write_text(schema_text)
    _write_transform_fn(tf, job_dir, vocabularies)
    return job_dir


def sample_image_table(image_dir: Path) -> pd.DataFrame:
    """Image files and a split,image_uri,label table exercising what TFRecorder 2.0 did with them.

    RGB JPEGs and grayscale PNGs of several sizes; an RGBA PNG (2.0 stored 4 bytes per pixel with
    image_channels=3); a missing file and an UNASSIGNED row (both discarded by 2.0); a VALIDATION
    label absent from TRAIN (index -1).
    """
    from PIL import Image

    from tfrecorder.sample_data import encode_image, photo_array

    image_dir.mkdir(parents=True, exist_ok=True)
    rows = []

    def add(split: str, name: str, label: str, image: Optional[Image.Image] = None, fmt: str = "JPEG") -> None:
        if image is not None:
            (image_dir / name).write_bytes(encode_image(image, fmt))
        rows.append({"split": split, "image_uri": str(image_dir / name), "label": label})

    for i, label in enumerate(["cat", "cat", "cat", "dog", "dog", "goat"]):
        add("TRAIN", f"train-{i}.jpg", label, Image.fromarray(photo_array(20 + 3 * i, 30 - 2 * i, i)))
    add("TRAIN", "train-gray.png", "dog", Image.fromarray(photo_array(17, 23, 9)).convert("L"), "PNG")
    add("TRAIN", "train-rgba.png", "cat", Image.fromarray(photo_array(12, 14, 10)).convert("RGBA"), "PNG")
    add("TRAIN", "missing.jpg", "cat")
    add("UNASSIGNED", "unassigned.jpg", "dog", Image.fromarray(photo_array(10, 10, 11)))
    add("VALIDATION", "val-0.jpg", "dog", Image.fromarray(photo_array(16, 16, 12)))
    add("VALIDATION", "val-1.jpg", "fox", Image.fromarray(photo_array(18, 12, 13)))
    add("TEST", "test-0.png", "goat", Image.fromarray(photo_array(15, 21, 14)).convert("L"), "PNG")
    return pd.DataFrame(rows)


def source_pixels(path: str):
    """What TFRecorder 2.0 stored for an image file, as uint8 [H, W, C] (C = 1 for L, 3 for RGB)."""
    import numpy as np
    from PIL import Image

    with Image.open(path) as image:
        array = np.asarray(image)
    return array[:, :, None] if array.ndim == 2 else array
