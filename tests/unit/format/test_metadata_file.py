"""tfrecorder.format.metadata_file: the metadata.json document of a finished job, built from counts, written and read back."""
from __future__ import annotations

import json

import pytest

from tfrecorder import __version__
from tfrecorder.options.job_config import JobConfig
from tfrecorder.format.metadata_file import JobMetadata, reason_category, record_index_note
from tfrecorder.core.schema import Schema
from tfrecorder.sources.csv_source import CsvRows


def config(compression=None, extra=None) -> JobConfig:
    return JobConfig(source=CsvRows("data.csv", 100, 10), schema=Schema({"image_uri": "ImageUri", "label": "StringLabel"}),
                     columns=("image_uri", "label"), base_dir="", final_dir="out/job", temp_dir="out/.incomplete-job",
                     job_name="job", runner="DirectRunner", split_ratios=(0.8, 0.1, 0.1), num_shards=0,
                     max_shard_bytes=1 << 20, compression=compression, image_size=None, validate="decode",
                     extra_metadata=extra or {})


def build_metadata(*args, **kwargs) -> dict:
    return dict(JobMetadata.build(*args, **kwargs).document)


SHARDS = [{"split": "TRAIN", "index": 1, "file": "train-00001-of-00002.tfrecord", "records": 2, "bytes": 20,
           "index_file": "index/train-00001-of-00002.tfrecord.index"},
          {"split": "TRAIN", "index": 0, "file": "train-00000-of-00002.tfrecord", "records": 3, "bytes": 30,
           "index_file": "index/train-00000-of-00002.tfrecord.index"},
          {"split": "TEST", "index": 0, "file": "test-00000-of-00001.tfrecord", "records": 1, "bytes": 10}]


def test_counts_splits_and_shards():
    metadata = build_metadata(config(extra={"task": "demo"}), SHARDS, {"label": ["cat", "dog"]}, rows_in=8,
                              discard_reasons={"missing file": 1, "corrupt image": 1}, unknown_labels={"TEST": 1})
    assert metadata["tfrecorder_version"] == __version__ and metadata["format_version"] == 1
    assert (metadata["rows_in"], metadata["records_written"], metadata["discarded"]) == (8, 6, 2)
    assert list(metadata["splits"]) == ["TRAIN", "TEST"]  # split order, empty splits left out
    train = metadata["splits"]["TRAIN"]
    assert [s["file"] for s in train["shards"]] == ["train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"]
    assert (train["records"], train["bytes"], metadata["splits"]["TEST"]["unknown_labels"]) == (5, 50, 1)
    assert "index_file" not in metadata["splits"]["TEST"]["shards"][0]
    assert metadata["features"]["label"]["dtype"] == "int64" and metadata["vocabularies"] == {"label": ["cat", "dog"]}
    assert metadata["task"] == "demo" and "rows_written" not in metadata


def test_rows_that_are_neither_written_nor_discarded_stop_the_job():
    with pytest.raises(RuntimeError, match="row accounting failed: 9 rows in, 6 written \\+ 2 discarded"):
        build_metadata(config(), SHARDS, {}, rows_in=9, discard_reasons={"missing file": 2}, unknown_labels={})
    detection = build_metadata(config(), SHARDS, {}, rows_in=12, discard_reasons={"invalid box": 2},
                               unknown_labels={}, rows_written=10)  # 6 images hold 10 box rows
    assert (detection["records_written"], detection["rows_written"]) == (6, 10)


def test_index_note_and_reason_categories():
    assert record_index_note(None)["written"] is True and record_index_note(None)["directory"] == "index"
    gzip = record_index_note("gzip")
    assert gzip["written"] is False and "gzip" in gzip["reason"]
    assert build_metadata(config("gzip"), [], {}, 0, {}, {})["record_index"] == gzip
    assert reason_category("missing file: /data/a.jpg") == "missing file"
    assert reason_category("corrupt image") == "corrupt image"
    assert reason_category("duplicate of gs://b/a.jpg") == reason_category("duplicate of /x.png") == "duplicate of"


def test_image_kinds_are_recorded_only_when_given():
    kinds = {"image": {"format": ["jpeg"], "channels": [3]}}
    assert build_metadata(config(), [], {}, 0, {}, {}, images=kinds)["images"] == kinds
    assert "images" not in build_metadata(config(), [], {}, 0, {}, {})


def test_metadata_is_written_as_indented_json_and_reads_back(tmp_path):
    metadata = JobMetadata.build(config(), SHARDS, {"label": ["cat", "dog"]}, rows_in=6, discard_reasons={},
                                 unknown_labels={})
    with pytest.raises(ValueError, match="not a finished tfrecorder job directory \\(no metadata.json\\)"):
        JobMetadata.read(str(tmp_path))
    metadata.write(str(tmp_path))
    assert (tmp_path / "metadata.json").read_bytes() == json.dumps(metadata.document, indent=2).encode("utf-8")
    assert JobMetadata.read(str(tmp_path)) == metadata == JobMetadata.from_json(metadata.to_json())


def test_updated_entries_keep_their_place_and_new_ones_go_last():
    metadata = JobMetadata.build(config(extra={"task": "x"}), [], {}, 0, {}, {})
    updated = metadata.updated(task="detection", schema={}, label_map={"1": "cat"})
    assert list(updated.document) == [*metadata.document, "label_map"]
    assert updated.document["task"] == "detection" and metadata.document["task"] == "x"
