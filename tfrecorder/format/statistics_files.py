"""statistics.json, statistics.pb and duplicates.csv of a job directory: names, writing and reading (issue 29).

statistics.json is tfrecorder's own document (docs/format.md, "statistics.json"); statistics.pb holds
the same numbers as tensorflow-metadata's DatasetFeatureStatisticsList (one dataset per split), which
TensorFlow Data Validation and Facets display: `tfdv.load_stats_binary(path)`.
"""
from __future__ import annotations

import json
from typing import Any, Mapping, Optional

from tfrecorder.format.job_directory import job_file
from tfrecorder.io import storage

STATISTICS_FILE = "statistics.json"
STATISTICS_PROTO_FILE = "statistics.pb"
DUPLICATES_FILE = "duplicates.csv"


def write_statistics(directory: str, document: Mapping[str, Any]) -> None:
    """Write statistics.json and statistics.pb into `directory` (each a whole-file write: a retry rewrites it)."""
    storage.write_bytes(storage.join(directory, STATISTICS_FILE), json.dumps(document, indent=1).encode("utf-8"))
    storage.write_bytes(storage.join(directory, STATISTICS_PROTO_FILE), to_proto(document).SerializeToString())


def read_statistics(directory: str) -> Optional[dict[str, Any]]:
    """A job's statistics.json, or None for a job written without one (before issue 29)."""
    path = job_file(directory, STATISTICS_FILE)
    if not storage.exists(path):
        return None
    return json.loads(storage.read_bytes(path))


def to_proto(document: Mapping[str, Any]):
    """statistics.json as a tensorflow_metadata DatasetFeatureStatisticsList (one dataset per split)."""
    from tensorflow_metadata.proto.v0 import statistics_pb2 as pb

    result = pb.DatasetFeatureStatisticsList()
    for split, info in document.get("splits", {}).items():
        dataset = result.datasets.add(name=split, num_examples=int(info.get("rows", 0)))
        for column, feature in info.get("features", {}).items():
            _add_feature(pb, dataset, column, feature)
    return result


def _common(pb, target, feature: Mapping[str, Any]) -> None:
    common = target.common_stats
    common.num_non_missing = int(feature.get("count", 0))
    common.num_missing = int(feature.get("missing", 0))
    lengths = feature.get("list_lengths")
    if lengths and lengths.get("count"):
        common.min_num_values = int(lengths["min"])
        common.max_num_values = int(lengths["max"])
        common.avg_num_values = float(lengths["mean"])
        common.tot_num_values = int(round(lengths["mean"] * lengths["count"]))
    elif feature.get("count"):
        common.min_num_values = common.max_num_values = 1
        common.avg_num_values = 1.0
        common.tot_num_values = int(feature["count"])


def _numeric(pb, target, summary: Mapping[str, Any]) -> None:
    if not summary.get("count"):
        return
    target.mean, target.std_dev = summary["mean"], summary["std_dev"]
    target.num_zeros = int(summary["zeros"])
    target.min, target.max = summary["min"], summary["max"]
    quantiles = summary.get("quantiles", [])
    target.median = next((q["value"] for q in quantiles if q["fraction"] == 0.5), summary["mean"])
    histogram = target.histograms.add(type=pb.Histogram.STANDARD)
    for bucket in summary.get("histogram", []):
        histogram.buckets.add(low_value=bucket["low"], high_value=bucket["high"], sample_count=bucket["count"])
    if len(quantiles) > 1:
        spread = target.histograms.add(type=pb.Histogram.QUANTILES)
        share = summary["count"] / (len(quantiles) - 1)
        for low, high in zip(quantiles, quantiles[1:]):
            spread.buckets.add(low_value=low["value"], high_value=high["value"], sample_count=share)


def _add_feature(pb, dataset, column: str, feature: Mapping[str, Any]) -> None:
    kind = feature.get("kind")
    entry = dataset.features.add()
    entry.path.step.append(column)
    if kind == "numeric":
        entry.type = pb.FeatureNameStatistics.FLOAT
        _common(pb, entry.num_stats, feature)
        _numeric(pb, entry.num_stats, feature.get("numeric", {}))
    elif kind in ("string", "label"):
        entry.type = pb.FeatureNameStatistics.STRING
        stats = entry.string_stats
        _common(pb, stats, feature)
        if kind == "string":
            string = feature.get("string", {})
            stats.unique = int(string.get("unique_estimate", 0))
            stats.avg_length = float(string.get("lengths", {}).get("mean", 0.0))
            values = string.get("top_values", [])
        else:
            values = feature.get("labels", {}).get("counts", [])
            stats.unique = len(values)
        for rank, item in enumerate(values):
            stats.top_values.add(value=item["value"], frequency=item["count"])
            stats.rank_histogram.buckets.add(low_rank=rank, high_rank=rank, label=item["value"],
                                             sample_count=item["count"])
    elif kind == "image":
        entry.type = pb.FeatureNameStatistics.BYTES
        stats = entry.bytes_stats
        _common(pb, stats, feature)
        sizes = feature.get("image", {}).get("bytes", {})
        if sizes.get("count"):
            stats.avg_num_bytes, stats.min_num_bytes, stats.max_num_bytes = sizes["mean"], sizes["min"], sizes["max"]
        for dimension in ("width", "height"):  # as numeric features of their own, which Facets charts
            extra = dataset.features.add(type=pb.FeatureNameStatistics.INT)
            extra.path.step.append(f"{column}/{dimension}")
            summary = feature.get("image", {}).get(dimension, {})
            _common(pb, extra.num_stats, {"count": summary.get("count", 0), "missing": feature.get("missing", 0)})
            _numeric(pb, extra.num_stats, summary)
