from __future__ import annotations

import random

import pytest

from beam_pipelines.steps.shard_planning import Piece, plan_shards, shard_sizes

MB = 1024 * 1024


def pieces(split, sizes, records=10):
    return [Piece(split, f"/p/{split}-{i}", records, size, digest=f"{i:04d}") for i, size in enumerate(sizes)]


def test_automatic_packs_pieces_up_to_the_byte_bound():
    plans = plan_shards(pieces("TRAIN", [100 * MB, 30 * MB, 30 * MB, 120 * MB, 5 * MB]), 0, 150 * MB)
    assert [sum(r.piece.bytes for r in plan.ranges) for plan in plans] == [130 * MB, 150 * MB, 5 * MB]
    assert all(r.whole for plan in plans for r in plan.ranges)
    assert [plan.file_name(None) for plan in plans] == [
        "train-00000-of-00003.tfrecord", "train-00001-of-00003.tfrecord", "train-00002-of-00003.tfrecord"]
    assert sum(plan.records for plan in plans) == 50


def test_each_split_gets_its_own_shard_set_and_empty_splits_none():
    plans = plan_shards(pieces("TRAIN", [MB]) + pieces("TEST", [MB, MB]) + [Piece("VALIDATION", "/e", 0, 0)], 0, 10 * MB)
    assert sorted(p.file_name("gzip") for p in plans) == ["test-00000-of-00001.tfrecord.gz", "train-00000-of-00001.tfrecord.gz"]


def test_pieces_are_ordered_by_content_not_by_their_random_names():
    given = pieces("TRAIN", [MB, 2 * MB, 3 * MB])
    renamed = [Piece(p.split, f"/attempt-2/{9 - i}", p.records, p.bytes, digest=p.digest) for i, p in enumerate(given)]
    first, second = plan_shards(given, 2, 0), plan_shards(renamed, 2, 0)
    assert [[(r.piece.digest, r.first, r.last) for r in plan.ranges] for plan in first] == \
           [[(r.piece.digest, r.first, r.last) for r in plan.ranges] for plan in second]


def test_fixed_shard_count_cuts_records_into_balanced_contiguous_ranges():
    given = [Piece("TRAIN", f"/p/{i}", records, records * 100, digest=str(i)) for i, records in enumerate([7, 1, 12])]
    plans = plan_shards(given, 3, 150 * MB)
    assert [plan.records for plan in plans] == [7, 7, 6]
    assert [[(r.piece.path, r.first, r.last) for r in plan.ranges] for plan in plans] == [
        [("/p/0", 0, 7)], [("/p/1", 0, 1), ("/p/2", 0, 6)], [("/p/2", 6, 12)]]


def test_fewer_records_than_shards_leaves_empty_shards_at_the_end():
    plans = plan_shards([Piece("TRAIN", "/p", 2, 200, digest="a")], 4, 150 * MB)
    assert [plan.records for plan in plans] == [1, 1, 0, 0]
    assert [plan.count for plan in plans] == [4] * 4


@pytest.mark.parametrize("seed", range(20))
def test_fixed_shards_cover_every_record_once_and_never_skew(seed):
    rng = random.Random(seed)
    num_shards = rng.randint(1, 300)
    given = [Piece("TRAIN", f"/p/{i}", rng.randint(0, 200), 1, digest=f"{i:05d}") for i in range(rng.randint(1, 60))]
    total = sum(p.records for p in given)
    plans = plan_shards(given, num_shards, 1)
    if not total:
        assert plans == []
        return
    assert len(plans) == num_shards
    covered = [(r.piece.path, n) for plan in plans for r in plan.ranges for n in range(r.first, r.last)]
    assert sorted(covered) == sorted((p.path, n) for p in given for n in range(p.records))
    counts = [plan.records for plan in plans]
    assert max(counts) - min(counts) <= 1
    if total >= num_shards:
        assert min(counts) > 0
    if total >= 10 * num_shards:
        assert max(counts) / min(counts) <= 1.5


def test_shard_sizes_differ_by_at_most_one():
    assert shard_sizes(10, 4) == [3, 3, 2, 2]
    assert shard_sizes(3, 5) == [1, 1, 1, 0, 0]
