"""tfrecorder.upgrade(): TFRecorder 2.0 directories rewritten as job directories, every record accounted for."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tfrecorder
from tfrecorder.format.finished_job import JobInfo
from support.tfrecorder2_writer import sample_image_table, write_tfrecorder2_dir


@pytest.fixture(scope="module")
def legacy(tmp_path_factory) -> Path:
    table = sample_image_table(tmp_path_factory.mktemp("images"))
    return write_tfrecorder2_dir(tmp_path_factory.mktemp("legacy"), table, compression=None)


@pytest.fixture(scope="module")
def upgraded(legacy, tmp_path_factory):
    # bundle replay: every bundle runs twice, the first attempt's files left behind, as on a retry
    return tfrecorder.upgrade(legacy, tmp_path_factory.mktemp("out"), dataflow_options={"direct_runner_bundle_repeat": 1})


def _records(tfrecord_dir: str, split: str) -> dict[str, dict]:
    key = "image_name" if JobInfo.read(tfrecord_dir).legacy else "image_uri"
    return {x[key].numpy().decode(): {k: v.numpy() for k, v in x.items()}
            for x in tfrecorder.load(tfrecord_dir, split).ignore_errors()}


def _discards(tfrecord_dir: str) -> list[dict]:
    with open(os.path.join(tfrecord_dir, "discarded.csv"), newline="") as stream:
        return list(csv.DictReader(stream))


def test_every_record_accounted_for(legacy, upgraded):
    legacy_records = sum(s.records for s in tfrecorder.verify(str(legacy)).shards)
    legacy_discards = (legacy / "discarded-data-00000-of-00001").read_text().splitlines()
    assert upgraded["rows_in"] == legacy_records + len(legacy_discards)
    assert sum(upgraded["written"].values()) + upgraded["discarded"] == upgraded["rows_in"]
    reasons = {row["reason"].split(":")[0] for row in _discards(upgraded["tfrecord_dir"])}
    assert reasons == {"discarded by TFRecorder 2.0", "pixel data does not match image_height x image_width x image_channels"}
    bad = [row for row in _discards(upgraded["tfrecord_dir"]) if row["source"].startswith("train-")]
    assert [row["image_name"] for row in bad] == ["train-rgba.png"]
    assert tfrecorder.verify(upgraded["tfrecord_dir"]).ok


def test_pixels_labels_vocabulary_and_splits_kept(legacy, upgraded):
    new = upgraded["tfrecord_dir"]
    metadata = JobInfo.read(new).metadata
    assert metadata["vocabularies"] == JobInfo.read(str(legacy)).metadata["vocabularies"]  # 2.0's order kept
    assert metadata["upgraded_from"]["format"] == "TFRecorder 2.0"
    assert set(upgraded["written"]) == {"TRAIN", "VALIDATION", "TEST"}
    assert metadata["splits"]["VALIDATION"]["unknown_labels"] == 1
    for split in ("TRAIN", "VALIDATION", "TEST"):
        before, after = _records(str(legacy), split), _records(new, split)
        assert set(after) == set(before) - {"train-rgba.png"}
        for name, old in after.items():
            np.testing.assert_array_equal(after[name]["image"], before[name]["image"])  # lossless
            assert after[name]["image_format"] == b"png" and after[name]["label"] == before[name]["label"]


def test_reports_bytes(upgraded):
    assert upgraded["input_bytes"] > 0 and upgraded["output_bytes"] == upgraded["bytes_written"]
    assert upgraded["output_bytes"] < upgraded["input_bytes"]
    assert "upgraded from TFRecorder 2.0" in repr(upgraded)


def test_upgrade_gzip_with_options(tmp_path):
    table = sample_image_table(tmp_path / "images")
    table = table[~table.image_uri.str.contains("rgba")]
    legacy = write_tfrecorder2_dir(tmp_path / "legacy", table, num_shards=3)
    result = tfrecorder.upgrade(str(legacy), str(tmp_path / "out"), job_label="pets", num_shards=2, compression="gzip")
    assert os.path.basename(result["tfrecord_dir"]).startswith("pets-")
    assert sorted(f for f in os.listdir(result["tfrecord_dir"]) if f.startswith("train")) == [
        "train-00000-of-00002.tfrecord.gz", "train-00001-of-00002.tfrecord.gz"]
    assert result["discarded"] == 2 and tfrecorder.verify(result["tfrecord_dir"]).ok


def test_large_shards_are_read_in_parts_by_parallel_workers(legacy, upgraded, tmp_path, monkeypatch):
    module = sys.modules["tfrecorder.upgrade"]
    monkeypatch.setattr(module, "PART_BYTES", 1_000)  # the fixture's TRAIN shard holds ~15 KB
    parts = module.shard_parts(JobInfo.read(str(legacy)), 3)
    assert [(p.file, p.index, p.count) for p in parts if p.split == "TRAIN"] == [
        ("train-00000-of-00001.tfrecord", i, 3) for i in range(3)]
    result = tfrecorder.upgrade(legacy, tmp_path, dataflow_options={"direct_num_workers": 3})
    assert result["written"] == upgraded["written"] and result["discarded"] == upgraded["discarded"]
    parallel, single = _records(result["tfrecord_dir"], "TRAIN"), _records(upgraded["tfrecord_dir"], "TRAIN")
    assert parallel.keys() == single.keys()
    for name in single:
        np.testing.assert_array_equal(parallel[name]["image"], single[name]["image"])


def test_structured_upgrade(tmp_path):
    import pandas as pd

    frame = pd.DataFrame({"split": ["TRAIN", "TRAIN", "VALIDATION"], "x": [0.5, 1.5, 2.5], "n": [7, 8, 9],
                          "tag": ["a", "b", "c"], "label": ["yes", "no", "yes"]})
    legacy = write_tfrecorder2_dir(tmp_path / "legacy", frame,
                                   {"split": "SplitKey", "x": "FloatInput", "n": "IntegerInput", "tag": "StringInput",
                                    "label": "StringLabel"})
    result = tfrecorder.upgrade(str(legacy), str(tmp_path / "out"))
    rows = [{k: v.numpy() for k, v in x.items()} for x in tfrecorder.load(result["tfrecord_dir"], "train")]
    vocabulary = result["metadata"]["vocabularies"]["label"]
    assert sorted((float(r["x"]), int(r["n"]), r["tag"].decode(), vocabulary[r["label"]]) for r in rows) == [
        (0.5, 7, "a", "yes"), (1.5, 8, "b", "no")]


def test_refuses_what_it_cannot_upgrade_completely(legacy, upgraded, tmp_path):
    with pytest.raises(ValueError, match="already a tfrecorder job directory"):
        tfrecorder.upgrade(upgraded["tfrecord_dir"], str(tmp_path / "out"))
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("schema.pbtxt", "train-00000-of-00001.tfrecord"):
        (broken / name).write_bytes((legacy / name).read_bytes())
    data = (broken / "train-00000-of-00001.tfrecord").read_bytes()
    (broken / "train-00000-of-00001.tfrecord").write_bytes(data[:-10])
    with pytest.raises(ValueError, match=r"^corrupt TFRecorder 2.0 shard train-00000-of-00001.tfrecord: truncated .*"
                                         r"reports the damage\)$"):
        tfrecorder.upgrade(str(broken), str(tmp_path / "out"))
    assert not os.listdir(tmp_path / "out")  # nothing published, no temporary directory left
    (broken / "train-00000-of-00001.tfrecord").rename(broken / "train-00000-of-00002.tfrecord")
    with pytest.raises(ValueError, match="missing shard numbers"):
        tfrecorder.upgrade(str(broken), str(tmp_path / "out"))


def test_cli_upgrade(legacy, tmp_path):
    done = subprocess.run([sys.executable, "-m", "tfrecorder", "upgrade", str(legacy), str(tmp_path / "out")],
                          capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "upgraded from TFRecorder 2.0" in done.stdout and "discarded: 3" in done.stdout
    (job,) = os.listdir(tmp_path / "out")
    assert json.loads((tmp_path / "out" / job / "metadata.json").read_text())["upgraded_from"]["directory"] == str(legacy)


def test_upgrade_on_portable_workers_publishes_what_the_in_process_run_does(legacy, upgraded, tmp_path):
    """Beam's embedded job service with SDK workers in processes of their own (the distributed graph,
    shards read in parts); workers that may run elsewhere cannot read a local legacy directory."""
    from support.portable import SUBPROCESS_WORKERS, published

    result = tfrecorder.upgrade(legacy, tmp_path / "portable", runner="PortableRunner", beam_options=SUBPROCESS_WORKERS)
    assert published(result["tfrecord_dir"], "PortableRunner") == published(upgraded["tfrecord_dir"], "DirectRunner")
    with pytest.raises(ValueError, match="FlinkRunner workers cannot read the local directory"):
        tfrecorder.upgrade(legacy, "gs://bucket/out", runner="FlinkRunner",
                           beam_options={"environment_type": "EXTERNAL", "environment_config": "localhost:50000"})
