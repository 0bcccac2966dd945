"""load(), inspect() and verify() on directories written in TFRecorder 2.0's format (tests/support/tfrecorder2_writer.py)."""
from __future__ import annotations

import csv
import gzip
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import tfrecorder
from tfrecorder.format import legacy_dir
from tfrecorder.format.job_info import JobInfo
from support.tfrecorder2_writer import sample_image_table, source_pixels, write_tfrecorder2_dir


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return sample_image_table(tmp_path_factory.mktemp("images"))


@pytest.fixture(scope="module")
def legacy(table, tmp_path_factory) -> Path:
    return write_tfrecorder2_dir(tmp_path_factory.mktemp("legacy"), table)


def _copy(legacy: Path, tmp_path: Path) -> Path:
    target = tmp_path / legacy.name
    shutil.copytree(legacy, target)
    return target


def _by_name(dataset) -> dict[str, dict]:
    return {x["image_name"].numpy().decode(): {k: v.numpy() for k, v in x.items()} for x in dataset}


def test_detected_from_files(legacy):
    job = JobInfo.read(str(legacy))
    assert job.legacy and job.compression == "gzip" and job.splits == ["TRAIN", "VALIDATION", "TEST"]
    assert job.schema.to_json() == {"image_uri": "ImageUri", "label": "StringLabel", "split": "SplitKey"}
    assert job.metadata["vocabularies"]["label"] == (legacy / legacy_dir.ASSETS_DIR /
                                                     "vocab_compute_and_apply_vocabulary_vocabulary").read_text().split()
    assert job.metadata["discard_files"] == ["discarded-data-00000-of-00001"]


def test_not_a_job_directory_keeps_its_message(tmp_path):
    with pytest.raises(ValueError, match="not a finished tfrecorder job directory"):
        tfrecorder.load(str(tmp_path))
    (tmp_path / "schema.pbtxt").write_text('feature { name: "x" type: INT shape { } }\n')
    with pytest.raises(ValueError, match="no shard files"):
        tfrecorder.load(str(tmp_path))


def test_load_returns_pixels_and_label_indices(legacy, table):
    datasets = tfrecorder.load(str(legacy))
    assert list(datasets) == ["TRAIN", "VALIDATION", "TEST"]
    vocabulary = datasets.vocabularies["label"]
    labels = {Path(r.image_uri).name: r.label for r in table.itertuples()}
    paths = {Path(r.image_uri).name: r.image_uri for r in table.itertuples()}
    for split in ("VALIDATION", "TEST"):
        for name, x in _by_name(datasets[split]).items():
            expected = source_pixels(paths[name])
            assert x["image"].dtype == np.uint8 and x["image"].shape == expected.shape
            np.testing.assert_array_equal(x["image"], expected)
            index = int(x["label"])
            assert (vocabulary[index] if index >= 0 else None) == (labels[name] if labels[name] in vocabulary else None)
            assert x["split"].decode() == split
    assert "fox" not in vocabulary  # a VALIDATION-only label came back as -1


def test_load_options_resize_channels_and_supervised(legacy, tf):
    batch = next(iter(tfrecorder.load(str(legacy), "test", batch_size=4, image_size=(8, 10), channels=3)))
    assert batch["image"].shape == (1, 8, 10, 3) and batch["image"].dtype == tf.uint8
    image, label = next(iter(tfrecorder.load(str(legacy), "validation", as_supervised=True, channels=1)))
    assert image.shape[2] == 1 and label.dtype == tf.int64
    raw = next(iter(tfrecorder.load(str(legacy), "test", decode_images=False)))
    assert raw["image"].dtype == tf.string  # as stored: base64 pixels, what TFRecorder 2.0's load() returned


def test_load_names_inconsistent_pixels(legacy, tf):
    with pytest.raises(tf.errors.InvalidArgumentError, match="pixel data does not match"):
        list(tfrecorder.load(str(legacy), "train"))


def test_verify_checks_what_it_can_and_says_what_it_cannot(legacy, table):
    report = tfrecorder.verify(str(legacy))
    assert not report.ok  # the RGBA image: 4 bytes per pixel stored with image_channels=3
    assert [p for p in report.all_problems if "pixel data does not match" in p and "train-00000" in p]
    assert len(report.all_problems) == 1
    assert sum(s.records for s in report.shards) == len(table) - 2  # 2.0 discarded missing.jpg and UNASSIGNED
    assert any("record counts" in note for note in report.not_checked) and "not checked:" in str(report)
    assert "no count recorded" in str(report)


def test_verify_finds_damage(table, tmp_path):
    clean = table[~table.image_uri.str.contains("rgba")]
    legacy = write_tfrecorder2_dir(tmp_path / "a", clean, num_shards=2)
    assert tfrecorder.verify(str(legacy)).ok
    shard = legacy / "train-00001-of-00002.tfrecord.gz"
    records = gzip.decompress(shard.read_bytes())
    damaged = bytearray(records)
    damaged[40] ^= 0xFF
    shard.write_bytes(gzip.compress(bytes(damaged)))
    problems = tfrecorder.verify(str(legacy)).all_problems
    assert any("checksum mismatch" in p for p in problems)
    shard.write_bytes(gzip.compress(records)[:-30])
    assert any("broken gzip stream" in p for p in tfrecorder.verify(str(legacy)).all_problems)
    shard.unlink()
    problems = tfrecorder.verify(str(legacy)).all_problems
    assert any("missing shard numbers [1]" in p for p in problems)


def test_uncompressed_and_structured_legacy(tmp_path, tf):
    import pandas as pd

    frame = pd.DataFrame({"split": ["TRAIN", "TRAIN", "TEST"], "x": [0.5, 1.5, 2.5], "y": [1, 2, 3],
                          "name": ["a", "b", "c"], "label": [0, 1, 1]})
    schema = {"split": "SplitKey", "x": "FloatInput", "y": "IntegerInput", "name": "StringInput", "label": "IntegerLabel"}
    legacy = write_tfrecorder2_dir(tmp_path, frame, schema, compression=None)
    assert {"train-00000-of-00001.tfrecord", "test-00000-of-00001.tfrecord"} <= set(os.listdir(legacy))
    job = JobInfo.read(str(legacy))
    assert job.compression is None and job.schema.to_json() == {
        "label": "IntegerLabel", "name": "StringInput", "split": "SplitKey", "x": "FloatInput", "y": "IntegerInput"}
    rows = [{k: v.numpy() for k, v in x.items()} for x in tfrecorder.load(str(legacy), "train")]
    assert sorted((float(r["x"]), int(r["y"]), r["name"].decode(), int(r["label"])) for r in rows) == [
        (0.5, 1, "a", 0), (1.5, 2, "b", 1)]
    assert tfrecorder.verify(str(legacy)).ok


def test_inspect_writes_png_images_and_label_names(legacy, tmp_path):
    out = tfrecorder.inspect(tfrecord_dir=str(legacy), split="VALIDATION", num_records=5, output_dir=str(tmp_path / "o"))
    with open(os.path.join(out, "records.csv"), newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert sorted(r["image_name"] for r in rows) == ["val-0.jpg", "val-1.jpg"]
    assert {r["label_name"] for r in rows} == {"dog", "<unknown>"}
    for row in rows:
        from PIL import Image

        with Image.open(os.path.join(out, row["image_file"])) as image:
            assert image.format == "PNG" and image.size == (int(row["image_width"]), int(row["image_height"]))
    assert os.path.exists(os.path.join(out, "contact_sheet.png"))


def test_schema_text_format_parser():
    text = '''# a comment
    feature { name: "v" type: FLOAT shape { dim { size: 3 } } presence { min_fraction: 1.0 } }
    feature { name: "s" type: BYTES }
    feature { name: "l" type: INT int_domain { min: -1 max: 4 is_categorical: true } shape { } }
    '''
    parsed = legacy_dir.parse_schema(text)
    assert parsed["v"]["shape"] == [3] and parsed["s"]["shape"] is None
    assert parsed["l"]["categorical"] and parsed["l"]["max"] == 4 and parsed["l"]["shape"] == []
    with pytest.raises(ValueError, match="unsupported type"):
        legacy_dir.parse_schema('feature { name: "q" type: STRUCT }')
    with pytest.raises(ValueError, match="ends inside message 'feature'"):
        legacy_dir.parse_schema('feature { name: "q" type: INT ')
    assert list(legacy_dir.parse_schema('feature { name: "gr\\303\\266\\303\\237e \\"x\\"" type: INT }')) == ['größe "x"']


def test_cli_verify_and_inspect_a_legacy_directory(legacy, tmp_path):
    import subprocess
    import sys

    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-m", "tfrecorder", "verify", str(legacy)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 3 and "pixel data does not match" in done.stdout and "not checked: record counts" in done.stdout
    done = subprocess.run([sys.executable, "-m", "tfrecorder", "inspect", f"--tfrecord-dir={legacy}", "--split=test",
                           f"--output_dir={tmp_path}"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert os.path.exists(tmp_path / "0000_image.png")
