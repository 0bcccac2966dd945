"""Job-directory file names: built in one place and recognised by the same rules readers use."""
from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tfrecorder.format import file_names
from tfrecorder.format.file_names import JobName, ShardName


def test_shard_names_follow_the_documented_pattern():
    assert ShardName("TRAIN", 0, 4).file_name == "train-00000-of-00004.tfrecord"
    assert ShardName("VALIDATION", 12, 100, "gzip").file_name == "validation-00012-of-00100.tfrecord.gz"


@given(st.sampled_from(["TRAIN", "VALIDATION", "TEST"]), st.integers(0, 10**6), st.integers(1, 10**6),
       st.sampled_from([None, "gzip"]))
def test_shard_names_parse_back(split, index, count, compression):
    shard = ShardName(split, index, count, compression)
    assert ShardName.parse(shard.file_name) == shard


@pytest.mark.parametrize("name", [
    "train-0-of-2.tfrecord", "TRAIN-00000-of-00001.tfrecord", "train-00000-of-00001.tfrecords", "x.tfrecord",
    "unassigned-00000-of-00001.tfrecord", "index/train-00000-of-00001.tfrecord", "train-00000-of-00001.tfrecord.index",
    "train-00000-of-00001", "discarded-data-00000-of-00001"])
def test_other_names_are_no_shards(name):
    assert ShardName.parse(name) is None


def test_shard_like_names_are_recognised_and_the_other_files_are_not():
    shards = [ShardName("TEST", 3, 7, c).file_name for c in (None, "gzip")] + ["train-0-of-2", "x.tfrecord"]
    others = [file_names.METADATA_FILE, file_names.DISCARD_FILE,
              "label_map.pbtxt", "dataset_info.json"]
    assert all(ShardName.looks_like(name) for name in shards)
    assert not any(ShardName.looks_like(name) for name in others)


def test_index_names_are_built_and_recognised():
    name = file_names.index_file_name("gs://b/job/train-00000-of-00004.tfrecord")
    assert name == "index/train-00000-of-00004.tfrecord.index"
    assert file_names.is_index_file(name) and not file_names.is_index_file("train-00000-of-00004.tfrecord")


@pytest.mark.parametrize("label, expected", [
    ("My Job", "my-job"), ("../../etc/passwd", "etc-passwd"), ("a/b\\c", "a-b-c"), ("", "tfrecorder"),
    (None, "tfrecorder"), ("123", "job-123"), ("x" * 80, "x" * 40), ("ünï", "n"), ("ü", "job"),
])
def test_labels_are_sanitised(label, expected):
    assert file_names.sanitize_job_label(label) == expected


NOON = dt.datetime(2024, 5, 6, 12, 0, 7, tzinfo=dt.timezone.utc)


def test_job_names_are_label_and_utc_second():
    assert JobName.new("My Job", NOON).name == "my-job-20240506-120007"
    assert JobName.new("x", NOON).with_suffix("2").name == "x-20240506-120007-2"
    assert JobName.new(None, NOON).with_suffix("a1b2c3").name == "tfrecorder-20240506-120007-a1b2c3"


@given(st.text(max_size=50), st.datetimes(min_value=dt.datetime(1000, 1, 1), timezones=st.just(dt.timezone.utc)),
       st.one_of(st.none(), st.integers(2, 9999).map(str), st.binary(min_size=3, max_size=3).map(bytes.hex)))
def test_job_names_parse_back(label, started, suffix):
    job = JobName.new(label, started.replace(microsecond=0))
    job = job.with_suffix(suffix) if suffix else job
    assert JobName.parse(job.name) == job


@pytest.mark.parametrize("name", ["tfrecorder", "job-2024-05-06", ".incomplete-x-20240506-120007", "X-20240506-120007",
                                  "x-20240506-120007-", "x-20240506-1200"])
def test_other_names_are_no_job_names(name):
    assert JobName.parse(name) is None


def test_attempt_names_are_fresh_each_time():
    """A retried bundle must never reuse (and so overwrite) a name a committed attempt wrote."""
    pieces = {file_names.piece_file_name("TRAIN") for _ in range(100)}
    parts = {file_names.discard_part_name() for _ in range(100)}
    assert len(pieces) == len(parts) == 100
    assert all(name.startswith("train-") and name.endswith(file_names.PART_SUFFIX) for name in pieces)
    temporary = file_names.temporary_file_name("train-00000-of-00001.tfrecord")
    assert temporary.startswith(".train-00000-of-00001.tfrecord.") and temporary != file_names.temporary_file_name(
        "train-00000-of-00001.tfrecord")


def test_versions_are_named_after_the_timestamp_and_parse_back():
    from tfrecorder.format.file_names import keys_file_name

    version = JobName.new("pets", NOON, version=3)
    assert version.name == "pets-20240506-120007-v3"
    assert version.with_suffix("2").name == "pets-20240506-120007-v3-2"
    assert JobName.parse("pets-20240506-120007-v3-a1b2c3") == version.with_suffix("a1b2c3")
    assert JobName.parse("pets-20240506-120007-v12").version == 12
    assert JobName.parse("pets-20240506-120007").version is None
    assert sorted(["pets-20240506-120007-v2", "pets-20240506-110000", "pets-20240507-000000-v3"]) == [
        "pets-20240506-110000", "pets-20240506-120007-v2", "pets-20240507-000000-v3"]
    assert keys_file_name("pets-20240506-120007-v2", "train-00001-of-00002.tfrecord") == \
        "keys/pets-20240506-120007-v2.train-00001-of-00002.tfrecord.keys"


def test_join_part_names_are_fresh_per_part_and_name_their_bucket():
    first, second = file_names.join_part_name(7), file_names.join_part_name(7)
    assert first != second and first.startswith("join-0007-") and first.endswith(file_names.PART_SUFFIX)
