"""The finalize stage's part of issue 29: statistics.json/.pb written, duplicate counts for metadata.json,
and duplicates="fail" enforced before anything is published."""
from __future__ import annotations

from typing import Any, Mapping, Optional

from beam_pipelines.steps.find_duplicates import write_duplicates_file
from tfrecorder.errors import TableError
from tfrecorder.format.statistics_files import DUPLICATES_FILE, write_statistics
from tfrecorder.io import storage
from tfrecorder.options.job_config import JobConfig
from tfrecorder.rows.dataset_statistics import DatasetStatistics


def leak_error(duplicates: Mapping[str, Any]) -> Optional[TableError]:
    """The error of duplicates="fail" when duplicate groups span TRAIN and VALIDATION/TEST (None when none do)."""
    counts = duplicates.get("counts", {})
    leaking = counts.get("leaking_groups", 0) + (counts.get("near") or {}).get("leaking_groups", 0)
    if not leaking:
        return None
    named = "; ".join(" = ".join(f"{row} ({split})" for split, row in group) for group in duplicates.get("leaks", []))
    return TableError(f"train/test leakage: {leaking} duplicate group(s) span TRAIN and "
                      f"VALIDATION/TEST (duplicates='fail'): {named}")


def write_quality_files(config: JobConfig, vocabularies: Mapping[str, list], statistics: Optional[DatasetStatistics],
                        buckets: Optional[list]) -> dict[str, Any]:
    """Write duplicates.csv from the duplicate `buckets` (beam_pipelines.steps.find_duplicates) and check
    duplicates="fail", then write the statistics files, all into the temporary job directory (each a
    whole-file rewrite: a retried finalize writes the same); returns the entries metadata.json gets
    ("duplicates": counts). Nothing when the job computed no statistics (`buckets` None)."""
    duplicates = None
    if buckets is not None:
        duplicates = write_duplicates_file(buckets, storage.join(config.temp_dir, DUPLICATES_FILE))
    if duplicates is not None and config.duplicates == "fail":
        error = leak_error(duplicates)
        if error is not None:
            raise error
    if statistics is None and buckets is not None:  # every row was discarded: statistics of nothing
        statistics = DatasetStatistics(config.schema)
    if statistics is not None:
        write_statistics(config.temp_dir, statistics.to_json(vocabularies))
    if duplicates is None:
        return {}
    counts = dict(duplicates["counts"])
    if config.duplicates == "drop":  # every group's rows but one were dropped before the shards (issue 29)
        counts["dropped"] = counts.get("redundant", 0) + counts.get("near", {}).get("redundant", 0)
    return {"duplicates": counts}
