"""beam_pipelines.steps.assemble_shards: AssembleShard writes each planned shard into the temporary directory."""
from __future__ import annotations

import gzip
import os

import pytest

from beam_pipelines.steps.assemble_shards import AssembleShard
from beam_pipelines.steps.piece_files import PieceWriter
from beam_pipelines.steps.shard_planning import plan_shards
from tfrecorder.format.framing import read_records
from tfrecorder.options.job_config import JobConfig
from support.job_configs import job_config


def assembled(assemble: AssembleShard, plans) -> list[dict]:
    """The summaries of `plans` assembled in one bundle (locally emitted when the bundle finishes)."""
    found = [summary for plan in plans for summary in assemble.process(plan)]
    return found + [getattr(output, "value", output) for output in assemble.finish_bundle()]


def _config(temp_dir: str, compression=None) -> JobConfig:
    return job_config(temp_dir=temp_dir, num_shards=2, compression=compression)


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_each_plan_becomes_its_shard_in_the_temp_dir(tmp_path, compression):
    config = _config(str(tmp_path / "job"), compression)
    records = [f"record {i}".encode() for i in range(7)]
    pieces = []
    for chunk in (records[:4], records[4:]):
        writer = PieceWriter(config.pieces_dir, "TRAIN")
        for record in chunk:
            writer.write(record)
        pieces.append(writer.close())
    assemble = AssembleShard(config)
    summaries = assembled(assemble, plan_shards(pieces, config.num_shards, config.max_shard_bytes))
    suffix = ".tfrecord.gz" if compression else ".tfrecord"
    assert [(s["split"], s["index"], s["file"]) for s in summaries] == [
        ("TRAIN", 0, f"train-00000-of-00002{suffix}"), ("TRAIN", 1, f"train-00001-of-00002{suffix}")]
    found = []
    for summary in summaries:
        path = tmp_path / "job" / summary["file"]
        assert summary["bytes"] == path.stat().st_size
        with open(path, "rb") as raw:
            found.extend(read_records(gzip.GzipFile(fileobj=raw) if compression else raw))
    assert sorted(found) == sorted(records) and sum(s["records"] for s in summaries) == 7
    assert ("index_file" in summaries[0]) == (compression is None)  # index files only for uncompressed shards
    whole = {r.piece.path for plan in plan_shards(pieces, 2, 1 << 20) for r in plan.ranges if r.whole}
    assert whole and all(os.path.exists(piece.path) == (piece.path not in whole) for piece in pieces)  # held whole: removed
    assert all(os.path.exists(piece.offsets_path) for piece in pieces)  # sidecars stay until finalize
    again = assembled(assemble, plan_shards(pieces, 2, 1 << 20))
    assemble.teardown()
    assert again == summaries  # a rerun (retried bundle, resumed job): the shards in place are kept


def test_a_failed_removal_of_pieces_fails_the_bundle_and_a_retry_keeps_the_shard(tmp_path):
    config = job_config(temp_dir=str(tmp_path / "job"), num_shards=0)
    writer = PieceWriter(config.pieces_dir, "TRAIN")
    writer.write(b"only record")
    piece = writer.close()
    [plan] = plan_shards([piece], 0, 1 << 20)
    assemble = AssembleShard(config)
    os.chmod(config.pieces_dir, 0o500)  # the piece cannot be removed (root ignores this: then it is)
    try:
        assert list(assemble.process(plan)) == []  # locally: emitted when the bundle finishes
        try:
            [summary] = [output.value for output in assemble.finish_bundle()]
            failed = False
        except PermissionError:
            failed = True
    finally:
        os.chmod(config.pieces_dir, 0o700)
    assert failed == os.path.exists(piece.path)
    [again] = assembled(AssembleShard(config), [plan])  # the retry
    if not failed:
        assert again == summary
    assert not os.path.exists(piece.path)  # the retry removed it
    assert list(read_records(open(tmp_path / "job" / again["file"], "rb"))) == [b"only record"]
