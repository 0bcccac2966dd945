"""tfrecorder.format.finished_job: a finished job directory as load / inspect / verify read it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tfrecorder.format.finished_job import JobInfo


def test_a_converted_job_as_its_readers_see_it(converted):
    job = JobInfo.read(converted["tfrecord_dir"])
    metadata = json.loads((Path(converted["tfrecord_dir"]) / "metadata.json").read_text())
    assert job.splits == list(metadata["splits"]) and not job.legacy and job.compression is None
    assert job.split_name("train") == "TRAIN"
    assert job.image_prefixes == ["image"] and job.label_columns == ["label"]
    vocabulary = metadata["vocabularies"]["label"]
    assert job.label_name("label", 0) == vocabulary[0] and job.label_name("label", -1) == "<unknown>"
    for split, info in metadata["splits"].items():
        assert [Path(p).name for p in job.shard_paths(split)] == [s["file"] for s in info["shards"]]
        assert sum(1 for _ in job.iter_records(split)) == info["records"]


def test_unknown_splits_and_unfinished_directories_are_bad_input(converted, tmp_path):
    job = JobInfo.read(converted["tfrecord_dir"])
    with pytest.raises(ValueError, match="split 'holdout' is not in"):
        job.split_name("holdout")
    with pytest.raises(ValueError, match="not a finished tfrecorder job directory"):
        JobInfo.read(str(tmp_path))
