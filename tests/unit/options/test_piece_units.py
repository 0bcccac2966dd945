from tfrecorder.core.schema import Schema
from tfrecorder.options.job_config import BATCH_ROWS
from tfrecorder.options.piece_units import MAX_UNIT_BATCHES, MIN_UNIT_BATCHES, UNITS_PER_JOB, unit_batches

IMAGES = Schema({"split": "SplitKey", "image_uri": "ImageUri", "label": "StringLabel"})
TABLE = Schema({"split": "SplitKey", "n": "IntegerInput", "label": "StringLabel"})


def test_units_grow_with_a_header_mode_job_and_keep_enough_of_them_for_the_encoding_processes():
    assert unit_batches(0, IMAGES, "header") == MIN_UNIT_BATCHES
    assert unit_batches(5_000, IMAGES, "header") == 9  # 5,000 rows: 9 units of 576 rows
    for rows in (1_000, 5_000, 12_000, MAX_UNIT_BATCHES * BATCH_ROWS * UNITS_PER_JOB):
        batches = unit_batches(rows, IMAGES, "header")
        assert MIN_UNIT_BATCHES <= batches <= MAX_UNIT_BATCHES
        assert rows // (batches * BATCH_ROWS) >= min(UNITS_PER_JOB, rows // (MIN_UNIT_BATCHES * BATCH_ROWS))
    assert unit_batches(20_000, IMAGES, "header") == MAX_UNIT_BATCHES  # ~130 MB training pieces of 80 KB images
    assert unit_batches(10 ** 8, IMAGES, "header") == MAX_UNIT_BATCHES  # a piece's size stays bounded


def test_a_job_that_decodes_its_images_in_one_process_takes_the_largest_units():
    assert unit_batches(100, IMAGES, "decode") == MAX_UNIT_BATCHES
    assert unit_batches(100, TABLE, "decode") == MIN_UNIT_BATCHES  # nothing to decode: sized like header mode
