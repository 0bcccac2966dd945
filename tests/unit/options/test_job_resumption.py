import logging
import os

import pytest

from tfrecorder.errors import JobBusyError
from tfrecorder.format import resume_files
from tfrecorder.options.job_resumption import check_resume, choose_job_dir

PRINT = {"version": 1, "tfrecorder_version": "x", "source": {"files": []}, "options": {"num_shards": 0}}


def test_resume_takes_auto_true_or_false():
    assert check_resume("AUTO") == "auto" and check_resume(True) is True and check_resume(False) is False
    with pytest.raises(ValueError, match="resume must be 'auto', True or False"):
        check_resume("yes")


def test_a_new_job_is_locked_before_its_fingerprint_is_written(tmp_path):
    job = choose_job_dir(str(tmp_path), "t", PRINT, "auto", 10, None)
    assert not job.resumed and job.resumed_entry() == {}
    assert resume_files.lock_held(job.temp_dir) and resume_files.read_fingerprint(job.temp_dir)["rows_estimate"] == 10
    job.release()
    assert not resume_files.lock_held(job.temp_dir)


def test_auto_continues_the_matching_job_and_passes_over_the_others(tmp_path, caplog):
    first = choose_job_dir(str(tmp_path), "t", PRINT, "auto", 10, None)
    resume_files.commit_json(resume_files.manifest_path(first.temp_dir, "k"), {"rows": 7})
    first.release()
    other = {**PRINT, "options": {"num_shards": 2}}
    with caplog.at_level(logging.INFO, logger="tfrecorder"):
        again = choose_job_dir(str(tmp_path), "t", PRINT, "auto", 10, None)
    assert again.resumed and again.temp_dir == first.temp_dir
    assert again.resumed_entry() == {"resumed": {"parts_carried_over": 1, "rows_carried_over": 7}}
    with caplog.at_level(logging.WARNING, logger="tfrecorder"):  # held by a live run: auto starts a new job
        busy = choose_job_dir(str(tmp_path), "t", PRINT, "auto", 10, None)
    assert not busy.resumed and "another run is working on it" in caplog.text
    with pytest.raises(JobBusyError):
        choose_job_dir(str(tmp_path), "t", PRINT, True, 10, None)
    again.release()
    busy.release()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tfrecorder"):
        fresh = choose_job_dir(str(tmp_path), "t", other, "auto", 10, None)
    assert not fresh.resumed and "option num_shards differs (0 then, 2 now); starting a new job" in caplog.text
    fresh.release()
    newest = choose_job_dir(str(tmp_path), "t", PRINT, False, 10, None)
    assert not newest.resumed and len(resume_files.incomplete_dirs(str(tmp_path))) == 4
    newest.release()


def test_resume_true_fails_when_nothing_matches_and_for_jobs_that_cannot_resume(tmp_path):
    with pytest.raises(ValueError, match="resume=True: no incomplete job"):
        choose_job_dir(str(tmp_path), "t", PRINT, True, 10, None)
    with pytest.raises(ValueError, match="cannot be continued"):
        choose_job_dir(str(tmp_path), "t", None, True, 10, None)
    plain = choose_job_dir(str(tmp_path), "t", None, "auto", 10, None)
    assert plain.lock is None and resume_files.read_fingerprint(plain.temp_dir) is None


def test_a_job_killed_after_publishing_is_not_continued(tmp_path):
    job = choose_job_dir(str(tmp_path), "t", PRINT, "auto", 10, None)
    job.release()
    os.makedirs(job.final_dir)
    with open(os.path.join(job.final_dir, "metadata.json"), "w") as stream:
        stream.write("{}")  # published (gs:// keeps the temporary copy until it is removed)
    again = choose_job_dir(str(tmp_path), "t", PRINT, "auto", 10, None)
    assert not again.resumed and again.temp_dir != job.temp_dir
    again.release()
    assert resume_files.describe(job.temp_dir).reason == "already published: what is left is cleanup"
