"""What makes a job resumable, on disk: its fingerprint, the lock of the run continuing it, and a
manifest per committed source part (issue 27).

An unpublished job directory `.incomplete-<name>/` of a resumable job has beside it `.resume-<name>/`
(outside the directory the publishing rename moves, so a published job never holds it):
- `fingerprint.json`: what the job's output depends on (source identity, every
  output-affecting option: tfrecorder.options.job_fingerprint). A later run with an equal fingerprint
  continues this directory instead of starting a new one.
- `lock`: created exclusively by the run working on the job (host, pid); a second run finds
  it held and stops (JobBusyError). A lock whose process is gone (same host) is stale and is taken over.
  A job submitted to Dataflow belongs to the Dataflow job, not to the process that submitted it: once
  submitted, the lock names the job (`dataflow_job`, project, region), and it is stale only when
  Dataflow reports that job ended (FAILED, CANCELLED, ...: the caller's `job_ended`, asked through the
  launch; this layer cannot reach Dataflow).

The `.incomplete-<name>/` directory itself holds
- `_parts/<part key>.json`: one source part's committed work (its pieces, its discard part file, the
  CSV record count and malformed lines, image kinds, rows), created exclusively once all of it is
  closed: the first committed manifest wins, and a replayed or resumed attempt emits its content
  instead of doing the part again. `_parts/<part key>.stats.json`: the part's whole-table facts
  (rows, malformed lines, nullable columns, TRAIN seen, TRAIN labels), written the same way.
  docs/format.md describes both; issue 28 (append) reuses them.

Finalize removes `_parts/` first (a run killed after that redoes every part, its pieces being
removed next); `.resume-<name>/` goes only after publishing (format/job_directory.finalize), so a job
killed at any moment before it is visible is continued by the next run, and one killed right after
leaves a `.resume-` directory of a published job, which the next run's scan removes.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import socket
import time
from typing import Any, Callable, Optional

from tfrecorder.errors import JobBusyError
from tfrecorder.format.file_names import INDEX_DIR, METADATA_FILE, PARTS_DIR, RESUME_PREFIX, TEMP_PREFIX, is_temporary_name
from tfrecorder.format import job_directory
from tfrecorder.io import storage

FINGERPRINT_FILE = "fingerprint.json"
LOCK_FILE = "lock"
MANIFEST_SUFFIX = ".json"
STATS_SUFFIX = ".stats.json"


def part_key(part: Any) -> str:
    """A stable name for a source part (its descriptor's repr: plain frozen values), the same in every
    process and every run over the same source."""
    return hashlib.sha256(repr(part).encode("utf-8")).hexdigest()[:32]


def parts_dir(temp_dir: str) -> str:
    return storage.join(temp_dir, PARTS_DIR)


def resume_dir(temp_dir: str) -> str:
    return job_directory.resume_dir_for(temp_dir)


def manifest_path(temp_dir: str, key: str) -> str:
    return storage.join(parts_dir(temp_dir), key + MANIFEST_SUFFIX)


def stats_path(temp_dir: str, key: str) -> str:
    return storage.join(parts_dir(temp_dir), key + STATS_SUFFIX)


def _encode(document: Any) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode("utf-8")


def read_json(path: str) -> Optional[Any]:
    """The JSON document at `path`, or None if there is none (files here are created whole)."""
    try:
        return json.loads(storage.read_bytes(path))
    except FileNotFoundError:
        return None


def commit_json(path: str, document: Any) -> Any:
    """Create `path` holding `document` unless it exists; returns what the file holds (the first
    committed document wins, so every attempt goes on with the same one)."""
    if storage.create_exclusive(path, _encode(document)):
        return document
    existing = read_json(path)
    return document if existing is None else existing


def write_fingerprint(temp_dir: str, fingerprint: dict) -> None:
    storage.write_bytes(storage.join(resume_dir(temp_dir), FINGERPRINT_FILE), _encode(fingerprint))


def read_fingerprint(temp_dir: str) -> Optional[dict]:
    try:
        return read_json(storage.join(resume_dir(temp_dir), FINGERPRINT_FILE))
    except (OSError, ValueError):
        return None


def committed_parts(temp_dir: str) -> list[dict]:
    """Every committed part manifest of the job (O(parts) small files)."""
    directory = parts_dir(temp_dir)
    if not storage.is_remote(directory) and not os.path.isdir(directory):
        return []
    manifests = []
    for path in storage.list_files(directory):
        if path.endswith(MANIFEST_SUFFIX) and not path.endswith(STATS_SUFFIX):
            document = read_json(path)
            if document is not None:
                manifests.append(document)
    return manifests


JobEnded = Callable[[dict], bool]  # a lock holder naming a remote job (Dataflow) → whether that job ended


class JobLock:
    """The lock of the run continuing an incomplete job: `.resume-<name>/lock`, created exclusively.
    `job_ended`: how to tell whether a remote job holding it (a Dataflow job) has ended."""

    def __init__(self, temp_dir: str, job_ended: Optional[JobEnded] = None) -> None:
        self.temp_dir = temp_dir
        self.path = storage.join(resume_dir(temp_dir), LOCK_FILE)
        self.held = False
        self.job_ended = job_ended

    def acquire(self) -> "JobLock":
        """Take the lock, or raise JobBusyError naming who holds it. A local lock left by a process
        that is gone (SIGKILL, a lost machine's reboot) is taken over."""
        owner = {"host": socket.gethostname(), "pid": os.getpid(), "since": time.time()}
        for _ in range(2):
            if storage.create_exclusive(self.path, _encode(owner)):
                self.held = True
                return self
            holder = read_json(self.path) or {}
            if not _stale(holder, self.job_ended):
                who = (f"Dataflow job {holder['dataflow_job']}" if holder.get("dataflow_job")
                       else f"another run (pid {holder.get('pid')} on {holder.get('host')})")
                raise JobBusyError(
                    f"{who} is continuing the incomplete job {self.temp_dir}; "
                    "wait for it, or pass resume=False to start a new job")
            storage.delete_files([self.path])
        raise JobBusyError(f"could not take the lock {self.path}: another run took it first")

    def release(self) -> None:
        if self.held:
            storage.delete_files([self.path])
            self.held = False

    def hand_over(self, owner: dict) -> None:
        """Give the held lock to a remote job (`owner`: {"dataflow_job": id, ...}) that now works on
        the job and outlives this process; the job's finalize removes it with `.resume-<name>/`."""
        if self.held:
            storage.write_bytes(self.path, _encode({**owner, "since": time.time()}))
            self.held = False


def _stale(holder: dict, job_ended: Optional[JobEnded] = None) -> bool:
    """Whether a lock's holder is a process of this machine that no longer runs, or a Dataflow job
    that `job_ended` reports ended (without `job_ended`, a Dataflow job's lock is never stale)."""
    if holder.get("dataflow_job"):
        return job_ended is not None and job_ended(holder)
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return False
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def lock_held(temp_dir: str, job_ended: Optional[JobEnded] = None) -> bool:
    """Whether a live run (or a Dataflow job that has not ended) holds the job's lock."""
    holder = read_json(storage.join(resume_dir(temp_dir), LOCK_FILE))
    return holder is not None and not _stale(holder, job_ended)


@dataclasses.dataclass(frozen=True)
class IncompleteJob:
    """An unpublished job directory under an output directory, as `tfrecorder status` lists it."""

    path: str  # the .incomplete-<name> directory
    name: str  # the job directory it publishes as
    resumable: bool  # has a fingerprint, is not published and no run is continuing it
    reason: str  # why it is not resumable ("" when it is)
    parts_done: int
    parts_total: Optional[int]  # None while the source's parts are not known (a CSV before its scan)
    rows_done: int
    rows_total: Optional[int]
    age_seconds: float
    fingerprint: Optional[dict] = None

    def as_dict(self) -> dict:
        document = dataclasses.asdict(self)
        document.pop("fingerprint")
        return document


def _names(paths: list[str], prefix: str) -> set[str]:
    """The job names of the directories among `paths` named `<prefix><job name>`."""
    return {name[len(prefix):] for name in (path.rstrip("/").rsplit("/", 1)[-1] for path in paths)
            if name.startswith(prefix)}


def incomplete_dirs(output_dir: str) -> list[str]:
    """The `.incomplete-<name>` directories of the unpublished jobs directly under `output_dir`, sorted
    (gs://: one delimited listing, not every object of every published job). A job is known by its
    temporary directory or by its `.resume-<name>/` alone: on object stores a directory exists only
    once an object is in it, and a job's lock is written before anything else."""
    listed = storage.list_dirs(output_dir)
    names = _names(listed, TEMP_PREFIX) | _names(listed, RESUME_PREFIX)
    return [storage.join(output_dir, TEMP_PREFIX + name) for name in sorted(names)]


def remove_stale_resume_dirs(output_dir: str) -> list[str]:
    """Remove the `.resume-<name>/` directories left alone by a run killed between publishing its job
    and removing them (published, no `.incomplete-<name>` left); returns them. Others stay: an
    unpublished job's, and a published job's whose temporary copy is left, which `tfrecorder status`
    lists as cleanup and `tfrecorder clean` removes with it."""
    listed = storage.list_dirs(output_dir)
    temporary = _names(listed, TEMP_PREFIX)
    stale = []
    for name in sorted(_names(listed, RESUME_PREFIX) - temporary):
        if job_directory.is_published(storage.join(output_dir, name)):
            path = storage.join(output_dir, RESUME_PREFIX + name)
            storage.delete_tree(path)
            stale.append(path)
    return stale


def final_dir_of(temp_dir: str) -> str:
    parent, name = temp_dir.rstrip("/").rsplit("/", 1) if storage.is_remote(temp_dir) else os.path.split(temp_dir)
    return storage.join(parent, name[len(TEMP_PREFIX):])


def describe(temp_dir: str, now: Optional[float] = None) -> IncompleteJob:
    """One incomplete job: its progress and whether a run can continue it."""
    fingerprint = read_fingerprint(temp_dir)
    final_dir = final_dir_of(temp_dir)
    manifests = committed_parts(temp_dir) if fingerprint is not None else []
    reason = ""
    if fingerprint is None:
        reason = "no fingerprint (not a resumable job, or its finalize had started)"
    elif job_directory.is_published(final_dir):
        reason = "already published: what is left is cleanup"
    elif lock_held(temp_dir):
        reason = "a run is continuing it now"
    started = (fingerprint or {}).get("created", None)
    if started is None:
        started = _modified(temp_dir)
    current = time.time() if now is None else now
    return IncompleteJob(
        path=temp_dir, name=os.path.basename(final_dir.rstrip("/")), resumable=not reason, reason=reason,
        parts_done=len(manifests), parts_total=(fingerprint or {}).get("parts_total"),
        rows_done=sum(int(m.get("rows", 0)) for m in manifests), rows_total=(fingerprint or {}).get("rows_estimate"),
        age_seconds=max(0.0, current - started), fingerprint=fingerprint)


def _modified(temp_dir: str) -> float:
    if storage.is_remote(temp_dir):
        return time.time()
    try:
        return os.stat(temp_dir).st_mtime
    except OSError:
        return time.time()


def incomplete_jobs(output_dir: str) -> list[IncompleteJob]:
    """Every incomplete job under `output_dir`, oldest name first."""
    return [describe(path) for path in incomplete_dirs(output_dir)]


def remove_temporaries(temp_dir: str) -> list[str]:
    """Before a job is continued: remove the temporary files (temporary_file_name) a killed attempt left
    beside the shards and index files it was writing (a kill skips their cleanup), so that they are
    not published with the job. Local directories only (remote writes have no temporary names)."""
    if storage.is_remote(temp_dir):
        return []
    removed = []
    for directory in (temp_dir, os.path.join(temp_dir, INDEX_DIR)):
        if not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            path = os.path.join(directory, name)
            if is_temporary_name(name) and os.path.isfile(path):
                os.remove(path)
                removed.append(path)
    return removed


def remove(temp_dir: str) -> None:
    """Remove an abandoned incomplete job (and the half-published copy of a job whose publishing never
    reached metadata.json)."""
    job_directory.abandon(temp_dir, final_dir_of(temp_dir))


def is_finished_copy(temp_dir: str) -> bool:
    """Whether the temp directory holds a metadata.json already (finalize got that far)."""
    return storage.exists(storage.join(temp_dir, METADATA_FILE))
