"""Exact duplicate groups: digests, buckets, the kept row, leaks and counts."""
import hashlib

from tfrecorder.rows.duplicate_groups import (BUCKETS, DuplicateCounts, bucket_of, bucketed, content_digest,
                                               content_digest_of_first, groups_in, leak_warning)


def test_digest_separates_parts_and_buckets_are_in_range():
    assert content_digest(b"ab", b"c") != content_digest(b"a", b"bc")
    assert content_digest(memoryview(b"xy")) == content_digest(b"xy")
    assert 0 <= bucket_of(content_digest(b"x")) < BUCKETS
    entries = [(content_digest(b"x"), "TRAIN", "a"), (content_digest(b"x"), "TEST", "b")]
    assert list(bucketed(entries).values()) == [entries]


def test_a_digest_from_the_first_parts_sha256_is_the_content_digest():
    first = b"image bytes" * 100
    sha = hashlib.sha256(first).digest()
    assert content_digest_of_first(sha, [first]) == content_digest(first)
    assert content_digest_of_first(sha, [first, b"mask"]) == content_digest(first, b"mask")


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


def _each(joined: bytes) -> list[bytes]:
    return [joined[i:i + 16] for i in range(0, len(joined), 16)]


def test_record_digests_are_two_keyed_siphash_halves_of_the_record_bytes():
    """Image-free rows' digests: 16 bytes a record, the same for the same bytes however they are held (an
    Arrow array, bytes, memoryviews), different for records differing in one byte or only in length."""
    import pandas as pd
    import numpy as np
    import pyarrow as pa

    from tfrecorder.rows.duplicate_groups import RECORD_DIGEST_KEYS, record_digests

    records = [b"", b"\x00", b"\x00\x00", b"row 1", b"row 2", b"row 1" * 1000]
    joined = record_digests(pa.array(records, pa.large_binary()))
    assert joined == record_digests([memoryview(r) for r in records]) == record_digests(records)
    digests = _each(joined)
    assert len(joined) == 16 * len(records) and len(set(digests)) == len(records)
    objects = np.array(records + [None], dtype=object)[:-1]
    halves = [pd.util.hash_array(objects, hash_key=key, categorize=False) for key in RECORD_DIGEST_KEYS]
    assert digests[3] == int(halves[0][3]).to_bytes(8, "little") + int(halves[1][3]).to_bytes(8, "little")
    assert record_digests(pa.array([], pa.large_binary())) == b"" == record_digests([])


def test_a_block_may_span_buckets_keeping_its_rows_in_order_and_each_group_knows_its_bucket():
    """blocks_by_bucket(span=k): one block per k consecutive buckets, keyed by the first, holding exactly the
    rows per-bucket blocks hold, in their order (so their numbers pack as steps); a group's bucket is its
    digest's (group_bucket), whichever block it was found in."""
    import numpy as np

    from tfrecorder.rows.duplicate_groups import blocks_by_bucket, group_bucket

    digests = [content_digest(f"row {i}".encode()) for i in range(3000)] * 2
    rows = np.arange(len(digests)) * 3
    single = blocks_by_bucket("p", "TRAIN", digests, rows)
    spans = blocks_by_bucket("p", "TRAIN", digests, rows, span=16)
    assert len(spans) == BUCKETS // 16 < len(single) and all(key % 16 == 0 for key in spans)
    for key, block in spans.items():
        held = sorted(bucket for bucket in single if key <= bucket < key + 16)
        assert block.rows.tolist() == sorted(row for bucket in held for row in single[bucket].rows.tolist())
        buckets = {bucket_of(block.digests[i:i + 16]) for i in range(0, len(block.digests), 16)}
        assert buckets <= set(range(key, key + 16))
    groups = groups_in(spans.values())
    assert len(groups) == 3000 and groups == groups_in(single.values())
    assert all(group_bucket(group) == bucket_of(bytes.fromhex(group.group_id)) for group in groups)


def test_image_free_rows_travel_as_blocks_and_only_duplicates_get_row_ids():
    import numpy as np

    from tfrecorder.rows.duplicate_groups import DigestBlock, blocks_by_bucket, record_digests

    digests = _each(record_digests([b"r1", memoryview(b"r2"), b"r1", b"r3"]))
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


def test_with_places_every_member_but_the_kept_one_is_dropped_even_rows_of_one_uri():
    """duplicates="drop": entries carry their place; the same URI listed twice is two members (kept: the
    first by cells), and each dropped place's reason names the kept row."""
    same = content_digest(b"s")
    entries = [(same, "TEST", "b.png", ("p2", 0, 0, ("b.png", "x"))),
               (same, "TRAIN", "a.png", ("p1", 4, 1, ("a.png", "y"))),
               (same, "TRAIN", "a.png", ("p1", 3, 0, ("a.png", "x")))]
    [group] = groups_in(entries)
    assert group.members == (("TRAIN", "a.png"), ("TRAIN", "a.png"), ("TEST", "b.png")) and group.kept == "a.png"
    assert [place for place, _ in group.dropped()] == [("p1", 4, 1, ("a.png", "y")), ("p2", 0, 0, ("b.png", "x"))]
    assert {reason for _, reason in group.dropped()} == {"duplicate of a.png"}
    assert [row[4] for row in group.csv_rows()] == ["yes", "no", "no"]
    assert groups_in(list(reversed(entries))) == [group]  # whatever order the entries came in
    assert list(groups_in([(same, "TRAIN", "a"), (same, "TRAIN", "b")])[0].dropped()) == []  # no places: nothing
    assert leak_warning({"leaking_groups": 1, "leaking_rows": 2, "dropped": 1}) == ""  # drop left no leak


def test_image_free_blocks_with_places_drop_by_piece_record_and_source_row():
    """duplicates="drop" for image-free rows: a block carries per row (piece index, record, unknown labels)
    and its part's key; a member's place has no cells (None) but the part key and row number."""
    import numpy as np

    from tfrecorder.rows.duplicate_groups import blocks_by_bucket, record_digests

    digests = _each(record_digests([b"r1", b"r2", b"r1"]))
    places = np.array([[0, 5, 0], [1, 0, 0], [1, 1, 2]], dtype=np.int64)
    blocks = blocks_by_bucket("t.csv bytes 0", "TRAIN", digests, np.array([7, 8, 9]), places, ("pa", "pb"), "key1")
    [group] = groups_in([blocks[bucket_of(digests[0])]])
    assert group.kept == "t.csv bytes 0 row 7"
    assert list(group.dropped()) == [(("pb", 1, 2, None, "key1", 9), "duplicate of t.csv bytes 0 row 7")]


def test_blocks_pickle_their_arrays_as_bytes_and_group_as_before():
    """A DigestBlock crosses pickle (a part's quality file, Beam's shuffle) with its arrays as raw bytes;
    the copy groups as the original, and digests sharing only their first 8 bytes stay apart."""
    import pickle

    import numpy as np

    from tfrecorder.rows.duplicate_groups import DigestBlock, blocks_by_bucket, record_digests

    digests = _each(record_digests([b"r1", b"r2", b"r1"]))
    places = np.array([[0, 5, 0], [1, 0, 0], [1, 1, 2]], dtype=np.int64)
    for located in (None, places):
        blocks = blocks_by_bucket("p", "TEST", b"".join(digests), np.array([7, 8, 9]), located, ("pa", "pb"), "k")
        block = blocks[bucket_of(digests[0])]
        copy = pickle.loads(pickle.dumps(block, protocol=4))
        assert copy.digests == block.digests and copy.rows.tolist() == block.rows.tolist()
        assert (copy.places is None) == (located is None)
        assert groups_in([copy]) == groups_in([block]) and len(groups_in([copy])) == 1
    prefix = b"\x00" * 8
    twins = DigestBlock("p", "TRAIN", prefix + b"a" * 8 + prefix + b"b" * 8, np.array([0, 1]))
    assert groups_in([twins]) == []


def test_packed_ints_take_the_shortest_form_and_come_back_as_int64():
    """Row numbers and places are pickled packed: ascending values as narrow steps, small ones narrow,
    anything else (negative, descending with large values) as int64; every form comes back exactly."""
    import numpy as np

    from tfrecorder.rows.duplicate_groups import packed_ints, unpacked_ints

    ascending = np.arange(70_000, 70_000 + 1_300 * 1_000, 1_300, dtype=np.int64)  # a bucket's rows of a part
    cases = [[], [5], [3, 1, 2], [2**40, 2**40 + 3], [-1, 5], [2**40, 0], [0, 65_535, 65_535 + 70_000],
             [2**63 - 1, -(2**63)], ascending.tolist()]
    for values in cases:
        packed = packed_ints(np.array(values, dtype=np.int64))
        back = unpacked_ints(packed)
        assert back.dtype == np.int64 and back.tolist() == values, values
    assert len(packed_ints(ascending)) == 1 + 8 + 2 * (len(ascending) - 1)  # 16-bit steps
    assert len(packed_ints(np.array([3, 1, 2]))) == 1 + 3  # small: one byte each
    assert len(packed_ints(np.array([2**40, 0]))) == 1 + 16  # neither: int64


def test_packed_runs_are_packed_ints_of_each_run():
    """A block's row numbers by bucket are packed run by run, all runs at once, into exactly the bytes
    packed_ints gives each run: steps of 1, 2 or 4 bytes, narrow absolute values, or int64."""
    import numpy as np

    from tfrecorder.rows.duplicate_groups import _packed_runs, packed_ints, unpacked_ints

    rng = np.random.default_rng(5)
    runs = [[7], [0, 200, 255], [3, 300, 70_000], [10, 5, 20], [1, 2**33], [2**40, 2**40 + 1], [9, 9, 9],
            [-4, 2], [-(2**63), 2**63 - 1], list(range(100, 100_000, 997)), list(range(10**6, 10**6 + 5)),
            np.sort(rng.choice(90_000, 9, replace=False)).tolist()]
    values = np.array([value for run in runs for value in run], dtype=np.int64)
    ends = np.cumsum([len(run) for run in runs]).tolist()
    starts = [0, *ends[:-1]]
    packed = _packed_runs(values, starts, ends)
    assert packed == [packed_ints(np.array(run, dtype=np.int64)) for run in runs]
    assert [unpacked_ints(data).tolist() for data in packed] == runs
    assert len({data[0] for data in packed}) >= 5  # several forms and widths met
    assert _packed_runs(np.empty(0, dtype=np.int64), [], []) == []


def test_a_buckets_blocks_pickle_as_one_in_about_20_bytes_a_row():
    """What the grouping step's input holds per image-free row (the in-process runner keeps several
    copies of it at once): the 16-byte digest and ~2 bytes of row number, the blocks of a bucket
    sharing their part label; with places ~6 bytes more. The copy groups as the original."""
    import pickle

    import numpy as np

    from tfrecorder.rows.duplicate_groups import DigestBlocks, blocks_by_bucket, record_digests

    rng = np.random.default_rng(0)
    rows_in_part = 90_000  # a part's bucket gets ~70 TRAIN rows, ~9 of each other split
    blocks, plain = DigestBlocks(), []
    for split, share in (("TRAIN", 0.8), ("VALIDATION", 0.1), ("TEST", 0.1)):
        rows = np.sort(rng.choice(rows_in_part, int(rows_in_part * share), replace=False)).astype(np.int64)
        digests = _each(record_digests([f"{split}{row}".encode() for row in rows.tolist()]))
        digests[0] = digests[1]  # one duplicate pair per split
        places = np.column_stack([rows % 3, rows // 3, rows % 2]).astype(np.int64)
        for located, kept in ((None, blocks), (places, plain)):
            found = blocks_by_bucket("CSV bytes from 123456789", split, digests, rows, located, ("a", "b", "c"), "key")
            kept.append(found[bucket_of(digests[0])])
    size = len(pickle.dumps(blocks, protocol=5))
    rows = sum(len(block.rows) for block in blocks)
    assert size < 22 * rows, size / rows  # 28 with int64 row numbers, each block pickled alone
    assert size < sum(len(pickle.dumps(block, protocol=5)) for block in blocks)  # shared, not per block
    copy = pickle.loads(pickle.dumps(blocks, protocol=5))
    assert type(copy) is DigestBlocks and groups_in(copy) == groups_in(blocks) and len(groups_in(copy)) == 3
    with_places = pickle.loads(pickle.dumps(DigestBlocks(plain), protocol=5))
    assert all(a.places.tolist() == b.places.tolist() and a.rows.tolist() == b.rows.tolist()
               for a, b in zip(with_places, plain))
    assert len(pickle.dumps(DigestBlocks(plain), protocol=5)) < size + 7 * rows  # places: ~6 bytes a row


def test_blocks_pack_their_rows_and_places_whatever_the_steps():
    """A flush's blocks are packed at once (16-bit steps) when every bucket's rows ascend closely, and
    block by block otherwise (gaps of 65,536 or more, rows out of order): each block's rows and places,
    before and after pickle, are its rows' in the order given."""
    import pickle

    import numpy as np

    from tfrecorder.rows.duplicate_groups import blocks_by_bucket, record_digests

    rng = np.random.default_rng(3)
    digests = _each(record_digests([bytes([i % 256, i // 256]) for i in range(3_000)]))
    buckets = np.array([bucket_of(d) for d in digests])
    close = np.arange(3_000, dtype=np.int64) * 3 + 10**12  # ascending, large values, small steps
    for rows in (close, close * 70_000, rng.permutation(close)):
        places = np.column_stack([rows % 5, rows % 100_000, -(rows % 2)]).astype(np.int64)  # a negative column
        blocks = blocks_by_bucket("p", "TRAIN", digests, rows, places, ("a",) * 5, "k")
        for bucket, block in blocks.items():
            for copy in (block, pickle.loads(pickle.dumps(block, protocol=5))):
                assert copy.rows.tolist() == rows[buckets == bucket].tolist()
                assert copy.places.tolist() == places[buckets == bucket].tolist()
                assert copy.size == int((buckets == bucket).sum())


def test_a_grouping_key_carries_as_many_buckets_as_keep_it_small():
    """Powers of two, at most MAX_BUCKETS_PER_KEY, each key at most KEY_ROWS rows (rows / BUCKETS a
    bucket) wherever one bucket a key fits."""
    from tfrecorder.rows.duplicate_groups import BUCKETS, KEY_ROWS, MAX_BUCKETS_PER_KEY, buckets_per_key

    assert buckets_per_key(0) == buckets_per_key(1_000_000) == MAX_BUCKETS_PER_KEY
    assert buckets_per_key(10_000_000) == 4 and buckets_per_key(100_000_000) == 1
    for rows in (1, 10**5, 4 * 10**6, 5 * 10**6, 3 * 10**7, 6 * 10**7, 10**9):
        count = buckets_per_key(rows)
        assert count & (count - 1) == 0 and 1 <= count <= MAX_BUCKETS_PER_KEY
        assert count == 1 or rows * count / BUCKETS <= KEY_ROWS
        assert count == MAX_BUCKETS_PER_KEY or rows * 2 * count / BUCKETS > KEY_ROWS
