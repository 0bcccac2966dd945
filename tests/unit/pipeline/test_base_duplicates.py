"""beam_pipelines.steps.base_duplicates: keys of base records and of new rows, and the join that discards duplicates."""
from __future__ import annotations

import hashlib

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.steps.base_duplicates import (SplitDuplicates, dedupes, digest_key, record_keys, row_uri_key,
                                                  shard_keys)
from beam_pipelines.steps.discard_files import DISCARD
from support.job_configs import job_config
from tfrecorder.core.schema import Schema
from tfrecorder.format.example_encoder import Feature, encode_example
from tfrecorder.format.framing import write_record
from tfrecorder.format.lineage import BaseJob, CarriedShard

SCHEMA = Schema({"image_uri": "ImageUri", "label": "StringLabel"})


def record(uri: str, data: bytes) -> bytes:
    return encode_example({"image": Feature("bytes", (data,)), "image_uri": Feature("bytes", (uri.encode(),))})


def base_job(directory: str, duplicates: str = "discard") -> BaseJob:
    return BaseJob(tfrecord_dir=directory, job_name="pets-20261121-193000", metadata_sha256="abc", version=1,
                   schema=SCHEMA, compression=None, validate="header", image_size=None, vocabularies={},
                   shards=(CarriedShard("TRAIN", "train-00000-of-00001.tfrecord", 3, 0),), records_written=3,
                   duplicates=duplicates)


def test_a_record_is_keyed_by_its_uri_and_its_image_digest():
    assert record_keys(record("a.png", b"xy"), "image") == ["uri:a.png", "sha256:" + hashlib.sha256(b"xy").hexdigest()]
    assert digest_key(b"xy") == "sha256:" + hashlib.sha256(b"xy").hexdigest()
    assert row_uri_key({"image_uri": "a.png"}, "image_uri") == "uri:a.png"
    assert not row_uri_key({"image_uri": None}, "image_uri").startswith("uri:")


def test_shard_keys_read_each_key_once(tmp_path):
    with open(tmp_path / "train-00000-of-00001.tfrecord", "wb") as stream:
        for uri, data in (("a.png", b"1"), ("b.png", b"1"), ("a.png", b"2")):
            write_record(stream, record(uri, data))
    keys = list(shard_keys(base_job(str(tmp_path)).shards[0], job_config(schema=SCHEMA, base=base_job(str(tmp_path)))))
    assert [key for key, _ in keys] == ["uri:a.png", digest_key(b"1"), "uri:b.png", digest_key(b"2")]
    assert {job for _, job in keys} == {"pets-20261121-193000"}


def test_only_appends_of_image_rows_look_for_duplicates():
    assert dedupes(job_config(schema=SCHEMA, base=base_job("/b")))
    assert not dedupes(job_config(schema=SCHEMA, base=base_job("/b", duplicates="keep")))
    assert not dedupes(job_config(schema=SCHEMA))
    assert not dedupes(job_config(schema=Schema({"n": "IntegerInput"}), base=base_job("/b")))


def test_rows_meeting_a_base_key_are_discarded_with_the_base_job_named():
    config = job_config(schema=SCHEMA)
    grouped = [("uri:a", {"base": ["pets-1"], "new": [("TRAIN", {"image_uri": "a"})]}),
               ("uri:b", {"base": [], "new": [("TEST", {"image_uri": "b"}), ("TRAIN", {"image_uri": "b"})]}),
               ("uri:c", {"base": ["pets-1"], "new": []})]
    with beam.Pipeline("DirectRunner") as pipeline:
        split = pipeline | beam.Create(grouped) | beam.ParDo(SplitDuplicates(config)).with_outputs(DISCARD, main="rows")
        assert_that(split.rows, equal_to([("TEST", {"image_uri": "b"}), ("TRAIN", {"image_uri": "b"})]), label="rows")
        assert_that(split[DISCARD], equal_to([({"image_uri": "a"}, "already in base: pets-1")]), label="discards")
