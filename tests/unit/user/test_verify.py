"""tfrecorder.verify on intact and deliberately damaged copies of a converted job: the job as a whole (every
listed shard, split totals, files metadata.json does not list); one shard's own checks are in test_shard_checks.py."""
from __future__ import annotations

import shutil

import pytest

import tfrecorder
from support.jobbuilder import index_of, largest_shard, shard_files


def test_intact_job_passes(job_copy):
    report = tfrecorder.verify(str(job_copy))
    assert report.ok, report
    assert sorted(s.file for s in report.shards) == sorted(p.name for p in shard_files(job_copy))
    assert all(s.records == s.expected_records for s in report.shards)
    assert "OK" in repr(report) and not report.all_problems


def test_missing_shard(job_copy):
    shard = largest_shard(job_copy)
    shard.unlink()
    report = tfrecorder.verify(str(job_copy))
    assert not report.ok
    assert [p for s in report.shards for p in s.problems if "missing shard file" in p]
    assert any("readable records, metadata.json says" in p for p in report.problems)  # the split total


def test_extra_shard(job_copy):
    shard = largest_shard(job_copy)
    extra = job_copy / shard.name.replace("-00000-", "-00007-")
    shutil.copy(shard, extra)
    report = tfrecorder.verify(str(job_copy))
    assert not report.ok
    (bad,) = [s for s in report.shards if not s.ok]
    assert bad.file == extra.name and bad.split is None and "not listed in metadata.json" in bad.problems[0]


def test_other_files_are_not_shards(job_copy):
    (job_copy / "notes.txt").write_text("hello")
    assert tfrecorder.verify(str(job_copy)).ok


def test_not_a_job_directory(tmp_path):
    with pytest.raises(ValueError, match="not a finished tfrecorder job directory"):
        tfrecorder.verify(str(tmp_path))


def test_missing_and_unlisted_index_files(job_copy):
    shard = largest_shard(job_copy)
    index = index_of(job_copy, shard)
    index.rename(job_copy / "index" / "stray-00000-of-00001.tfrecord.index")
    report = tfrecorder.verify(str(job_copy))
    problems = report.all_problems
    assert any(f"index file index/{shard.name}.index is missing" in p for p in problems), problems
    assert any("index file not listed in metadata.json" in p for p in problems), problems
