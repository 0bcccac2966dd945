import json
import os

import pytest

from tfrecorder.errors import JobBusyError
from tfrecorder.format import resume_files
from tfrecorder.sources.csv_slicing import Slice


def test_part_keys_are_stable_and_distinct():
    one, two = Slice(0, 0, 10), Slice(1, 10, 20)
    assert resume_files.part_key(one) == resume_files.part_key(Slice(0, 0, 10))
    assert resume_files.part_key(one) != resume_files.part_key(two)
    assert len(resume_files.part_key(0)) == 32


def test_the_first_committed_document_wins(tmp_path):
    path = str(tmp_path / "_parts" / "k.json")
    assert resume_files.commit_json(path, {"n": 1}) == {"n": 1}
    assert resume_files.commit_json(path, {"n": 2}) == {"n": 1}  # a replayed attempt goes on with the first
    assert resume_files.read_json(path) == {"n": 1}
    assert resume_files.read_json(str(tmp_path / "missing.json")) is None
    assert [p for p in os.listdir(tmp_path / "_parts")] == ["k.json"]  # no staging file left


def test_a_lock_is_exclusive_and_a_dead_holders_lock_is_taken_over(tmp_path):
    temp_dir = str(tmp_path / ".incomplete-job")
    lock = resume_files.JobLock(temp_dir).acquire()
    with pytest.raises(JobBusyError, match="another run"):
        resume_files.JobLock(temp_dir).acquire()
    assert resume_files.lock_held(temp_dir)
    lock.release()
    assert not resume_files.lock_held(temp_dir)
    dead = json.dumps({"host": __import__("socket").gethostname(), "pid": 2 ** 22 + 12345}).encode()
    (tmp_path / ".resume-job" / "lock").write_bytes(dead)
    assert not resume_files.lock_held(temp_dir)
    resume_files.JobLock(temp_dir).acquire().release()


def test_incomplete_jobs_report_their_progress_and_whether_they_can_be_continued(tmp_path):
    temp_dir = str(tmp_path / ".incomplete-tfrecorder-20260101-000000")
    os.makedirs(temp_dir)
    old = str(tmp_path / ".incomplete-tfrecorder-20250101-000000")
    os.makedirs(old)  # a job of a tfrecorder without fingerprints
    resume_files.write_fingerprint(temp_dir, {"created": 100.0, "rows_estimate": 50, "parts_total": 4})
    for key, rows in (("a", 10), ("b", 15)):
        resume_files.commit_json(resume_files.manifest_path(temp_dir, key), {"rows": rows})
    resume_files.commit_json(resume_files.stats_path(temp_dir, "a"), {"rows": 10})
    jobs = resume_files.incomplete_jobs(str(tmp_path))
    assert [job.name for job in jobs] == ["tfrecorder-20250101-000000", "tfrecorder-20260101-000000"]
    stale, job = jobs
    assert not stale.resumable and "no fingerprint" in stale.reason
    assert job.resumable and (job.parts_done, job.parts_total, job.rows_done, job.rows_total) == (2, 4, 25, 50)
    assert job.as_dict()["name"] == job.name and "fingerprint" not in job.as_dict()
    resume_files.remove(temp_dir)
    assert not os.path.exists(temp_dir)
    assert resume_files.incomplete_jobs(str(tmp_path / "nothing")) == []


def test_temporary_files_a_killed_attempt_left_are_removed_before_a_job_is_continued(tmp_path):
    from tfrecorder.format.file_names import temporary_file_name

    temp_dir = tmp_path / ".incomplete-job"
    (temp_dir / "index").mkdir(parents=True)
    stray = temp_dir / temporary_file_name("train-00000-of-00001.tfrecord")
    stray_index = temp_dir / "index" / temporary_file_name("train-00000-of-00001.tfrecord.index")
    kept = [temp_dir / "train-00000-of-00001.tfrecord", temp_dir / ".hidden"]
    for path in [stray, stray_index, *kept]:
        path.write_bytes(b"")
    assert sorted(resume_files.remove_temporaries(str(temp_dir))) == sorted([str(stray), str(stray_index)])
    assert all(path.exists() for path in kept) and not stray.exists()


def test_a_lock_handed_to_a_dataflow_job_is_stale_only_once_that_job_ended(tmp_path):
    temp_dir = str(tmp_path / ".incomplete-job")
    lock = resume_files.JobLock(temp_dir).acquire()
    lock.hand_over({"dataflow_job": "2026-11-26_01", "project": "p", "region": "r"})
    lock.release()  # no longer this process's to release
    holder = json.loads((tmp_path / ".resume-job" / "lock").read_bytes())
    assert holder["dataflow_job"] == "2026-11-26_01" and "pid" not in holder
    asked = []

    def ended(state):
        return lambda owner: asked.append(owner["dataflow_job"]) or state

    assert resume_files.lock_held(temp_dir)  # nobody can ask Dataflow: the job keeps its lock
    assert resume_files.lock_held(temp_dir, ended(False))
    with pytest.raises(JobBusyError, match="Dataflow job 2026-11-26_01"):
        resume_files.JobLock(temp_dir, ended(False)).acquire()
    assert not resume_files.lock_held(temp_dir, ended(True))
    resume_files.JobLock(temp_dir, ended(True)).acquire().release()
    assert asked == ["2026-11-26_01"] * 4
