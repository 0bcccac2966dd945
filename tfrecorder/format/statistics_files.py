"""statistics.json, statistics.pb and duplicates.csv of a job directory: names, writing and reading (issue 29).

statistics.json is tfrecorder's own document (docs/format.md, "statistics.json"); statistics.pb holds
the same numbers as tensorflow-metadata's DatasetFeatureStatisticsList (one dataset per split), which
TensorFlow Data Validation and Facets display: `tfdv.load_stats_binary(path)`.
"""
from __future__ import annotations

import json
import struct
from typing import Any, Mapping, Optional

from tfrecorder.format.example_encoder import varint
from tfrecorder.format.job_directory import job_file
from tfrecorder.io import storage

STATISTICS_FILE = "statistics.json"
STATISTICS_PROTO_FILE = "statistics.pb"
DUPLICATES_FILE = "duplicates.csv"


def write_statistics(directory: str, document: Mapping[str, Any]) -> None:
    """Write statistics.json and statistics.pb into `directory` (each a whole-file write: a retry rewrites it)."""
    storage.write_bytes(storage.join(directory, STATISTICS_FILE), json.dumps(document, indent=1).encode("utf-8"))
    storage.write_bytes(storage.join(directory, STATISTICS_PROTO_FILE), to_proto(document))


def read_statistics(directory: str) -> Optional[dict[str, Any]]:
    """A job's statistics.json, or None for a job written without one (before issue 29)."""
    path = job_file(directory, STATISTICS_FILE)
    if not storage.exists(path):
        return None
    return json.loads(storage.read_bytes(path))


def to_proto(document: Mapping[str, Any]) -> bytes:
    """statistics.json as a serialized tensorflow_metadata DatasetFeatureStatisticsList (one dataset per
    split). Encoded here in protobuf's wire format (field numbers of tensorflow_metadata/proto/v0/
    statistics.proto), so that workers need neither tensorflow-metadata nor TensorFlow to write it; the
    unit test parses it with tensorflow-metadata itself."""
    out = b""
    for split, info in document.get("splits", {}).items():
        dataset = _text(1, split) + _uint(2, info.get("rows", 0))
        for column, feature in info.get("features", {}).items():
            dataset += b"".join(_message(3, body) for body in _features(column, feature))
        out += _message(1, dataset)
    return out


_INT, _FLOAT, _STRING, _BYTES = 0, 1, 2, 3  # FeatureNameStatistics.Type
_STANDARD, _QUANTILES = 0, 1  # Histogram.HistogramType


def _uint(field: int, number: Optional[float]) -> bytes:
    """A uint64 field (nothing for None: statistics.json's null, a value beyond float range)."""
    if number is None:
        return b""
    return varint(field << 3) + varint(max(int(round(number)), 0))


def _double(field: int, value: Optional[float]) -> bytes:
    return b"" if value is None else varint(field << 3 | 1) + struct.pack("<d", float(value))


def _float(field: int, value: Optional[float]) -> bytes:
    return b"" if value is None else varint(field << 3 | 5) + struct.pack("<f", float(value))


def _text(field: int, text: str) -> bytes:
    return _message(field, str(text).encode("utf-8"))


def _message(field: int, body: bytes) -> bytes:
    return varint(field << 3 | 2) + varint(len(body)) + body


def _common(feature: Mapping[str, Any]) -> bytes:
    """CommonStatistics: present and missing counts, values per row (list lengths, else one)."""
    body = _uint(1, feature.get("count", 0)) + _uint(2, feature.get("missing", 0))
    lengths = feature.get("list_lengths")
    if lengths and lengths.get("count") and lengths.get("mean") is not None:
        body += (_uint(3, lengths["min"]) + _uint(4, lengths["max"]) + _float(5, lengths["mean"])
                 + _uint(8, lengths["mean"] * lengths["count"]))
    elif feature.get("count"):
        body += _uint(3, 1) + _uint(4, 1) + _float(5, 1.0) + _uint(8, feature["count"])
    return body


def _numeric(feature: Mapping[str, Any], summary: Mapping[str, Any]) -> bytes:
    """NumericStatistics: moments, zeros, min/median/max, a standard and a quantiles histogram."""
    body = _message(1, _common(feature))
    if not summary.get("count"):
        return body
    quantiles = summary.get("quantiles", [])
    median = next((q["value"] for q in quantiles if q["fraction"] == 0.5), summary["mean"])
    body += (_double(2, summary["mean"]) + _double(3, summary["std_dev"]) + _uint(4, summary["zeros"])
             + _double(5, summary["min"]) + _double(6, median) + _double(7, summary["max"]))
    standard = b"".join(_message(3, _double(1, b["low"]) + _double(2, b["high"]) + _double(4, b["count"]))
                        for b in summary.get("histogram", []))
    body += _message(8, standard + _uint(4, _STANDARD))
    if len(quantiles) > 1:
        share = summary["count"] / (len(quantiles) - 1)
        spread = b"".join(_message(3, _double(1, low["value"]) + _double(2, high["value"]) + _double(4, share))
                          for low, high in zip(quantiles, quantiles[1:]))
        body += _message(8, spread + _uint(4, _QUANTILES))
    return body


def _named(column: str, kind: int) -> bytes:
    return _message(8, _text(1, column)) + _uint(2, kind)  # path {step: column}, type


def _features(column: str, feature: Mapping[str, Any]) -> list[bytes]:
    """The FeatureNameStatistics of one column (an image column adds <column>/width and /height)."""
    kind = feature.get("kind")
    if kind == "numeric":
        return [_named(column, _FLOAT) + _message(3, _numeric(feature, feature.get("numeric", {})))]
    if kind in ("string", "label"):
        if kind == "string":
            string = feature.get("string", {})
            values = string.get("top_values", [])
            extra = _uint(2, string.get("unique_estimate", 0)) + _float(4, string.get("lengths", {}).get("mean", 0.0))
        else:
            values = feature.get("labels", {}).get("counts", [])
            extra = _uint(2, len(values))
        top = b"".join(_message(3, _text(2, v["value"]) + _double(3, v["count"])) for v in values)
        ranks = b"".join(_message(1, _uint(1, rank) + _uint(2, rank) + _text(4, v["value"]) + _double(5, v["count"]))
                         for rank, v in enumerate(values))
        return [_named(column, _STRING) + _message(4, _message(1, _common(feature)) + extra + top + _message(5, ranks))]
    if kind == "image":
        image = feature.get("image", {})
        sizes = image.get("bytes", {})
        body = _message(1, _common(feature))
        if sizes.get("count"):
            body += _float(3, sizes["mean"]) + _float(4, sizes["min"]) + _float(5, sizes["max"])
        out = [_named(column, _BYTES) + _message(5, body)]
        for dimension in ("width", "height"):  # numeric features of their own, which Facets charts
            summary = image.get(dimension, {})
            counts = {"count": summary.get("count", 0), "missing": feature.get("missing", 0)}
            out.append(_named(f"{column}/{dimension}", _INT) + _message(3, _numeric(counts, summary)))
        return out
    return []
