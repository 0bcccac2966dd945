"""Bundle replay (Beam's direct_runner_bundle_repeat) and what two runs of a job must share to be equal."""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

from tfrecorder.format.metadata_file import JobMetadata
from tfrecorder.format import file_names
from tfrecorder.format.framing import read_records

REPLAY = {"direct_runner_bundle_repeat": 1}


def shard_records(job: str, metadata: dict) -> dict[str, list[list[bytes]]]:
    """Every shard's records, per split, in order."""
    found = {}
    for split, info in metadata["splits"].items():
        found[split] = []
        for shard in info["shards"]:
            with open(os.path.join(job, shard["file"]), "rb") as raw:
                stream = gzip.GzipFile(fileobj=raw) if metadata["compression"] == "gzip" else raw
                found[split].append(list(read_records(stream)))
    return found


def _unnamed(value, job_name: str):
    """A metadata value with the job's own name replaced (keys sidecars are named after the job)."""
    return json.loads(json.dumps(value).replace(job_name, "<job>"))


def snapshot(job: str) -> dict:
    metadata = JobMetadata.read(job).document
    return {
        "files": sorted(name.replace(metadata["job_name"], "<job>") for name in os.listdir(job)),
        "records": shard_records(job, metadata),
        "metadata": {k: _unnamed(v, metadata["job_name"]) for k, v in metadata.items()
                     if k not in ("job_name", "created_utc")},
        "discarded": Path(job, file_names.DISCARD_FILE).read_bytes(),
    }
