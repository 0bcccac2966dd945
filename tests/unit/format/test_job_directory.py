from __future__ import annotations

import os

import pytest

from tfrecorder.format import job_directory
from tfrecorder.format.metadata_file import JobMetadata


def test_reservation_gives_distinct_directories(tmp_path):
    first = job_directory.reserve_job_dir(str(tmp_path), "same")
    second = job_directory.reserve_job_dir(str(tmp_path), "same")
    assert first[0] != second[0]
    assert all(os.path.isdir(temp) for _final, temp in (first, second))
    assert all(os.path.basename(temp).startswith(".incomplete-") for _final, temp in (first, second))
    assert all(os.path.dirname(final) == str(tmp_path) for final, _temp in (first, second))


def test_finalize_renames_and_metadata_marks_completion(tmp_path):
    final, temp = job_directory.reserve_job_dir(str(tmp_path), "job")
    with pytest.raises(ValueError, match="not a finished"):
        JobMetadata.read(temp).document
    JobMetadata({"rows_in": 3}).write(temp)
    job_directory.finalize(temp, final)
    assert not os.path.exists(temp)
    assert JobMetadata.read(final).document == {"rows_in": 3}


@pytest.mark.parametrize("remote", [False, True])
def test_a_resumable_jobs_fingerprint_stays_until_publishing_and_is_not_published(remote, tmp_path, request):
    """_resume/ (fingerprint, lock) is in the temporary directory up to the moment the job is visible,
    so a run killed before that is continued; the published directory never keeps it."""
    from tfrecorder.io import storage

    if remote:
        gcs = request.getfixturevalue("gcs")
        gcs.bucket("tfr-publish")
        final, temp = "gs://tfr-publish/out/job", "gs://tfr-publish/out/.incomplete-job"
    else:
        final, temp = job_directory.reserve_job_dir(str(tmp_path), "job")
    storage.write_bytes(storage.join(temp, "_resume", "fingerprint.json"), b"{}")
    storage.write_bytes(storage.join(temp, "train-00000-of-00001.tfrecord"), b"records")
    JobMetadata({"rows_in": 1}).write(temp)
    job_directory.finalize(temp, final)
    assert sorted(path.rsplit("/", 1)[-1] for path in storage.list_files(final)) == [
        "metadata.json", "train-00000-of-00001.tfrecord"]
    assert storage.list_files(temp) == []
    if not remote:  # published, then killed before _resume/ was removed: finalizing again removes it
        storage.write_bytes(storage.join(final, "_resume", "lock"), b"x")
        job_directory.finalize(temp, final)
        assert not os.path.exists(os.path.join(final, "_resume"))
