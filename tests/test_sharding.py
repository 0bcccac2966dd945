from __future__ import annotations

from tfrecorder.sharding import Piece, plan_shards

MB = 1024 * 1024


def pieces(split, sizes, shard_index=-1):
    return [Piece(split, f"/p/{split}-{i}", 10, size, shard_index) for i, size in enumerate(sizes)]


def test_automatic_packs_pieces_up_to_the_byte_bound():
    plans = plan_shards(pieces("TRAIN", [100 * MB, 30 * MB, 30 * MB, 120 * MB, 5 * MB]), 0, 150 * MB)
    assert [sum(p.bytes for p in plan.pieces) for plan in plans] == [130 * MB, 150 * MB, 5 * MB]
    assert [plan.file_name(None) for plan in plans] == [
        "train-00000-of-00003.tfrecord", "train-00001-of-00003.tfrecord", "train-00002-of-00003.tfrecord"]
    assert sum(plan.records for plan in plans) == 50


def test_each_split_gets_its_own_shard_set_and_empty_splits_none():
    plans = plan_shards(pieces("TRAIN", [MB]) + pieces("TEST", [MB, MB]) + [Piece("VALIDATION", "/e", 0, 0)], 0, 10 * MB)
    assert sorted(p.file_name("gzip") for p in plans) == ["test-00000-of-00001.tfrecord.gz", "train-00000-of-00001.tfrecord.gz"]


def test_fixed_shard_count_groups_by_index_even_when_some_are_empty():
    given = [Piece("TRAIN", f"/p/{i}", 3, MB, i % 2) for i in range(4)]
    plans = plan_shards(given, 3, 150 * MB)
    assert [plan.count for plan in plans] == [3, 3, 3]
    assert [len(plan.pieces) for plan in plans] == [2, 2, 0]
