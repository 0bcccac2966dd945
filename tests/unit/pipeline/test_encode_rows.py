"""The pure parts of the conversion graph's DoFns and CombineFns, without running a pipeline."""
from __future__ import annotations

import pytest

from beam_pipelines.steps import encode_rows
from beam_pipelines.steps.count_table import VocabularyFn
from beam_pipelines.steps.discard_files import DISCARD
from beam_pipelines.steps.prepare_rows import PrepareRows
from tfrecorder.core import types
from beam_pipelines.job_config import JobConfig
from tfrecorder.core.schema import Schema
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


def test_vocabulary_merges_batches_into_sorted_distinct_labels():
    fn = VocabularyFn()
    first = fn.add_input(fn.create_accumulator(), {"label": {"dog", "cat"}})
    second = fn.add_input(fn.add_input(fn.create_accumulator(), {"label": {"ant"}}), {"kind": {"b", "a"}})
    merged = fn.merge_accumulators([first, second, fn.create_accumulator()])
    assert fn.extract_output(merged) == {"label": ["ant", "cat", "dog"], "kind": ["a", "b"]}


def test_read_image_discards_problems_of_the_path_and_raises_storage_failures(tmp_path):
    from tfrecorder.errors import StorageReadError
    from tfrecorder.rows.row_encoding import RowError

    image = tmp_path / "a.jpg"
    image.write_bytes(b"bytes")
    assert encode_rows.read_image(str(image)) == b"bytes"
    row_problems = {
        str(tmp_path / "missing.jpg"): "missing file: ",
        str(image / "under-a-file.jpg"): "missing file: ",
        str(tmp_path): "not a file: ",
        str(tmp_path / ("x" * 300)): "invalid path: ",
        "nul\x00byte.jpg": "invalid path: ",
    }
    for uri, reason in row_problems.items():
        with pytest.raises(RowError, match=f"^{reason}"):
            encode_rows.read_image(uri)
    with pytest.raises(StorageReadError, match=r"could not read /proc/self/mem: Input/output error"):
        encode_rows.read_image("/proc/self/mem")  # the kernel answers EIO: a device error, not the row's fault
