"""beam_pipelines.steps.carry_shards: the parent's shards numbered with the new ones and carried without being read."""
from __future__ import annotations

import os

from beam_pipelines.steps.carry_shards import CarryBatch, carry_shards, job_vocabularies, link_or_copy, plan_job_shards
from beam_pipelines.steps.shard_planning import Piece, ShardPlan
from support.job_configs import job_config
from tfrecorder.core.schema import Schema
from tfrecorder.format.lineage import BaseJob, CarriedShard

MB = 1 << 20


def base_job(directory: str = "/base", compression=None) -> BaseJob:
    return BaseJob(tfrecord_dir=directory, job_name="pets-20261121-193000", metadata_sha256="abc", version=1,
                   schema=Schema({"n": "IntegerInput"}), compression=compression, validate="header", image_size=None,
                   vocabularies={"label": ("dog", "cat")},
                   shards=(CarriedShard("TRAIN", "train-00000-of-00002.tfrecord", 3, 30, "index/train-00000-of-00002.tfrecord.index"),
                           CarriedShard("TRAIN", "train-00001-of-00002.tfrecord", 2, 20, "index/train-00001-of-00002.tfrecord.index"),
                           CarriedShard("TEST", "test-00000-of-00001.tfrecord", 1, 10)),
                   records_written=6)


def test_without_a_base_the_plans_are_the_new_rows_only():
    plans = plan_job_shards([Piece("TRAIN", "/p/a", 5, MB, digest="a")], job_config())
    assert [p.file_name(None) for p in plans] == ["train-00000-of-00001.tfrecord"]


def test_parent_shards_come_first_and_every_shard_counts_all_of_its_split():
    pieces = [Piece("TRAIN", "/p/a", 5, MB, digest="a"), Piece("VALIDATION", "/p/b", 4, MB, digest="b")]
    plans = plan_job_shards(pieces, job_config(base=base_job()))
    new = [p for p in plans if isinstance(p, ShardPlan)]
    assert [p.file_name(None) for p in new] == ["train-00002-of-00003.tfrecord", "validation-00000-of-00001.tfrecord"]
    carried = [c for batch in plans if isinstance(batch, CarryBatch) for c in batch.plans]
    assert [(c.split, c.index, c.count, c.shard.parent_file) for c in carried] == [
        ("TRAIN", 0, 3, "train-00000-of-00002.tfrecord"), ("TRAIN", 1, 3, "train-00001-of-00002.tfrecord"),
        ("TEST", 0, 1, "test-00000-of-00001.tfrecord")]


def test_carried_shards_are_links_under_their_new_names_with_their_index_files(tmp_path):
    parent, temp = tmp_path / "base", tmp_path / "new"
    (parent / "index").mkdir(parents=True)
    temp.mkdir()
    for name, data in (("train-00000-of-00002.tfrecord", b"a" * 30), ("train-00001-of-00002.tfrecord", b"b" * 20),
                       ("test-00000-of-00001.tfrecord", b"c" * 10)):
        (parent / name).write_bytes(data)
    (parent / "index" / "train-00000-of-00002.tfrecord.index").write_text("0 30\n")
    (parent / "index" / "train-00001-of-00002.tfrecord.index").write_text("0 20\n")
    config = job_config(base=base_job(str(parent)), temp_dir=str(temp))
    batches = [p for p in plan_job_shards([Piece("TRAIN", "/p/a", 5, MB, digest="a")], config) if isinstance(p, CarryBatch)]
    summaries = [s for batch in batches for s in carry_shards(batch, config)]
    summaries += [s for batch in batches for s in carry_shards(batch, config)]  # a retry gives the same files
    assert summaries[0] == {"split": "TRAIN", "index": 0, "file": "train-00000-of-00003.tfrecord", "records": 3,
                            "bytes": 30, "parent_file": "train-00000-of-00002.tfrecord",
                            "index_file": "index/train-00000-of-00003.tfrecord.index"}
    assert sorted(os.listdir(temp)) == ["index", "test-00000-of-00001.tfrecord", "train-00000-of-00003.tfrecord",
                                        "train-00001-of-00003.tfrecord"]
    assert os.path.samefile(temp / "train-00001-of-00003.tfrecord", parent / "train-00001-of-00002.tfrecord")
    assert (temp / "index" / "train-00001-of-00003.tfrecord.index").read_text() == "0 20\n"
    assert (parent / "train-00000-of-00002.tfrecord").read_bytes() == b"a" * 30  # the parent is left as it was


def test_link_or_copy_replaces_the_destination_whole(tmp_path):
    (tmp_path / "source").write_bytes(b"new")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "destination").write_bytes(b"old, longer")
    link_or_copy(str(tmp_path / "source"), str(tmp_path / "out" / "destination"))
    assert (tmp_path / "out" / "destination").read_bytes() == b"new"
    assert os.listdir(tmp_path / "out") == ["destination"]


def test_vocabularies_of_an_append_keep_the_parent_ids():
    assert job_vocabularies({"label": ["ant", "cat"]}, job_config()) == {"label": ["ant", "cat"]}
    assert job_vocabularies({"label": ["ant", "cat"]}, job_config(base=base_job())) == {"label": ["dog", "cat", "ant"]}


def test_a_small_parent_shard_becomes_a_piece_read_in_place(tmp_path):
    from beam_pipelines.steps.carry_shards import merged_piece
    from beam_pipelines.steps.piece_files import assemble_shard
    from beam_pipelines.steps.shard_planning import plan_shards
    from tfrecorder.format.framing import read_records, write_record
    from tfrecorder.format.record_index import scan_index, write_index

    parent, temp = tmp_path / "base", tmp_path / "new"
    parent.mkdir()
    (temp / "_pieces").mkdir(parents=True)
    with open(parent / "train-00001-of-00002.tfrecord", "wb") as stream:
        for record in (b"one", b"two", b"three"):
            write_record(stream, record)
    with open(parent / "train-00001-of-00002.tfrecord", "rb") as stream:
        index = write_index(str(parent), "train-00001-of-00002.tfrecord", list(scan_index(stream)))
    shard = CarriedShard("TRAIN", "train-00001-of-00002.tfrecord", 3,
                         (parent / "train-00001-of-00002.tfrecord").stat().st_size, index)
    config = job_config(base=base_job(str(parent)), temp_dir=str(temp))
    piece = merged_piece(shard, 0, config)
    assert piece.path == str(parent / "train-00001-of-00002.tfrecord") and piece.digest == "!000000"
    assert piece.offsets_path.startswith(str(temp / "_pieces"))
    plans = plan_shards([piece], 2, 1 << 20)  # cut inside the piece: the offsets sidecar is used
    summaries = [assemble_shard(plan, str(temp), None) for plan in plans]
    assert [s["records"] for s in summaries] == [2, 1]
    with open(temp / summaries[0]["file"], "rb") as stream:
        assert list(read_records(stream)) == [b"one", b"two"]
    assert (temp / summaries[1]["index_file"]).read_text().split() == ["0", str(16 + 5)]
