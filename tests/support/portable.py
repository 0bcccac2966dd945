"""Beam options of a portable run that needs no cluster and no network: Beam's embedded job service, and an
SDK worker in a process of its own, started with this interpreter (it inherits the test's environment);
and what a job publishes, for comparing a portable run with the in-process one."""
from __future__ import annotations

import json
from pathlib import Path

from beam_pipelines.launches.portable_launch import SUBPROCESS_ENVIRONMENT, subprocess_worker_command
from tfrecorder.format import file_names, tfds_files
from support.replay import snapshot

SUBPROCESS_WORKERS = {"job_endpoint": "embed", "environment_type": SUBPROCESS_ENVIRONMENT,
                      "environment_config": subprocess_worker_command(), "sdk_worker_parallelism": 1}


def published(job: str, runner: str) -> dict:
    """A job's files, records and metadata, without what names the run (its name, time and `runner`), and
    the bytes of every other file it publishes (shard indexes, TFDS files, a detection job's label map;
    dataset_info.json without its name and description, which name the job and its time)."""
    found = snapshot(job)
    assert found["metadata"].pop("runner") == runner
    compared = {shard["file"] for split in found["metadata"]["splits"].values() for shard in split["shards"]}
    compared |= {file_names.METADATA_FILE, file_names.DISCARD_FILE, tfds_files.DATASET_INFO_FILE}
    found["other_files"] = {str(path.relative_to(job)): path.read_bytes() for path in sorted(Path(job).rglob("*"))
                            if path.is_file() and str(path.relative_to(job)) not in compared}
    info_file = Path(job, tfds_files.DATASET_INFO_FILE)
    if info_file.exists():  # every job but a detection job's
        info = json.loads(info_file.read_text())
        found["dataset_info"] = {key: value for key, value in info.items() if key not in ("name", "description")}
    return found
