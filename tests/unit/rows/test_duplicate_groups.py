"""Exact duplicate groups: digests, buckets, the kept row, leaks and counts."""
from tfrecorder.rows.duplicate_groups import (BUCKETS, DuplicateCounts, bucket_of, bucketed, content_digest,
                                               groups_in, leak_warning)


def test_digest_separates_parts_and_buckets_are_in_range():
    assert content_digest(b"ab", b"c") != content_digest(b"a", b"bc")
    assert content_digest(memoryview(b"xy")) == content_digest(b"xy")
    assert 0 <= bucket_of(content_digest(b"x")) < BUCKETS
    entries = [(content_digest(b"x"), "TRAIN", "a"), (content_digest(b"x"), "TEST", "b")]
    assert list(bucketed(entries).values()) == [entries]


def test_groups_keep_the_smallest_row_and_flag_leaks():
    same, other = content_digest(b"same"), content_digest(b"other")
    entries = [(same, "TEST", "z.jpg"), (same, "TRAIN", "a.jpg"), (other, "TRAIN", "q.jpg"),
               (same, "TRAIN", "a.jpg")]  # a replayed entry is not a duplicate of itself
    [group] = groups_in(entries)
    assert group.kept == "a.jpg" and group.leaks and group.members == (("TRAIN", "a.jpg"), ("TEST", "z.jpg"))
    assert [row[4] for row in group.csv_rows()] == ["yes", "no"]
    counts = DuplicateCounts().add([group]).merge(DuplicateCounts(groups=1, rows=2, redundant=1))
    assert counts.to_json() == {"groups": 2, "rows": 4, "redundant": 2, "leaking_groups": 1, "leaking_rows": 2}
    assert "1 duplicate group" in leak_warning(counts.to_json()) and leak_warning({}) == ""


def test_groups_within_train_do_not_leak():
    same = content_digest(b"s")
    [group] = groups_in([(same, "TRAIN", "b"), (same, "TRAIN", "a")])
    assert not group.leaks and group.kept == "a"


def test_image_free_rows_travel_as_blocks_and_only_duplicates_get_row_ids():
    import numpy as np

    from tfrecorder.rows.duplicate_groups import DigestBlock, blocks_by_bucket, record_digests

    digests = record_digests([b"r1", memoryview(b"r2"), b"r1", b"r3"])
    assert digests[0] == digests[2] != digests[1] and len(digests[0]) == 16
    blocks = blocks_by_bucket("data.parquet row group 0", "TRAIN", digests, np.array([10, 11, 12, 13]))
    assert all(isinstance(b, DigestBlock) for b in blocks.values())
    assert blocks[bucket_of(digests[0])].rows.tolist() == [10, 12]
    other = blocks_by_bucket("data.parquet row group 1", "TEST", [digests[0]], np.array([0]))
    found = [g for bucket in blocks for g in groups_in([blocks[bucket]] + ([other[bucket]] if bucket in other else []))]
    [group] = found
    assert group.members == (("TRAIN", "data.parquet row group 0 row 10"), ("TRAIN", "data.parquet row group 0 row 12"),
                             ("TEST", "data.parquet row group 1 row 0"))
    assert group.leaks
