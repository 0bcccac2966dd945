"""Choosing the job directory of a conversion: a new one, or the matching incomplete job to continue
(issue 27, `resume="auto" | True | False`).

`auto` continues the newest incomplete job under output_dir whose fingerprint equals this run's
(tfrecorder.options.job_fingerprint) and that no live run is working on, else starts a new job,
logging one line per incomplete job it did not continue and why. `True` fails (ValueError) when none
matches; `False` starts a new job and leaves the others alone. The chosen directory's lock
(tfrecorder.format.resume_files.JobLock) is taken before anything else is written into it, so two runs
never work on one job: the second stops with JobBusyError. A Dataflow job holds the lock itself once
submitted (JobDirectory.hand_over); `job_ended` (the launch's) tells whether such a job has ended.
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Optional, Union

from tfrecorder.format import job_directory, resume_files
from tfrecorder.options.job_fingerprint import mismatch, with_progress_facts

logger = logging.getLogger("tfrecorder")

RESUME_CHOICES = ("auto", True, False)


def check_resume(resume: Union[str, bool]) -> Union[str, bool]:
    if isinstance(resume, str) and resume.lower() == "auto":
        return "auto"
    if isinstance(resume, bool):
        return resume
    raise ValueError(f"resume must be 'auto', True or False, got {resume!r}")


@dataclasses.dataclass
class JobDirectory:
    """The directory a conversion writes: new or continued, with its lock held (None: not resumable)."""

    final_dir: str
    temp_dir: str
    lock: Optional[resume_files.JobLock] = None
    resumed: bool = False
    parts_done: int = 0
    rows_done: int = 0

    def release(self) -> None:
        if self.lock is not None:
            self.lock.release()

    def hand_over(self, owner: Optional[dict]) -> None:
        """The job now runs elsewhere (`owner`: {"dataflow_job": id, ...}) and holds the lock; None (a dry
        run or a template: nothing runs) releases it."""
        if self.lock is not None:
            self.lock.release() if owner is None else self.lock.hand_over(owner)

    def resumed_entry(self) -> dict:
        """metadata.json's `resumed` entry: only in a continued job."""
        return {"resumed": {"parts_carried_over": self.parts_done, "rows_carried_over": self.rows_done}} \
            if self.resumed else {}


def find_matching(output_dir: str, fingerprint: dict, resume: Union[str, bool],
                  job_ended: Optional[resume_files.JobEnded] = None) -> tuple[Optional[str], list[str]]:
    """(the incomplete job to continue or None, one line per incomplete job passed over)."""
    passed, matching = [], []
    for temp_dir in resume_files.incomplete_dirs(output_dir):
        old = resume_files.read_fingerprint(temp_dir)
        if old is None:
            continue  # not resumable (a job of an older tfrecorder, or reserved a moment ago)
        name = temp_dir.rstrip("/").rsplit("/", 1)[-1]
        if job_directory.is_published(resume_files.final_dir_of(temp_dir)):
            continue
        reason = mismatch(old, fingerprint)
        if reason is not None:
            passed.append(f"not continuing the incomplete job {name}: {reason}")
        elif resume == "auto" and resume_files.lock_held(temp_dir, job_ended):
            passed.append(f"not continuing the incomplete job {name}: another run is working on it")
        else:
            matching.append(temp_dir)
    return (matching[-1] if matching else None), passed


def choose_job_dir(output_dir: str, job_label: Optional[str], fingerprint: Optional[dict],
                   resume: Union[str, bool], rows_estimate: int, parts_total: Optional[int],
                   version: Optional[int] = None, job_ended: Optional[resume_files.JobEnded] = None) -> JobDirectory:
    """The job directory to write (its lock taken); `fingerprint` None: the job is not resumable (it is
    reserved as before, without fingerprint or lock). `version`: an append's version number (its name).
    `job_ended`: whether a Dataflow job holding a lock has ended (the launch asks Dataflow)."""
    if fingerprint is None:
        if resume is True:
            raise ValueError("resume=True: this conversion cannot be continued (only local and Dataflow "
                             "runs can)")
        return JobDirectory(*job_directory.reserve_job_dir(output_dir, job_label, version))
    resume_files.remove_stale_resume_dirs(output_dir)  # left by a run killed right after publishing
    if resume is not False:
        temp_dir, passed = find_matching(output_dir, fingerprint, resume, job_ended)
        if temp_dir is None and resume is True:
            raise ValueError(f"resume=True: no incomplete job under {output_dir} matches this conversion"
                             + (f" ({'; '.join(passed)})" if passed else ""))
        for line in passed:
            logger.warning("%s; starting a new job", line) if temp_dir is None else logger.info("%s", line)
        if temp_dir is not None:
            lock = resume_files.JobLock(temp_dir, job_ended).acquire()
            resume_files.remove_temporaries(temp_dir)  # a killed assembly's half-written shard
            manifests = resume_files.committed_parts(temp_dir)
            rows = sum(int(manifest.get("rows", 0)) for manifest in manifests)
            logger.info("continuing the incomplete job %s: %d part(s), %d row(s) already done", temp_dir,
                        len(manifests), rows)
            return JobDirectory(resume_files.final_dir_of(temp_dir), temp_dir, lock, True, len(manifests), rows)
    final_dir, temp_dir = job_directory.reserve_job_dir(output_dir, job_label, version)
    lock = resume_files.JobLock(temp_dir).acquire()  # before the fingerprint: no other run can take the job
    resume_files.write_fingerprint(temp_dir, with_progress_facts(fingerprint, rows_estimate, parts_total))
    return JobDirectory(final_dir, temp_dir, lock)
