"""beam_pipelines.steps.prepare_rows: splits assigned and labels checked per row; bad rows discarded and counted."""
from __future__ import annotations

import dataclasses

from beam_pipelines.steps.discard_files import DISCARD
from beam_pipelines.steps.prepare_rows import PrepareRows
from tfrecorder.core import types
from tfrecorder.core.progress_bar import rows_reported
from tfrecorder.core.schema import Schema
from tfrecorder.options.job_config import JobConfig
from tfrecorder.sources.csv_source import CsvRows


def _config() -> JobConfig:
    schema = Schema({"split": types.SplitKey, "image_uri": types.ImageUri, "label": types.StringLabel})
    return JobConfig(
        source=CsvRows("t.csv", 100, 10), schema=schema, columns=("split", "image_uri", "label"),
        base_dir="", final_dir="", temp_dir="", job_name="", runner="DirectRunner", split_ratios=(0.8, 0.1, 0.1),
        num_shards=0, max_shard_bytes=1 << 20, compression=None, image_size=None, validate="header",
    )


def test_prepare_emits_one_list_per_batch_and_discards_row_by_row():
    prepare = PrepareRows(_config())
    prepare.setup()
    good = {"split": "train", "image_uri": "a.jpg", "label": "cat"}
    bad_split = {"split": "holdout", "image_uri": "b.jpg", "label": "dog"}
    no_label = {"split": "TEST", "image_uri": "c.jpg", "label": None}
    outputs = list(prepare.process([good, bad_split, no_label]))
    main = [o for o in outputs if isinstance(o, list)]
    discards = [o.value for o in outputs if getattr(o, "tag", None) == DISCARD]
    assert main == [[("TRAIN", good)]]
    assert [(row["image_uri"], reason.split(":")[0]) for row, reason in discards] == [
        ("b.jpg", "unknown split"), ("c.jpg", "empty label")
    ]
    only_bad = list(prepare.process([bad_split]))
    assert len(only_bad) == 1 and only_bad[0].tag == DISCARD  # no empty batch is emitted




def test_discarded_rows_are_reported_done_and_good_ones_left_to_the_encoder(tmp_path):
    prepare = PrepareRows(dataclasses.replace(_config(), progress_dir=str(tmp_path)))
    prepare.setup()
    good = {"split": "", "image_uri": "a.jpg", "label": "cat"}  # no split: one is assigned from the URI
    [batch] = [o for o in prepare.process([good, good, {"split": "x", "image_uri": "b.jpg", "label": "dog"}])
               if isinstance(o, list)]
    assert [row for _split, row in batch] == [good, good] and batch[0][0] == batch[1][0] in {"TRAIN", "VALIDATION", "TEST"}
    assert rows_reported(str(tmp_path)) == 1  # the discarded row; written rows are counted when encoded
