"""tfrecorder.format.legacy.v2_directory: directories written in TFRecorder 2.0's format (tests/support/tfrecorder2_writer.py)
read as job directories: detection, schema.pbtxt, load() of structured records and inspect()."""
from __future__ import annotations

import csv
import os

import pytest

import tfrecorder
from tfrecorder.format.legacy import v2_directory
from tfrecorder.format.finished_job import JobInfo
from support.tfrecorder2_writer import write_tfrecorder2_dir


def test_detected_from_files(legacy_job):
    job = JobInfo.read(str(legacy_job))
    assert job.legacy and job.compression == "gzip" and job.splits == ["TRAIN", "VALIDATION", "TEST"]
    assert job.schema.to_json() == {"image_uri": "ImageUri", "label": "StringLabel", "split": "SplitKey"}
    assert job.metadata["vocabularies"]["label"] == (legacy_job / v2_directory.ASSETS_DIR /
                                                     "vocab_compute_and_apply_vocabulary_vocabulary").read_text().split()
    assert job.metadata["discard_files"] == ["discarded-data-00000-of-00001"]


def test_not_a_job_directory_keeps_its_message(tmp_path):
    with pytest.raises(ValueError, match="not a finished tfrecorder job directory"):
        tfrecorder.load(str(tmp_path))
    (tmp_path / "schema.pbtxt").write_text('feature { name: "x" type: INT shape { } }\n')
    with pytest.raises(ValueError, match="no shard files"):
        tfrecorder.load(str(tmp_path))


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


def test_inspect_writes_png_images_and_label_names(legacy_job, tmp_path):
    out = tfrecorder.inspect(tfrecord_dir=str(legacy_job), split="VALIDATION", num_records=5, output_dir=str(tmp_path / "o"))
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
    parsed = v2_directory.parse_schema(text)
    assert parsed["v"]["shape"] == [3] and parsed["s"]["shape"] is None
    assert parsed["l"]["categorical"] and parsed["l"]["max"] == 4 and parsed["l"]["shape"] == []
    with pytest.raises(ValueError, match="unsupported type"):
        v2_directory.parse_schema('feature { name: "q" type: STRUCT }')
    with pytest.raises(ValueError, match="ends inside message 'feature'"):
        v2_directory.parse_schema('feature { name: "q" type: INT ')
    assert list(v2_directory.parse_schema('feature { name: "gr\\303\\266\\303\\237e \\"x\\"" type: INT }')) == ['größe "x"']
