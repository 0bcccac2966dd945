import os

import pytest

import tfrecorder
from tfrecorder.format import resume_files
from tfrecorder.job_status import clean_incomplete, describe_age, incomplete_jobs, parse_age, status_lines


def incomplete(output_dir, name, age_seconds, parts=0):
    temp_dir = str(output_dir / f".incomplete-{name}")
    os.makedirs(temp_dir)
    import time

    resume_files.write_fingerprint(temp_dir, {"created": time.time() - age_seconds, "rows_estimate": 100,
                                              "parts_total": 4})
    for index in range(parts):
        resume_files.commit_json(resume_files.manifest_path(temp_dir, str(index)), {"rows": 25})
    return temp_dir


def test_ages_are_read_and_written_in_units():
    assert parse_age("90s") == 90 and parse_age("30m") == 1800 and parse_age("12h") == 43200
    assert parse_age("7d") == 7 * 86400 and parse_age(5) == 5.0 and parse_age(None) is None
    with pytest.raises(ValueError, match="expected an age such as"):
        parse_age("soon")
    assert describe_age(30) == "30s" and describe_age(7200) == "2.0h"


def test_status_lists_progress_and_clean_removes_old_unheld_jobs(tmp_path):
    assert status_lines(incomplete_jobs(tmp_path)) == ["no incomplete jobs"]
    old = incomplete(tmp_path, "a-20260101-000000", 3 * 86400, parts=2)
    new = incomplete(tmp_path, "b-20260102-000000", 60)
    held = incomplete(tmp_path, "c-20260103-000000", 9 * 86400)
    lock = resume_files.JobLock(held).acquire()
    jobs = tfrecorder.incomplete_jobs(str(tmp_path))
    lines = status_lines(jobs)
    assert lines[0].startswith("a-20260101-000000: parts 2 / 4, rows 50 / ~100, age 3.0d, resumable")
    assert lines[2].endswith("not resumable: a run is continuing it now")
    removed = clean_incomplete(tmp_path, "1d")
    assert [job.path for job in removed] == [old]
    assert os.path.exists(new) and os.path.exists(held)
    lock.release()
    assert {job.path for job in tfrecorder.clean_incomplete(tmp_path)} == {new, held}
    assert os.listdir(tmp_path) == []
