"""Seeing and cleaning incomplete jobs (issue 27): `tfrecorder.incomplete_jobs(output_dir)`,
`tfrecorder.clean_incomplete(output_dir, older_than=...)`, the CLI's `status` and `clean`.

An incomplete job is an `.incomplete-<name>` directory under an output directory: a conversion that
is running, or one that was killed (and that the next run with the same source and options
continues: tfrecorder.options.job_resumption). Each is listed with its progress (parts done / total,
rows done), its age and whether a run can continue it (tfrecorder.format.resume_files.IncompleteJob).
"""
from __future__ import annotations

import os
import re
from typing import Optional, Union

from tfrecorder.format import resume_files
from tfrecorder.format.resume_files import IncompleteJob
from tfrecorder.options.conversion_options import normalise_output_dir

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def incomplete_jobs(output_dir: Union[str, os.PathLike]) -> list[IncompleteJob]:
    """Every incomplete job directly under `output_dir` (local or gs://), oldest first, with its progress
    and whether it can be continued."""
    return resume_files.incomplete_jobs(normalise_output_dir(output_dir))


def parse_age(text: Union[str, float, int, None]) -> Optional[float]:
    """Seconds from '90s', '30m', '12h', '7d', '2w' or a number of seconds; None stays None."""
    if text is None or isinstance(text, (int, float)):
        return None if text is None else float(text)
    match = _DURATION.match(text.lower())
    if not match:
        raise ValueError(f"expected an age such as 30m, 12h or 7d, got {text!r}")
    return float(match.group(1)) * _SECONDS[match.group(2)]


def clean_incomplete(output_dir: Union[str, os.PathLike], older_than: Union[str, float, None] = None) -> list[IncompleteJob]:
    """Remove the incomplete jobs under `output_dir` that no run is working on (older than `older_than`
    when given: '12h', '7d', or seconds); returns those removed. A job a live run holds is kept."""
    age = parse_age(older_than)
    resume_files.remove_stale_resume_dirs(normalise_output_dir(output_dir))
    removed = []
    for job in incomplete_jobs(output_dir):
        if resume_files.lock_held(job.path) or (age is not None and job.age_seconds < age):
            continue
        resume_files.remove(job.path)
        removed.append(job)
    return removed


def describe_age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def status_lines(jobs: list[IncompleteJob]) -> list[str]:
    """One line per incomplete job, as `tfrecorder status` prints them."""
    if not jobs:
        return ["no incomplete jobs"]
    lines = []
    for job in jobs:
        total = "?" if job.parts_total is None else str(job.parts_total)
        rows = f"{job.rows_done:,}" + ("" if job.rows_total is None else f" / ~{job.rows_total:,}")
        state = "resumable" if job.resumable else f"not resumable: {job.reason}"
        lines.append(f"{job.name}: parts {job.parts_done} / {total}, rows {rows}, age {describe_age(job.age_seconds)}, "
                     f"{state}")
    return lines
