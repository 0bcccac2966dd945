"""WrittenRows: statistics per bundle, digests per batch by bucket; StatisticsFn merges bundles."""
import numpy as np
import pyarrow as pa

from beam_pipelines.steps.collect_statistics import NEAR_OFFSET, QUALITY, STATISTICS_KEY, WrittenRows, part_label
from tfrecorder.core import types
from tfrecorder.core.schema import Schema
from tfrecorder.io.image_probe import ImageInfo
from tfrecorder.rows.duplicate_groups import content_digest, groups_in
from tfrecorder.sources.csv_slicing import Slice
from tfrecorder.sources.parquet_parts import ParquetPart
from tfrecorder.sources.staged_rows import StagedPart

SCHEMA = Schema({"image_uri": types.ImageUri, "label": types.StringLabel})


def test_rows_feed_statistics_and_digests_leave_with_their_batch():
    written = WrittenRows(SCHEMA)
    info = ImageInfo("jpeg", 4, 5, 3)
    written.add_row("TRAIN", {"image_uri": "a.jpg", "label": "x"}, [("image_uri", "a.jpg", info, b"same")], b"ex")
    written.add_row("TEST", {"image_uri": "b.jpg", "label": "x"}, [("image_uri", "b.jpg", info, b"same")], b"ex")
    assert list(written.end_batch()) == []  # digests wait for FLUSH_ENTRIES of them, or the bundle's end
    outputs = list(written.finish())
    assert {o.tag for o in outputs} == {QUALITY}
    (bucket, entries), (key, statistics) = (o.value for o in outputs)
    assert 0 <= bucket < NEAR_OFFSET and key == STATISTICS_KEY
    assert entries == [(content_digest(b"same"), "TRAIN", "a.jpg"), (content_digest(b"same"), "TEST", "b.jpg")]
    assert statistics.rows == {"TRAIN": 1, "TEST": 1}
    assert written.take_statistics() is None and list(written.finish()) == []  # a fresh accumulator


def test_digests_leave_by_bucket_once_enough_are_held(monkeypatch):
    from beam_pipelines.steps import collect_statistics

    monkeypatch.setattr(collect_statistics, "FLUSH_ENTRIES", 3)
    monkeypatch.setattr(collect_statistics, "STATISTICS_ROWS", 3)
    written = WrittenRows(SCHEMA)
    info = ImageInfo("jpeg", 4, 5, 3)
    for i in range(3):
        written.add_row("TRAIN", {"image_uri": f"{i}.jpg", "label": "x"}, [("image_uri", f"{i}.jpg", info, bytes([i]))], b"")
    flushed = list(written.end_batch())
    assert sum(len(o.value[1]) for o in flushed) == 3 and all(o.value[0] < NEAR_OFFSET for o in flushed)
    written.add_row("TRAIN", {"image_uri": "x.jpg", "label": "x"}, [("image_uri", "x.jpg", info, b"x")], b"")
    assert written.take_statistics().value[1].rows == {"TRAIN": 3}  # a failed bundle: its held digests go too
    assert list(written.flush()) == []


def test_rows_enter_the_statistics_a_thousand_at_a_time_and_all_by_the_bundles_end(monkeypatch):
    from beam_pipelines.steps import collect_statistics

    monkeypatch.setattr(collect_statistics, "STATISTICS_ROWS", 4)
    written = WrittenRows(SCHEMA)
    info = ImageInfo("jpeg", 4, 5, 3)
    for i in range(6):
        written.add_row("TRAIN" if i % 2 else "TEST", {"image_uri": f"{i}.jpg", "label": "x"},
                        [("image_uri", f"{i}.jpg", info, bytes([i]))], b"")
        list(written.end_batch())
        assert sum(written.statistics.rows.values()) == (4 if i >= 3 else 0)
    statistics = [o.value[1] for o in written.finish() if o.value[0] == STATISTICS_KEY][0]
    assert statistics.rows == {"TRAIN": 3, "TEST": 3}
    assert statistics.features["TRAIN"]["image_uri"].present == 3  # the held rows' image facts too
    written.add_row("TRAIN", {"image_uri": "x.jpg", "label": "x"}, [("image_uri", "x.jpg", info, b"x")], b"")
    assert written.take_statistics() is None  # a failed bundle's held rows are dropped with it


def test_image_free_rows_hash_their_records():
    written = WrittenRows(Schema({"n": types.IntegerInput}))
    records = pa.array([b"r1", b"r2", b"r1"], type=pa.large_binary()).slice(0, 3)
    written.add_records("TRAIN", pa.RecordBatch.from_pydict({"n": [1, 2, 1]}), records, "p", np.array([0, 1, 2]))
    list(written.end_batch())
    outputs = list(written.finish())
    blocks = [block for o in outputs if o.value[0] != STATISTICS_KEY for block in o.value[1]]
    [group] = [g for block in blocks for g in groups_in([block])]
    assert group.members == (("TRAIN", "p row 0"), ("TRAIN", "p row 2"))
    assert outputs[-1].value[1].rows == {"TRAIN": 3}


def test_part_labels(tmp_path):
    assert part_label(ParquetPart("/data/x.parquet", 2), "/job/_work") == "x.parquet row group 2"
    assert part_label(StagedPart("/job/_work/rows.arrow", 0), "/job/_work") == "DataFrame row group 0"
    assert part_label(Slice(0, 120, 400), "/w") == "CSV bytes from 120"


def test_near_duplicate_band_keys_leave_with_an_offset():
    written = WrittenRows(SCHEMA, near_duplicates=True)
    from support.natural_images import encoded, photo

    data = encoded(photo(1), "JPEG")
    written.add_row("TRAIN", {"image_uri": "a.jpg", "label": "x"}, [("image_uri", "a.jpg", ImageInfo("jpeg", 240, 320, 3), data)], b"")
    list(written.end_batch())
    keys = [o.value[0] for o in written.finish()]
    near = [key for key in keys if key >= NEAR_OFFSET]
    assert len(near) > 1 and STATISTICS_KEY in keys and len(keys) - len(near) == 2


def test_near_band_keys_go_to_as_many_buckets_as_the_jobs_shift_makes():
    """The job's shift (JobConfig.near_bucket_shift) sets the LSH buckets: with 16 of them an image's
    entry goes to 12 (1 + 2 a band), each key NEAR_OFFSET + bucket_of_key(key, shift)."""
    from tfrecorder.rows.near_duplicates import MAX_BUCKET_SHIFT, bucket_count, bucket_of_key

    written = WrittenRows(SCHEMA, near_duplicates=True, near_shift=MAX_BUCKET_SHIFT)
    written.add_row("TRAIN", {"image_uri": "a.jpg", "label": "x"},
                    [("image_uri", "a.jpg", ImageInfo("jpeg", 240, 320, 3), b"")], b"", phash=0x0123456789ABCDEF)
    near = [o.value for o in written.finish() if o.value[0] >= NEAR_OFFSET]
    assert len(near) == 12 and all(key - NEAR_OFFSET < bucket_count(MAX_BUCKET_SHIFT) for key, _block in near)
    assert all(bucket_of_key(band, MAX_BUCKET_SHIFT) == key - NEAR_OFFSET for key, block in near for band, _h, _e in block)


def test_a_parts_batches_send_hashes_banded_once_for_the_part():
    """A resumable job's batches (near_by_part) send their hashes as they are; merged_by_key bands them
    for the whole part and joins every bucket's values: one pair per key, as one flush of all would give."""
    from beam_pipelines.steps.collect_statistics import NEAR_ENTRIES, merged_by_key
    from support.natural_images import encoded, photo

    images = [encoded(photo(seed), "JPEG") for seed in range(4)]
    by_part, whole = WrittenRows(SCHEMA, near_duplicates=True, near_by_part=True), WrittenRows(SCHEMA, near_duplicates=True)
    pairs = []
    for index, data in enumerate(images):
        for written in (by_part, whole):
            written.add_row("TRAIN", {"image_uri": f"{index}.jpg", "label": "x"},
                            [("image_uri", f"{index}.jpg", ImageInfo("jpeg", 240, 320, 3), data)], b"")
        if index % 2:  # a part of two batches
            pairs.extend(output.value for output in by_part.finish() if output.value[0] != STATISTICS_KEY)
    assert sum(key == NEAR_ENTRIES for key, _value in pairs) == 2
    merged = merged_by_key(pairs)
    assert len(merged_by_key(pairs, 14)) < len(merged)  # the job's shift: fewer buckets, fewer pairs
    expected = sorted((output.value for output in whole.finish() if output.value[0] != STATISTICS_KEY),
                      key=lambda pair: pair[0])
    assert [key for key, _value in merged] == [key for key, _value in expected]
    for (key, value), (_key, wanted) in zip(merged, expected):
        assert sorted(value, key=repr) == sorted(wanted, key=repr), key


def test_image_free_rows_with_places_keep_their_pieces_across_batches():
    """duplicates="drop": each batch's places index its own piece names; held together they index the
    block's names (a piece a later batch goes on writing is named once)."""
    written = WrittenRows(Schema({"n": types.IntegerInput}))
    batch = pa.RecordBatch.from_pydict({"n": [1, 2]})
    first = np.array([[0, 0, 0], [1, 0, 1]], dtype=np.int64)  # records 0 of pieces "a" and "b"
    written.add_records("TRAIN", batch, pa.array([b"r1", b"r2"], type=pa.large_binary()), "p", np.array([0, 1]),
                        ("k", ["a", "b"], first))
    second = np.array([[0, 1, 0], [1, 0, 0]], dtype=np.int64)  # record 1 of "b", record 0 of "c"
    written.add_records("TRAIN", batch, pa.array([b"r1", b"r3"], type=pa.large_binary()), "p", np.array([2, 3]),
                        ("k", ["b", "c"], second))
    blocks = [block for o in written.finish() if o.value[0] != STATISTICS_KEY for block in o.value[1]]
    [group] = [g for block in blocks for g in groups_in([block])]
    assert group.places == (("a", 0, 0, None, "k", 0), ("b", 1, 0, None, "k", 2))
    located = {int(row): (block.pieces[int(p)], int(r)) for block in blocks
               for row, (p, r, _u) in zip(block.rows, block.places)}
    assert located == {0: ("a", 0), 1: ("b", 0), 2: ("b", 1), 3: ("c", 0)}


def test_a_buckets_blocks_leave_and_merge_as_one_pickled_object():
    """Image-free rows' blocks leave a flush as DigestBlocks (pickled as one: their class and part label
    once), and a part's flushes merged by bucket stay so."""
    from beam_pipelines.steps.collect_statistics import merged_by_key
    from tfrecorder.rows.duplicate_groups import DigestBlocks

    written = WrittenRows(Schema({"n": types.IntegerInput}))
    pairs = []
    for flush in range(2):
        records = pa.array([b"r%d" % i for i in range(50)], type=pa.large_binary())
        written.add_records("TRAIN", pa.RecordBatch.from_pydict({"n": list(range(50))}), records, "p",
                            np.arange(50) + 50 * flush)
        pairs.extend(o.value for o in written.flush())
    assert pairs and all(type(value) is DigestBlocks for _key, value in pairs)
    merged = merged_by_key(pairs)
    assert all(type(value) is DigestBlocks for _key, value in merged)
    assert sum(block.size for _key, value in merged for block in value) == 100
    groups = [g.members for _key, value in merged for g in groups_in(value)]  # r0..r49 written twice
    assert len(groups) == 50 and (("TRAIN", "p row 0"), ("TRAIN", "p row 50")) in groups
