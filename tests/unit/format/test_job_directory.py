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
def test_a_resumable_jobs_fingerprint_is_beside_the_temporary_directory_and_never_published(remote, tmp_path, request):
    """The fingerprint and lock are in `.resume-<name>/`, outside what publishing renames or copies, so
    a published job never holds them; finalizing removes them after publishing. A run killed between
    the two leaves them with a published job: the next resumable run's scan removes them."""
    from tfrecorder.format import resume_files
    from tfrecorder.io import storage

    if remote:
        gcs = request.getfixturevalue("gcs")
        gcs.bucket("tfr-publish")
        output = "gs://tfr-publish/out"
        final, temp = output + "/job", output + "/.incomplete-job"
    else:
        output = str(tmp_path)
        final, temp = job_directory.reserve_job_dir(output, "job")
    resume = job_directory.resume_dir_for(temp)
    assert resume == storage.join(output, ".resume-" + final.rstrip("/").rsplit("/", 1)[-1])
    storage.write_bytes(storage.join(resume, "fingerprint.json"), b"{}")
    storage.write_bytes(storage.join(temp, "train-00000-of-00001.tfrecord"), b"records")
    JobMetadata({"rows_in": 1}).write(temp)
    job_directory.publish(temp, final)
    storage.delete_tree(temp)  # remotely, its temporary copy removed too: then killed
    assert sorted(path.rsplit("/", 1)[-1] for path in storage.list_files(final)) == [
        "metadata.json", "train-00000-of-00001.tfrecord"]
    storage.write_bytes(storage.join(output, ".resume-unpublished", "lock"), b"{}")  # a run starting
    assert [path.rstrip("/") for path in resume_files.remove_stale_resume_dirs(output)] == [resume.rstrip("/")]
    assert storage.list_files(resume) == []
    assert storage.list_files(storage.join(output, ".resume-unpublished")) != []  # not published: kept
    storage.write_bytes(storage.join(resume, "lock"), b"{}")
    job_directory.finalize(temp, final)  # finalizing again, or finishing normally: nothing is left
    assert storage.list_files(temp) == [] and storage.list_files(resume) == []
