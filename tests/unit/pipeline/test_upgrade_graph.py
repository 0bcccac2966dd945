"""beam_pipelines.graphs.upgrade_graph: legacy shards read in parts and re-encoded, 2.0's discards carried over."""
from __future__ import annotations

import gzip
import os

import pandas as pd
import pytest
from apache_beam.pvalue import TaggedOutput

from beam_pipelines.graphs.upgrade_graph import READ, ShardPart, UpgradeRecords, legacy_discards, open_legacy_shard
from support.tfrecorder2_writer import write_tfrecorder2_dir
from tfrecorder.core.schema import Schema
from tfrecorder.format.example_decoder import parse_example
from tfrecorder.format.finished_job import JobInfo
from tfrecorder.format.framing import read_records
from tfrecorder.options.job_config import JobConfig

SHARD = "train-00000-of-00001.tfrecord"


@pytest.fixture(scope="module")
def legacy(tmp_path_factory):
    frame = pd.DataFrame({"split": ["TRAIN"] * 9 + ["TEST"], "x": [i / 2 for i in range(10)], "n": range(10),
                          "label": ["yes", "no"] * 5})
    return write_tfrecorder2_dir(tmp_path_factory.mktemp("legacy"), frame,
                                 {"split": "SplitKey", "x": "FloatInput", "n": "IntegerInput", "label": "StringLabel"},
                                 compression=None)


def _upgrade(legacy_dir, temp_dir, parts: list[ShardPart]) -> list:
    schema = Schema.from_json(JobInfo.read(str(legacy_dir)).metadata["schema"])
    config = JobConfig(source=None, schema=schema, columns=(), base_dir="", final_dir="", temp_dir=str(temp_dir),
                       job_name="", runner="DirectRunner", split_ratios=(0.8, 0.1, 0.1), num_shards=0,
                       max_shard_bytes=1 << 20, compression=None, image_size=None, validate="header")
    upgrade = UpgradeRecords(config, str(legacy_dir), None)
    upgrade.setup()
    upgrade.start_bundle()
    outputs = [out for part in parts for out in upgrade.process(part)]
    return outputs + [windowed.value for windowed in upgrade.finish_bundle()]


def _values(piece) -> list[int]:
    with open(piece.path, "rb") as stream:
        return [int(parse_example(record)["n"][0]) for record in read_records(stream)]


def test_parts_of_a_shard_take_every_nth_record_and_count_what_they_read(legacy, tmp_path):
    outputs = _upgrade(legacy, tmp_path, [ShardPart("TRAIN", SHARD, 0, 2), ShardPart("TRAIN", SHARD, 1, 2)])
    reads = [out.value for out in outputs if isinstance(out, TaggedOutput) and out.tag == READ]
    assert reads == [5, 4]  # records 0, 2, 4, 6, 8, then 1, 3, 5, 7
    [piece] = [out for out in outputs if not isinstance(out, TaggedOutput)]  # one open piece for the bundle
    assert piece.split == "TRAIN" and sorted(_values(piece)) == list(range(9))


def test_a_truncated_shard_cannot_be_upgraded(legacy, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in os.listdir(legacy):
        if os.path.isfile(legacy / name):
            (broken / name).write_bytes((legacy / name).read_bytes())
    (broken / SHARD).write_bytes((legacy / SHARD).read_bytes()[:-10])
    (broken / "transformed_metadata").mkdir()
    (broken / "transformed_metadata" / "schema.pbtxt").write_bytes((legacy / "schema.pbtxt").read_bytes())
    with pytest.raises(ValueError, match=f"^corrupt TFRecorder 2.0 shard {SHARD}: .*reports the damage\\)$"):
        _upgrade(broken, tmp_path / "out", [ShardPart("TRAIN", SHARD, 0, 1)])


def test_legacy_discard_lines_are_discards_numbered_by_line(tmp_path):
    (tmp_path / "discarded-data-00000-of-00001").write_text("{'split': 'DISCARD', 'n': 1}\n\n{'n': 2}\n")
    assert list(legacy_discards("discarded-data-00000-of-00001", str(tmp_path))) == [
        ({"split": "", "source": "discarded-data-00000-of-00001", "record": 0, "image_name": ""},
         "discarded by TFRecorder 2.0: {'split': 'DISCARD', 'n': 1}"),
        ({"split": "", "source": "discarded-data-00000-of-00001", "record": 2, "image_name": ""},
         "discarded by TFRecorder 2.0: {'n': 2}")]


def test_gzip_shards_are_opened_decompressed(tmp_path):
    (tmp_path / "s.gz").write_bytes(gzip.compress(b"framed records"))
    with open_legacy_shard(str(tmp_path / "s.gz"), "gzip") as stream:
        assert stream.read() == b"framed records"
    with open_legacy_shard(str(tmp_path / "s.gz"), None) as stream:
        assert stream.read() == gzip.compress(b"framed records")
