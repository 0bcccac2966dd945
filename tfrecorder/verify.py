"""`tfrecorder.verify()`: read every shard of a job and check it against metadata.json.

Every record's framing and CRCs are checked (tfrecorder.format.framing), every record is parsed as
a tf.train.Example with the job's own feature spec (the one `load()` uses), and record counts and
byte sizes are compared per shard and per split. Missing shards and shard files that metadata.json
does not list are reported too. All reads go through tfrecorder.io.storage, so gs:// works.

A version made by `tfrecorder.append` is checked against its lineage too: each carried shard must hold
the records and bytes its parent recorded, and the parent (when it is still next to the version) must
have the metadata.json the version was made from (tfrecorder.format.lineage.carried_problems).
"""
from __future__ import annotations

import hashlib
import json
import os

from tfrecorder.format.lineage import LINEAGE_KEY, carried_problems
from tfrecorder.format.file_names import DISCARD_FILE, METADATA_FILE, ShardName, is_index_file
from tfrecorder.format.finished_job import JobInfo
from tfrecorder.io import storage
from tfrecorder.core.quiet import leaves_logging_alone
from tfrecorder.reading.shard_checks import ExampleChecker, ShardReport, VerifyReport, check_shard

__all__ = ["ShardReport", "VerifyReport", "verify"]


@leaves_logging_alone
def verify(tfrecord_dir: str) -> VerifyReport:
    """Check every shard, record and count of a finished job directory; returns a `VerifyReport`."""
    job = JobInfo.read(tfrecord_dir)
    if job.legacy:  # TFRecorder 2.0 wrote no metadata.json: check what its files allow
        from tfrecorder.legacy.v2_verify import verify_legacy

        return verify_legacy(job)
    checker = ExampleChecker(job)
    shards, problems = [], []
    for split, info in job.metadata["splits"].items():
        split_shards = [check_shard(job, checker, split, shard) for shard in info["shards"]]
        shards.extend(split_shards)
        found = sum(s.records for s in split_shards)
        if found != info["records"]:
            problems.append(f"{split}: {found} readable records, metadata.json says {info['records']}")
    total = sum(s.records for s in shards)
    if total != job.metadata.get("records_written", total):
        problems.append(f"{total} readable records in all, metadata.json says {job.metadata['records_written']}")
    problems.extend(_lineage_problems(job, shards))
    for name in _extra_shard_files(job, set(job.listed_files)):
        extra = ShardReport(name, None, None)
        kind = "index" if is_index_file(name) else "shard"
        extra.problems.append(f"{kind} file not listed in metadata.json")
        shards.append(extra)
    return VerifyReport(job.tfrecord_dir, shards, problems)


def _lineage_problems(job: JobInfo, shards: list[ShardReport]) -> list[str]:
    """A version's carried shards against what its parent recorded (nothing for a job without lineage)."""
    lineage = job.metadata.get(LINEAGE_KEY)
    if not lineage:
        return []
    carried = {entry["file"] for entry in lineage.get("carried_shards", [])}
    sizes = {s.file: (s.records, storage.size(job.path(s.file)) if storage.exists(job.path(s.file)) else None)
             for s in shards if s.file in carried}
    parent, digest = None, None
    directory = job.tfrecord_dir.rstrip("/")
    parent_dir = storage.join(directory.rsplit("/", 1)[0] if storage.is_remote(directory) else os.path.dirname(directory),
                              str(lineage.get("parent", {}).get("job_name", "")))
    parent_metadata = storage.join(parent_dir, METADATA_FILE)
    if lineage.get("parent", {}).get("job_name") and storage.exists(parent_metadata):
        raw = storage.read_bytes(parent_metadata)
        parent, digest = json.loads(raw), hashlib.sha256(raw).hexdigest()
    return carried_problems(job.metadata, sizes, parent, digest)


def _extra_shard_files(job: JobInfo, listed: set[str]) -> list[str]:
    base = job.tfrecord_dir.rstrip("/").rstrip("\\")
    names = [path[len(base) + 1:].replace("\\", "/") for path in storage.list_files(base)]
    known = listed | {METADATA_FILE, DISCARD_FILE}
    return [name for name in names if name not in known and ShardName.looks_like(name)]
