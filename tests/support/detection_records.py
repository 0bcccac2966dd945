"""Reading detection jobs back as the TF Object Detection API does, and their discards."""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Optional


def od_api_spec(tf) -> dict:
    """The keys and dtypes the TF Object Detection API's TfExampleDecoder (object_detection/data_decoders/
    tf_example_decoder.py) and Model Garden's official/vision/dataloaders/tf_example_decoder.py parse."""
    return {
        "image/encoded": tf.io.FixedLenFeature((), tf.string),
        "image/format": tf.io.FixedLenFeature((), tf.string, default_value="jpeg"),
        "image/filename": tf.io.FixedLenFeature((), tf.string, default_value=""),
        "image/source_id": tf.io.FixedLenFeature((), tf.string),
        "image/uri": tf.io.FixedLenFeature((), tf.string),
        "image/height": tf.io.FixedLenFeature((), tf.int64, default_value=1),
        "image/width": tf.io.FixedLenFeature((), tf.int64, default_value=1),
        "image/object/bbox/xmin": tf.io.VarLenFeature(tf.float32),
        "image/object/bbox/xmax": tf.io.VarLenFeature(tf.float32),
        "image/object/bbox/ymin": tf.io.VarLenFeature(tf.float32),
        "image/object/bbox/ymax": tf.io.VarLenFeature(tf.float32),
        "image/object/class/label": tf.io.VarLenFeature(tf.int64),
        "image/object/class/text": tf.io.VarLenFeature(tf.string),
    }


def read_od_records(tf, tfrecord_dir: str, extra_spec: Optional[dict] = None, key: str = "image/uri") -> dict[str, dict]:
    """Every written record parsed with the OD API spec (+ image/uri, + `extra_spec`), with its split,
    keyed by the decoded value of `key`."""
    metadata = json.loads((Path(tfrecord_dir) / "metadata.json").read_text())
    spec = {**od_api_spec(tf), **(extra_spec or {})}
    found = {}
    for split, info in metadata["splits"].items():
        for shard in info["shards"]:
            for record in tf.data.TFRecordDataset(str(Path(tfrecord_dir) / shard["file"])):
                parsed = tf.io.parse_single_example(record, spec)
                example = {k: (tf.sparse.to_dense(v).numpy() if isinstance(v, tf.SparseTensor) else v.numpy())
                           for k, v in parsed.items()}
                example["split"] = split
                found[example[key].decode()] = example
    return found


def discards_of(tfrecord_dir: str) -> list[dict]:
    with open(Path(tfrecord_dir) / "discarded.csv", newline="") as stream:
        return list(csv.DictReader(stream))
