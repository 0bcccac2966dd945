"""tfrecorder.format.lineage: what a version inherits from its parent and the lineage entry of its metadata.json."""
from __future__ import annotations

import json

import pytest

from tfrecorder.format.legacy.v2_directory import SCHEMA_FILES
from tfrecorder.format.lineage import (BaseJob, CarriedShard, carried_problems, grown_vocabularies, lineage_entry,
                                       merged_images, version_of, vocabulary_growth)

DOCUMENT = {
    "job_name": "pets-20261121-193000", "compression": None, "validate": "header",
    "schema": {"image_uri": "ImageUri", "label": "StringLabel", "split": "SplitKey", "note": "StringInput"},
    "features": {"note": {"dtype": "string", "shape": [], "allow_missing": True}},
    "vocabularies": {"label": ["cat", "dog"]}, "records_written": 5, "images": {"image": {"channels": [3], "formats": ["png"]}},
    "splits": {"TRAIN": {"records": 3, "bytes": 30, "unknown_labels": 0,
                         "shards": [{"file": "train-00000-of-00001.tfrecord", "records": 3, "bytes": 30,
                                     "index_file": "index/train-00000-of-00001.tfrecord.index"}]},
               "TEST": {"records": 2, "bytes": 20, "unknown_labels": 1,
                        "shards": [{"file": "test-00000-of-00001.tfrecord", "records": 2, "bytes": 20}]}},
}


def base(**changes) -> BaseJob:
    return BaseJob.from_document("/out/pets-20261121-193000", {**DOCUMENT, **changes}, "abc")


def test_base_job_reads_what_a_version_inherits():
    job = base()
    assert job.version == 1 and job.next_version == 2 and job.label == "pets"
    assert job.validate == "header" and job.compression is None and job.image_size is None
    assert job.vocabularies == {"label": ("cat", "dog")}
    assert job.shards == (CarriedShard("TRAIN", "train-00000-of-00001.tfrecord", 3, 30,
                                       "index/train-00000-of-00001.tfrecord.index"),
                          CarriedShard("TEST", "test-00000-of-00001.tfrecord", 2, 20))
    assert job.nullable_columns == ("note",) and job.unknown_labels == {"TRAIN": 0, "TEST": 1}
    assert job.carried_count("TRAIN") == 1 and job.carried_count("VALIDATION") == 0


def test_a_version_of_a_version_counts_on():
    job = base(job_name="pets-20261121-193000-v2", lineage={"version": 2, "image_size": [8, 6]})
    assert job.version == 2 and job.next_version == 3 and job.label == "pets" and job.image_size == (8, 6)
    assert version_of({"lineage": {"version": 4}}) == 4 and version_of({}) == 1


def test_columns_must_be_the_base_ones():
    job = base()
    job.check_columns(["split", "image_uri", "label", "note"])
    with pytest.raises(ValueError, match=r"lack column\(s\) \['note'\]"):
        job.check_columns(["split", "image_uri", "label"])
    with pytest.raises(ValueError, match=r"have column\(s\) \['extra'\]"):
        job.check_columns(["split", "image_uri", "label", "note", "extra"])


def test_read_refuses_a_tfrecorder2_directory_and_points_to_upgrade(tmp_path):
    (tmp_path / "train-00000-of-00001.tfrecord.gz").write_bytes(b"")
    with pytest.raises(ValueError, match="not a finished tfrecorder job"):
        BaseJob.read(str(tmp_path))
    (tmp_path / SCHEMA_FILES[0]).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / SCHEMA_FILES[0]).write_text("")
    with pytest.raises(ValueError, match=r"TFRecorder 2\.0; convert it with tfrecorder\.upgrade"):
        BaseJob.read(str(tmp_path))


def test_read_records_the_digest_of_metadata_json(tmp_path):
    raw = json.dumps(DOCUMENT).encode()
    (tmp_path / "metadata.json").write_bytes(raw)
    import hashlib

    assert BaseJob.read(str(tmp_path)).metadata_sha256 == hashlib.sha256(raw).hexdigest()
    with pytest.raises(ValueError, match="duplicates must be"):
        BaseJob.read(str(tmp_path), duplicates="drop")


def test_vocabulary_grows_at_its_end_in_sorted_order():
    grown = grown_vocabularies({"label": ["dog", "cat"]}, {"label": ["ant", "cat", "zebra"], "tags": ["b", "a"]})
    assert grown == {"label": ["dog", "cat", "ant", "zebra"], "tags": ["a", "b"]}
    assert vocabulary_growth({"label": ["dog", "cat"]}, grown) == {"label": ["ant", "zebra"], "tags": ["a", "b"]}
    assert grown_vocabularies({"label": ["cat"]}, {}) == {"label": ["cat"]}


def test_images_of_base_and_new_rows_merge():
    assert merged_images({"image": {"channels": [3], "formats": ["png"]}},
                         {"image": {"channels": [1, 3], "formats": ["jpeg"]}}) == {
        "image": {"channels": [1, 3], "formats": ["jpeg", "png"]}}


def test_lineage_entry_counts_added_records_and_carried_shards():
    shards = [
        {"split": "TRAIN", "index": 1, "file": "train-00001-of-00002.tfrecord", "records": 4, "bytes": 40},
        {"split": "TRAIN", "index": 0, "file": "train-00000-of-00002.tfrecord", "records": 3, "bytes": 30,
         "parent_file": "train-00000-of-00001.tfrecord"},
    ]
    entry = lineage_entry(base(), 5, 1, shards, {"label": ["cat", "dog", "emu"]}, None)
    assert entry["version"] == 2 and entry["parent"] == {"job_name": "pets-20261121-193000", "metadata_sha256": "abc",
                                                         "version": 1}
    assert entry["added"] == {"rows_in": 5, "discarded": 1, "records": {"TRAIN": 4}}
    assert entry["vocabulary_growth"] == {"label": ["emu"]}
    assert entry["carried_shards"] == [{"file": "train-00000-of-00002.tfrecord",
                                        "parent_file": "train-00000-of-00001.tfrecord", "records": 3, "bytes": 30}]


def test_carried_problems_compare_with_what_the_parent_recorded():
    lineage = {"parent": {"job_name": "p", "metadata_sha256": "abc"},
               "carried_shards": [{"file": "train-00000-of-00002.tfrecord",
                                   "parent_file": "train-00000-of-00001.tfrecord", "records": 3, "bytes": 30}]}
    document = {"lineage": lineage}
    good = {"train-00000-of-00002.tfrecord": (3, 30)}
    assert carried_problems(document, good, None, None) == []
    assert carried_problems(document, good, DOCUMENT, "abc") == []
    assert "changed since" in carried_problems(document, good, DOCUMENT, "other")[0]
    assert "the parent recorded 3 records, 30 bytes" in carried_problems(
        document, {"train-00000-of-00002.tfrecord": (3, 29)}, DOCUMENT, "abc")[0]
    assert "not listed" in carried_problems(document, {}, None, None)[0]


def test_small_shards_of_an_append_are_listed_and_merged_by_the_next_one():
    shards = [
        {"split": "TRAIN", "index": 1, "file": "train-00001-of-00003.tfrecord", "records": 40, "bytes": 400},
        {"split": "TRAIN", "index": 2, "file": "train-00002-of-00003.tfrecord", "records": 4, "bytes": 40},
    ]
    entry = lineage_entry(base(), 44, 0, shards, {}, None, small_bytes=100)
    assert entry["small_shards"] == ["train-00002-of-00003.tfrecord"]
    assert lineage_entry(base(), 44, 0, shards, {}, None, small_bytes=100, compression="gzip")["small_shards"] == []
    document = {**DOCUMENT, "lineage": {"version": 2, "small_shards": ["train-00000-of-00001.tfrecord",
                                                                       "test-00000-of-00001.tfrecord"]}}
    job = BaseJob.from_document("/out/v2", document, "d")
    # the TRAIN shard has an index file to re-assemble from; the TEST one has none and is carried
    assert [s.parent_file for s in job.merged] == ["train-00000-of-00001.tfrecord"]
    assert [s.parent_file for s in job.shards] == ["test-00000-of-00001.tfrecord"]
    assert len(job.all_shards) == 2 and job.carried_count("TRAIN") == 0
    merged = lineage_entry(job, 4, 0, [{"split": "TRAIN", "index": 0, "file": "train-00000-of-00001.tfrecord",
                                        "records": 7, "bytes": 70}], {}, None)
    assert merged["added"]["records"] == {"TRAIN": 4}
    assert merged["merged_shards"] == [{"parent_file": "train-00000-of-00001.tfrecord", "records": 3}]
    assert BaseJob.from_document("/out/v2", {**document, "compression": "gzip"}, "d").merged == ()
