"""The finalize stage's part of issue 29: statistics.json/.pb written, duplicate counts for metadata.json,
and duplicates="fail" enforced before anything is published."""
from __future__ import annotations

from typing import Any, Mapping, Optional

from tfrecorder.errors import TableError
from tfrecorder.format.statistics_files import write_statistics
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
                        duplicates: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """Check duplicates="fail", write the statistics files into the temporary job directory; returns the
    entries metadata.json gets ("duplicates": counts)."""
    if duplicates is not None and config.duplicates == "fail":
        error = leak_error(duplicates)
        if error is not None:
            raise error
    if statistics is not None:
        write_statistics(config.temp_dir, statistics.to_json(vocabularies))
    return {"duplicates": dict(duplicates["counts"])} if duplicates is not None else {}
