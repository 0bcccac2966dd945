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
