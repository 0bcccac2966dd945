"""Read converted shards back with plain tf.data + tf.train.Example, independent of tfrecorder's own code.

Follows metadata.json's "features" contract: shape [] → a scalar, [n] → a list of n, null → a list;
stored_as "float64_bits" → the int64 bit pattern reinterpreted as float64; a feature absent from an
Example → its "default" (allowed only when allow_missing) and `<name>_missing` True.
"""
from __future__ import annotations

import json
import os
import struct

_KINDS = {"string": "bytes_list", "int64": "int64_list", "float32": "float_list", "float64": "float_list"}
_ZEROS = {"string": b"", "int64": 0, "float32": 0.0, "float64": 0.0}


def _values(feature, spec: dict) -> list:
    kind = "int64_list" if spec.get("stored_as") == "float64_bits" else _KINDS[spec["dtype"]]
    assert feature.WhichOneof("kind") in (kind, None), (feature, spec)
    values = list(getattr(feature, kind).value)
    if spec.get("stored_as") == "float64_bits":
        values = [struct.unpack("<d", struct.pack("<q", v))[0] for v in values]
    return values


def _default(spec: dict):
    if "default" not in spec:
        return _ZEROS[spec["dtype"]] if spec["shape"] == [] else []
    default = spec["default"]
    encode = (lambda v: v.encode("utf-8")) if spec["dtype"] == "string" else (lambda v: v)
    return [encode(v) for v in default] if isinstance(default, list) else encode(default)


def parse_example(data: bytes, features: dict[str, dict]) -> dict:
    """One serialized Example → {name: value, and <name>_missing for features that allow missing}."""
    import tensorflow as tf

    example = tf.train.Example.FromString(data)
    present = example.features.feature
    out = {}
    for name, spec in features.items():
        if name not in present:
            assert spec["allow_missing"], f"feature {name} is missing but allow_missing is false"
            out[name], out[f"{name}_missing"] = _default(spec), True
            continue
        values = _values(present[name], spec)
        if spec["shape"] == []:
            assert len(values) == 1, (name, values)
            values = values[0]
        elif spec["shape"] is not None:
            assert len(values) == spec["shape"][0], (name, values, spec)
        out[name] = values
        if spec["allow_missing"]:
            out[f"{name}_missing"] = False
    return out


def read_job(tfrecord_dir: str) -> dict[str, list[dict]]:
    """split → list of parsed examples (feature name → python value) using metadata's shard list."""
    import tensorflow as tf

    metadata = json.load(open(os.path.join(tfrecord_dir, "metadata.json")))
    compression = "GZIP" if metadata["compression"] == "gzip" else None
    out = {}
    for split, info in metadata["splits"].items():
        files = [os.path.join(tfrecord_dir, s["file"]) for s in info["shards"]]
        records = tf.data.TFRecordDataset(files, compression_type=compression)
        out[split] = [parse_example(record.numpy(), metadata["features"]) for record in records]
    return out
