"""The job directory: reserving, publishing and finalising it (metadata.json last: tfrecorder.format.metadata_file).

A conversion writes into a hidden temporary directory (`.incomplete-<name>`) and, as its very last
step, publishes it as `output_dir/<job_label>-<UTC timestamp>[-N]/`. A locally finished directory
appears by one atomic rename; on object stores the files are copied in parallel, `metadata.json` last:
it is what marks a directory complete. Readers (`load`, `verify`) refuse directories without it, and
anything under an `.incomplete-` prefix is the leftover of a failed or cancelled job.

A job directory's own files are not trusted to name paths elsewhere: `job_file` resolves every file
name metadata.json (or a TFRecorder 2.0 listing) gives, and refuses one that leaves the directory.
"""
from __future__ import annotations

import os
from typing import Any, Optional

from tfrecorder.errors import CorruptDataError
from tfrecorder.format.file_names import METADATA_FILE, RESUME_PREFIX, TEMP_PREFIX, JobName
from tfrecorder.io import storage


def _split(path: str) -> tuple[str, str]:
    return path.rstrip("/").rsplit("/", 1) if storage.is_remote(path) else os.path.split(path.rstrip("/"))


def temp_dir_for(final_dir: str) -> str:
    parent, name = _split(final_dir)
    return storage.join(parent, TEMP_PREFIX + name)


def resume_dir_for(temp_dir: str) -> str:
    """`.resume-<name>/` beside `.incomplete-<name>/`: a resumable job's fingerprint and lock. It is not
    inside the temporary directory, so the rename that publishes the job never carries it along."""
    parent, name = _split(temp_dir)
    return storage.join(parent, RESUME_PREFIX + name[len(TEMP_PREFIX):])


def reserve_job_dir(output_dir: str, label: Optional[str], version: Optional[int] = None) -> tuple[str, str]:
    """Pick an unused job directory name; returns (final_dir, temp_dir) and creates temp_dir locally.

    Locally the temporary directory is created with mkdir, which is atomic, so two runs starting in the
    same second get different names. Object stores have no atomic mkdir, so remote names end in
    6 random hex digits instead. A version made by an append (`version` 2, 3, ...) is named
    `<label>-<timestamp>-v<version>`.
    """
    base = JobName.new(label, version=version)
    if storage.is_remote(output_dir):
        final_dir = storage.join(output_dir, base.with_suffix(os.urandom(3).hex()).name)
        return final_dir, temp_dir_for(final_dir)
    os.makedirs(output_dir, exist_ok=True)
    for attempt in range(1, 10_000):
        name = (base if attempt == 1 else base.with_suffix(str(attempt))).name
        final_dir = os.path.join(output_dir, name)
        temp_dir = temp_dir_for(final_dir)
        if os.path.exists(final_dir):
            continue
        try:
            os.mkdir(temp_dir)
        except FileExistsError:
            continue
        if os.path.exists(final_dir):  # finished by a concurrent run between our checks
            os.rmdir(temp_dir)
            continue
        return final_dir, temp_dir
    raise RuntimeError(f"could not find a free job directory name under {output_dir}")


def is_published(final_dir: str) -> bool:
    """True once `final_dir` holds its metadata.json: the job is finished and visible."""
    return storage.exists(storage.join(final_dir, METADATA_FILE))


def publish(temp_dir: str, final_dir: str) -> None:
    """Make the finished job visible: one rename locally; remotely, parallel server-side copies, with
    metadata.json copied last (only once everything else is in place). The temporary objects stay
    until `remove_temp`, so running this again after a failure part-way redoes the same copies.

    A resumable job's fingerprint and lock (`resume_dir_for`) stay beside the temporary directory until
    the job is published, so a run killed at any moment before that is continued by the next."""
    if not storage.is_remote(final_dir):
        if os.path.exists(final_dir):
            raise FileExistsError(f"job directory {final_dir} already exists; refusing to overwrite it")
        os.rename(temp_dir, final_dir)
        return
    metadata = storage.join(temp_dir, METADATA_FILE)
    files = [path for path in storage.list_files(temp_dir) if path != metadata]
    prefix = len(temp_dir.rstrip("/"))
    storage.copy_files([(path, final_dir.rstrip("/") + path[prefix:]) for path in files])
    storage.copy(metadata, storage.join(final_dir, METADATA_FILE))


def remove_temp(temp_dir: str) -> None:
    """Remove the temporary directory and everything left in it, then its fingerprint and lock (missing
    is fine): a run killed in between leaves a `.resume-` directory alone, which `stale_resume_dirs` finds."""
    storage.delete_tree(temp_dir)
    storage.delete_tree(resume_dir_for(temp_dir))


def abandon(temp_dir: str, final_dir: str) -> None:
    """After a failed run: remove the temporary directory, and a job directory whose publishing
    started but never reached metadata.json (its name was reserved for this run alone). The fingerprint
    goes first: a run killed part-way leaves a temporary directory that is not resumable, which
    `tfrecorder clean` removes, never a fingerprint of a job that is gone."""
    storage.delete_tree(resume_dir_for(temp_dir))
    remove_temp(temp_dir)
    if not is_published(final_dir):
        storage.delete_tree(final_dir)


def finalize(temp_dir: str, final_dir: str) -> None:
    """Publish the job directory (unless an earlier attempt already did), then remove what is left of
    the temporary one. Safe to run again after it failed or finished."""
    if not is_published(final_dir):
        publish(temp_dir, final_dir)
    remove_temp(temp_dir)


def job_file(tfrecord_dir: str, name: Any) -> str:
    """The path of `name`, a file of the job directory named as metadata.json names its files (relative,
    '/'-separated: `train-00000-of-00004.tfrecord`, `index/train-00000-of-00004.tfrecord.index`).

    CorruptDataError for a name that could lead anywhere else: absolute, with a `..`, `.` or empty
    part, a drive or URL (`:`), a backslash, or (local directories) a symbolic link resolving outside
    the directory. A damaged or hostile job directory thus makes its readers read nothing outside it.
    """
    parts = name.split("/") if isinstance(name, str) else [""]
    if any(part in ("", ".", "..") or "\\" in part or ":" in part or "\0" in part for part in parts):
        raise CorruptDataError(f"{tfrecord_dir}: {METADATA_FILE} names the file {name!r}, which is not a relative "
                               "path inside the job directory; nothing outside it is read")
    path = storage.join(tfrecord_dir, *parts)
    if not storage.is_remote(path) and _through_link(tfrecord_dir, parts):
        root, target = os.path.realpath(tfrecord_dir), os.path.realpath(path)
        if os.path.commonpath([root, target]) != root:
            raise CorruptDataError(f"{tfrecord_dir}: {name} is a symbolic link to {target}, outside the job "
                                   "directory; nothing outside it is read")
    return path


def _through_link(directory: str, parts: list[str]) -> bool:
    """Whether a local path below `directory` passes a symbolic link: one lstat per part, so the
    thousands of names of a large job cost little (resolving each whole path would not)."""
    path = directory
    for part in parts:
        path = os.path.join(path, part)
        if os.path.islink(path):
            return True
    return False
