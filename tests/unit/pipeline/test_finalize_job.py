"""beam_pipelines.steps.finalize_job: metadata written and the job published once; run again, it only cleans up."""
from __future__ import annotations

import json
import os

from beam_pipelines.steps.finalize_job import finalize_job, finalize_with_stats
from beam_pipelines.steps.piece_files import PieceWriter, assemble_shard
from beam_pipelines.steps.shard_planning import plan_shards
from tfrecorder.format.metadata_file import JobMetadata
from tfrecorder.options.job_config import JobConfig
from tfrecorder.rows.table_stats import TableStats
from support.job_configs import reserved_job


def _job(tmp_path) -> tuple[JobConfig, list, list]:
    """A job's temporary directory as the assemble stage leaves it: pieces, shards, scratch."""
    config = reserved_job(str(tmp_path / "out"), "fin", num_shards=1)
    pieces = []
    for split, count, unknown in (("TRAIN", 3, 0), ("TEST", 2, 1)):
        writer = PieceWriter(config.pieces_dir, split)
        for i in range(count):
            writer.write(f"{split} {i}".encode(), unknown_labels=unknown if i == 0 else 0)
        pieces.append(writer.close())
    shards = [assemble_shard(plan, config.temp_dir, None) for plan in plan_shards(pieces, 1, 1 << 20)]
    for scratch in (config.work_dir, config.discards_dir):
        os.makedirs(scratch, exist_ok=True)
        open(os.path.join(scratch, "left"), "w").close()
    return config, shards, pieces


def test_finalize_publishes_the_job_with_its_metadata_and_no_scratch(tmp_path):
    config, shards, pieces = _job(tmp_path)
    assert list(finalize_job(None, config, shards, {"label": ["cat"]}, 6, {"missing file": 1}, pieces)) == [config.final_dir]
    assert not os.path.exists(config.temp_dir)
    names = set(os.listdir(config.final_dir))
    assert {"metadata.json", "train-00000-of-00001.tfrecord", "test-00000-of-00001.tfrecord", "dataset_info.json",
            "features.json"} <= names and not names & {"_pieces", "_work", "_discards"}
    metadata = JobMetadata.read(config.final_dir).document
    assert (metadata["rows_in"], metadata["records_written"], metadata["discarded"]) == (6, 5, 1)
    assert metadata["splits"]["TEST"]["unknown_labels"] == 1 and metadata["vocabularies"] == {"label": ["cat"]}


def test_finalize_run_again_publishes_once_and_only_cleans_up(tmp_path):
    config, shards, pieces = _job(tmp_path)
    list(finalize_job(None, config, shards, {"label": ["cat"]}, 6, {"missing file": 1}, pieces))
    published = open(os.path.join(config.final_dir, "metadata.json"), "rb").read()
    os.makedirs(config.pieces_dir)  # the retried attempt's leftovers
    open(os.path.join(config.pieces_dir, "retry.part"), "w").close()
    # metadata is not built again: these counts no longer add up, and building it would fail the accounting check
    again = list(finalize_job(None, config, shards, {"label": ["cat", "dog"]}, 99, {"other": 1}, pieces))
    assert again == [config.final_dir]
    assert open(os.path.join(config.final_dir, "metadata.json"), "rb").read() == published  # not rewritten
    assert not os.path.exists(config.temp_dir) and "_pieces" not in os.listdir(config.final_dir)


def test_finalize_with_stats_takes_the_counted_rows_and_nullable_columns(tmp_path):
    config, shards, pieces = _job(tmp_path)
    stats = TableStats(rows=6, train_found=True, nullable={"n"}, labels={"label": {"cat"}})
    list(finalize_with_stats(None, config, shards, stats, {"missing file": 1}, pieces))
    metadata = json.loads(open(os.path.join(config.final_dir, "metadata.json")).read())
    assert metadata["rows_in"] == 6 and metadata["vocabularies"] == {"label": ["cat"]}
    assert metadata["features"]["n"]["allow_missing"] and not metadata["features"]["label"]["allow_missing"]
