"""Read converted shards back with plain tf.data, independent of tfrecorder's own loader."""
from __future__ import annotations

import json
import os


def read_job(tfrecord_dir: str) -> dict[str, list[dict]]:
    """split → list of parsed examples (feature name → python value) using metadata's shard list."""
    import tensorflow as tf

    metadata = json.load(open(os.path.join(tfrecord_dir, "metadata.json")))
    dtypes = {"string": tf.string, "int64": tf.int64, "float32": tf.float32}
    spec = {
        name: tf.io.VarLenFeature(dtypes[f["dtype"]]) if f["allow_missing"] else tf.io.FixedLenFeature([], dtypes[f["dtype"]])
        for name, f in metadata["features"].items()
    }
    compression = "GZIP" if metadata["compression"] == "gzip" else None
    out = {}
    for split, info in metadata["splits"].items():
        files = [os.path.join(tfrecord_dir, s["file"]) for s in info["shards"]]
        examples = []
        for batch in tf.data.TFRecordDataset(files, compression_type=compression).batch(64):
            parsed = tf.io.parse_example(batch, spec)
            for i in range(int(tf.shape(batch)[0])):
                example = {}
                for name, value in parsed.items():
                    if isinstance(value, tf.sparse.SparseTensor):
                        row = tf.sparse.to_dense(tf.sparse.slice(value, [i, 0], [1, value.dense_shape[1]])).numpy()
                        example[name] = row[0].tolist() if row.size else []
                    else:
                        example[name] = value[i].numpy()
                examples.append(example)
        out[split] = examples
    return out
