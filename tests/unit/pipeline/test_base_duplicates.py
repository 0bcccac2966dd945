"""beam_pipelines.steps.base_duplicates: keys of base records and of new rows, and the rows found in the base dropped."""
from __future__ import annotations

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.steps.base_duplicates import (DropDuplicates, KeyRows, dedupes, drop_base_duplicates,
                                                  new_key_filter, shard_keys)
from support.job_configs import job_config
from tfrecorder.core.schema import Schema
from tfrecorder.format.example_encoder import Feature, encode_example
from tfrecorder.format.framing import write_record
from tfrecorder.format.image_keys import KeyFilter, digest_key, hashes_bytes, key_hash
from tfrecorder.format.lineage import BaseJob, CarriedShard

SCHEMA = Schema({"image_uri": "ImageUri", "label": "StringLabel"})


def record(uri: str, data: bytes) -> bytes:
    return encode_example({"image": Feature("bytes", (data,)), "image_uri": Feature("bytes", (uri.encode(),))})


def base_job(directory: str, duplicates: str = "discard") -> BaseJob:
    return BaseJob(tfrecord_dir=directory, job_name="pets-20261121-193000", metadata_sha256="abc", version=1,
                   schema=SCHEMA, compression=None, validate="header", image_size=None, vocabularies={},
                   shards=(CarriedShard("TRAIN", "train-00000-of-00001.tfrecord", 3, 0),), records_written=3,
                   duplicates=duplicates)


def write_base(directory) -> BaseJob:
    with open(directory / "train-00000-of-00001.tfrecord", "wb") as stream:
        for uri, data in (("a.png", b"1"), ("b.png", b"1"), ("a.png", b"2")):
            write_record(stream, record(uri, data))
    return base_job(str(directory))


ALL_KEYS = [key_hash(k) for k in ("uri:a.png", "uri:b.png", digest_key(b"1"), digest_key(b"2"))]


def test_shard_keys_keep_what_the_filter_may_hold_once_and_leave_a_sidecar(tmp_path):
    base = write_base(tmp_path)
    config = job_config(schema=SCHEMA, base=base, temp_dir=str(tmp_path / "new"))
    everything = KeyFilter(10)
    for key in ALL_KEYS:
        everything.add(key)
    keys = list(shard_keys(base.shards[0], config, everything))
    assert sorted(key for key, _ in keys) == sorted(ALL_KEYS)
    assert {job for _, job in keys} == {"pets-20261121-193000"}
    sidecar = tmp_path / "new" / "keys" / "pets-20261121-193000.train-00000-of-00001.tfrecord.keys"
    assert sidecar.read_bytes() == hashes_bytes(ALL_KEYS)
    only_b = KeyFilter(10)
    only_b.add(key_hash("uri:b.png"))
    assert [key for key, _ in shard_keys(base.shards[0], config, only_b)] == [key_hash("uri:b.png")]


def test_a_shard_with_a_keys_sidecar_is_not_read(tmp_path):
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "k.keys").write_bytes(hashes_bytes([key_hash("uri:z.png")]))
    shard = CarriedShard("TRAIN", "not-there.tfrecord", 1, 0, None, "keys/k.keys")
    config = job_config(schema=SCHEMA, base=base_job(str(tmp_path)), temp_dir=str(tmp_path / "new"))
    wanted = KeyFilter(10)
    wanted.add(key_hash("uri:z.png"))
    assert list(shard_keys(shard, config, wanted)) == [(key_hash("uri:z.png"), "pets-20261121-193000")]


def test_only_appends_of_image_rows_look_for_duplicates():
    assert dedupes(job_config(schema=SCHEMA, base=base_job("/b")))
    assert not dedupes(job_config(schema=SCHEMA, base=base_job("/b", duplicates="keep")))
    assert not dedupes(job_config(schema=SCHEMA))
    assert not dedupes(job_config(schema=Schema({"n": "IntegerInput"}), base=base_job("/b")))
    assert new_key_filter(job_config(schema=SCHEMA, base=base_job("/b"))).bits >= 2000 * 14


def test_rows_are_keyed_by_uri_and_bytes(tmp_path):
    (tmp_path / "x.png").write_bytes(b"1")
    config = job_config(schema=SCHEMA, base=base_job("/b"), base_dir=str(tmp_path))
    keyer = KeyRows(config)
    keyer.setup()
    try:
        batch = [("TRAIN", {"image_uri": "x.png"}), ("TRAIN", {"image_uri": "gone.png"}), ("TEST", {"image_uri": None})]
        assert next(keyer.process(batch)) == [((key_hash("uri:x.png"), key_hash(digest_key(b"1"))), batch[0]),
                                              ((key_hash("uri:gone.png"),), batch[1]), ((), batch[2])]
    finally:
        keyer.teardown()


def test_a_row_with_a_key_in_the_base_is_discarded_with_the_base_job_named():
    dropper = DropDuplicates(job_config(schema=SCHEMA))
    dropper.setup()
    batch = [((1,), ("TRAIN", {"image_uri": "a"})), ((2, 3), ("TEST", {"image_uri": "b"})),
             ((4,), ("TRAIN", {"image_uri": "c"}))]
    out = list(dropper.process(batch, {3: "pets-1"}))
    assert out[0].value == ({"image_uri": "b"}, "already in base: pets-1")
    assert out[1] == [("TRAIN", {"image_uri": "a"}), ("TRAIN", {"image_uri": "c"})]


def test_the_stage_drops_rows_whose_uri_or_bytes_are_in_the_base(tmp_path):
    base = write_base(tmp_path)
    (tmp_path / "same-bytes.png").write_bytes(b"2")
    (tmp_path / "new.png").write_bytes(b"3")
    config = job_config(schema=SCHEMA, base=base, base_dir=str(tmp_path), temp_dir=str(tmp_path / "new"))
    rows = [("TRAIN", {"image_uri": "b.png"}), ("TRAIN", {"image_uri": "same-bytes.png"}),
            ("TEST", {"image_uri": "new.png"})]
    with beam.Pipeline("DirectRunner") as pipeline:
        kept, discards = drop_base_duplicates(pipeline, config, pipeline | beam.Create([rows]))
        assert_that(kept | beam.FlatMap(lambda batch: batch), equal_to([rows[2]]), label="kept")
        assert_that(discards, equal_to([({"image_uri": "b.png"}, "already in base: pets-20261121-193000"),
                                        ({"image_uri": "same-bytes.png"}, "already in base: pets-20261121-193000")]),
                    label="discards")
