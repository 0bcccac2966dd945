"""Job-directory file names: built in one place and recognised by the same rules readers use."""
from __future__ import annotations

from tfrecorder.format import file_names


def test_shard_names_follow_the_documented_pattern():
    assert file_names.shard_file_name("TRAIN", 0, 4, None) == "train-00000-of-00004.tfrecord"
    assert file_names.shard_file_name("validation", 12, 100, "gzip") == "validation-00012-of-00100.tfrecord.gz"


def test_shard_like_names_are_recognised_and_the_other_files_are_not():
    shards = [file_names.shard_file_name("test", 3, 7, c) for c in (None, "gzip")] + ["train-0-of-2", "x.tfrecord"]
    others = [file_names.METADATA_FILE, file_names.DISCARD_FILE,
              "label_map.pbtxt", "dataset_info.json"]
    assert all(file_names.SHARD_LIKE.search(name) for name in shards)
    assert not any(file_names.SHARD_LIKE.search(name) for name in others)


def test_attempt_names_are_fresh_each_time():
    """A retried bundle must never reuse (and so overwrite) a name a committed attempt wrote."""
    pieces = {file_names.piece_file_name("TRAIN") for _ in range(100)}
    parts = {file_names.discard_part_name() for _ in range(100)}
    assert len(pieces) == len(parts) == 100
    assert all(name.startswith("train-") and name.endswith(file_names.PART_SUFFIX) for name in pieces)
    temporary = file_names.temporary_file_name("train-00000-of-00001.tfrecord")
    assert temporary.startswith(".train-00000-of-00001.tfrecord.") and temporary != file_names.temporary_file_name(
        "train-00000-of-00001.tfrecord")
