"""AutoML Vision CSVs and Vertex AI JSONL files (local and gs://) → detection, multi-label and classification jobs."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import tfrecorder
from support.detection_records import discards_of, read_od_records
from tfrecorder.sources import annotation_files
from tfrecorder.format.example_decoder import parse_example
from tfrecorder.format.finished_job import JobInfo
from tfrecorder.sample_data import encode_image, photo_array

BUCKET = "annotations-bucket"


def write_images(directory: Path, names: list[str]) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for i, name in enumerate(names):
        paths[name] = directory / name
        paths[name].write_bytes(encode_image(Image.fromarray(photo_array(30, 40, i)), "JPEG"))
    return paths


def automl_detection_csv(paths: dict[str, Path]) -> str:
    a, b, c, d = (paths[n] for n in ("a.jpg", "b.jpg", "c.jpg", "d.jpg"))
    return "\n".join([
        f"TRAIN,{a},cat,0.1,0.2,,,0.5,0.6,,",  # two vertices
        f"train,{a},dog,0.5,0.1,0.3,0.1,0.3,0.6,0.5,0.6",  # four vertices: min/max
        f"TRAIN,{b},dog,0.2,0.2,,,0.4,0.4,,",
        f"VALIDATION,{c},,,,,,,,,",  # an image without boxes
        f"TEST,{d},cat,0.9,0.2,,,0.5,0.6,,",  # xmin > xmax
        f"TEST,{d},cat,0.1,0.2,,,0.5,1.6,,",  # outside [0, 1]
        f"TEST,{d},cat,0.1,0.2,,",  # too few fields
        f"UNASSIGNED,{b},cat,x,0.2,,,0.4,0.4,,",  # not a number
    ]) + "\n"


def test_formats_are_recognised_from_content(tmp_path):
    cases = {
        "cls.csv": ("TRAIN,gs://b/a.jpg,cat\nTEST,gs://b/b.jpg,dog\n", annotation_files.AUTOML_CLASSIFICATION),
        "nomluse.csv": ("gs://b/a.jpg,cat\ngs://b/b.jpg,dog\n", annotation_files.AUTOML_CLASSIFICATION),
        "multi.csv": ("train,gs://b/a.jpg,cat,dog\nTEST,gs://b/b.jpg,dog\n", annotation_files.AUTOML_MULTILABEL),
        "det.csv": ("TRAIN,gs://b/a.jpg,cat,0.1,0.2,,,0.5,0.6,,\nTEST,gs://b/b.jpg,,,,,,,,,\n",
                    annotation_files.AUTOML_DETECTION),
        "det4.csv": ("gs://b/a.jpg,cat,0.1,0.2,0.5,0.2,0.5,0.6,0.1,0.6\n", annotation_files.AUTOML_DETECTION),
        "header.csv": ("split,image_uri,label\nTRAIN,a.jpg,cat\n", None),
        "items.jsonl": ('{"imageGcsUri": "gs://b/a.jpg"}\n', annotation_files.VERTEX_JSONL),
    }
    for name, (text, expected) in cases.items():
        (tmp_path / name).write_text(text)
        assert annotation_files.detect_format(str(tmp_path / name)) == expected, name


def test_automl_detection_csv_end_to_end(tmp_path, tf):
    paths = write_images(tmp_path / "img", ["a.jpg", "b.jpg", "c.jpg", "d.jpg"])
    source = tmp_path / "boxes.csv"
    source.write_text(automl_detection_csv(paths))
    result = tfrecorder.convert(str(source), tmp_path / "out", progress=False)
    records = read_od_records(tf, result["tfrecord_dir"])
    assert set(records) == {str(paths[n]) for n in ("a.jpg", "b.jpg", "c.jpg")}
    a = records[str(paths["a.jpg"])]
    order = np.argsort(a["image/object/class/text"])
    assert list(a["image/object/class/text"][order]) == [b"cat", b"dog"]
    assert list(a["image/object/class/label"][order]) == [1, 2]
    np.testing.assert_allclose(a["image/object/bbox/xmin"][order], [0.1, 0.3])
    np.testing.assert_allclose(a["image/object/bbox/ymin"][order], [0.2, 0.1])
    np.testing.assert_allclose(a["image/object/bbox/ymax"][order], [0.6, 0.6])
    assert len(records[str(paths["c.jpg"])]["image/object/bbox/xmin"]) == 0
    metadata = result.metadata
    assert (metadata["rows_in"], metadata["rows_written"], metadata["records_written"], metadata["discarded"]) == (8, 4, 3, 4)
    discards = {row["line"]: row["reason"] for row in discards_of(result["tfrecord_dir"])}
    assert discards == {
        "5": "invalid box: xmin 0.9 > xmax 0.5",
        "6": "box outside the image: ymax 1.6 not in [0, 1]",
        "7": "malformed AutoML row: line 7 has 7 fields, a detection row has 11",
        "8": "invalid box: xmin is not a number ('x')",
    }
    assert (Path(result["tfrecord_dir"]) / "label_map.pbtxt").read_text().count("item {") == 2


def test_automl_multilabel_and_classification_csvs(tmp_path, tf):
    paths = write_images(tmp_path / "img", ["a.jpg", "b.jpg", "c.jpg"])
    multi = tmp_path / "multi.csv"
    multi.write_text(f"TRAIN,{paths['a.jpg']},cat,dog\nTRAIN,{paths['b.jpg']},dog\n"
                     f"TRAIN,{paths['c.jpg']},fox,cat,owl\n")
    result = tfrecorder.convert(str(multi), tmp_path / "out", progress=False)
    metadata = result.metadata
    assert metadata["schema"]["label"] == "MultiLabel"
    assert metadata["features"]["label"] == {"dtype": "int64", "shape": None, "allow_missing": False,
                                             "multi_label": True}
    vocabulary = metadata["vocabularies"]["label"]
    assert vocabulary == ["cat", "dog", "fox", "owl"]
    found = {}
    for example in tfrecorder.load(result["tfrecord_dir"], "train", decode_images=False):
        found[Path(example["image_uri"].numpy().decode()).name] = sorted(example["label"].numpy().tolist())
    assert found == {"a.jpg": [0, 1], "b.jpg": [1], "c.jpg": [0, 2, 3]}
    hot = next(iter(tfrecorder.load(result["tfrecord_dir"], "train", multi_hot=True, batch_size=3)))
    assert hot["label"].dtype == tf.float32 and hot["label"].shape == (3, 4)
    assert sorted(map(tuple, hot["label"].numpy().tolist())) == sorted(
        [(1, 1, 0, 0), (0, 1, 0, 0), (1, 0, 1, 1)])
    single = tmp_path / "single.csv"
    single.write_text(f"{paths['a.jpg']},cat\n{paths['b.jpg']},dog\n{paths['c.jpg']},cat,dog\n")
    sniffed = tfrecorder.convert(str(single), tmp_path / "out2", progress=False, split_ratios=(1.0, 0.0, 0.0))
    assert sniffed.metadata["schema"]["label"] == "MultiLabel" and sniffed["written"] == {"TRAIN": 3}
    forced = tfrecorder.convert(str(single), tmp_path / "out3", progress=False, split_ratios=(1.0, 0.0, 0.0),
                                annotation_format="automl_classification")
    assert forced.metadata["schema"]["label"] == "StringLabel" and forced["written"] == {"TRAIN": 2}
    [discard] = discards_of(forced["tfrecord_dir"])
    assert discard["line"] == "3" and "line 3 has 2 labels" in discard["reason"]


def test_multilabel_dataframe_column_of_lists(tmp_path):
    paths = write_images(tmp_path / "img", ["a.jpg", "b.jpg"])
    table = pd.DataFrame({"split": ["TRAIN", "TRAIN"], "image_uri": [str(paths["a.jpg"]), str(paths["b.jpg"])],
                          "label": [["sun", "sea"], []]})
    result = tfrecorder.convert(table, tmp_path / "out", progress=False)
    job = JobInfo.read(result["tfrecord_dir"])
    assert job.metadata["vocabularies"]["label"] == ["sea", "sun"]
    labels = sorted(parse_example(r)["label"] for r in job.iter_records("TRAIN"))
    assert labels == [[], [1, 0]]


def vertex_lines(uris: dict[str, str]) -> str:
    ml_use = "aiplatform.googleapis.com/ml_use"
    items = [
        {"imageGcsUri": uris["a"], "boundingBoxAnnotations": [
            {"displayName": "cat", "xMin": 0.1, "yMin": 0.2, "xMax": 0.5, "yMax": 0.6},
            {"displayName": "dog", "xMin": 0.6, "yMin": 0.2, "xMax": 0.5, "yMax": 0.6}],  # xmin > xmax
         "dataItemResourceLabels": {ml_use: "training"}},
        {"imageGcsUri": uris["b"], "boundingBoxAnnotations": [],
         "dataItemResourceLabels": {ml_use: "validation"}},
        {"imageGcsUri": uris["c"], "boundingBoxAnnotations": [
            {"displayName": "dog", "xMin": 0.0, "yMin": 0.0, "xMax": 1.0, "yMax": 1.0}]},  # UNASSIGNED
    ]
    lines = [json.dumps(item) for item in items]
    lines.insert(1, "{not json")
    lines.append(json.dumps({"boundingBoxAnnotations": []}))
    return "\n".join(lines) + "\n"


def test_vertex_jsonl_detection_local(tmp_path, tf):
    paths = write_images(tmp_path / "img", ["a.jpg", "b.jpg", "c.jpg"])
    source = tmp_path / "import.jsonl"
    source.write_text(vertex_lines({k: str(paths[f"{k}.jpg"]) for k in "abc"}))
    result = tfrecorder.convert(str(source), tmp_path / "out", progress=False, split_ratios=(1.0, 0.0, 0.0))
    records = read_od_records(tf, result["tfrecord_dir"])
    assert {records[str(paths[n])]["split"] for n in ("a.jpg", "c.jpg")} == {"TRAIN"}
    assert records[str(paths["b.jpg"])]["split"] == "VALIDATION"
    assert list(records[str(paths["a.jpg"])]["image/object/class/text"]) == [b"cat"]
    assert list(records[str(paths["c.jpg"])]["image/object/class/label"]) == [2]
    discards = {row["line"]: row["reason"] for row in discards_of(result["tfrecord_dir"])}
    assert discards["2"].startswith("invalid JSON: line 2:")
    assert discards["5"] == "missing imageGcsUri: line 5"
    assert discards["1"] == "invalid box: xmin 0.6 > xmax 0.5"
    assert result.metadata["rows_in"] == 6 and result.metadata["rows_written"] == 3


def test_vertex_jsonl_and_automl_csv_on_gcs(gcs, tmp_path, tf):
    gcs.bucket(BUCKET)
    uris = {}
    for i, key in enumerate("abc"):
        uris[key] = f"gs://{BUCKET}/images/{key}.jpg"
        gcs.upload(uris[key], encode_image(Image.fromarray(photo_array(30, 40, i)), "JPEG"))
    gcs.upload(f"gs://{BUCKET}/import.jsonl", vertex_lines(uris).encode())
    result = tfrecorder.convert(f"gs://{BUCKET}/import.jsonl", tmp_path / "out", progress=False,
                                split_ratios=(1.0, 0.0, 0.0))
    assert set(read_od_records(tf, result["tfrecord_dir"])) == set(uris.values())
    csv_text = f"TRAIN,{uris['a']},cat,0.1,0.2,,,0.5,0.6,,\nTRAIN,{uris['b']},,,,,,,,,\n"
    gcs.upload(f"gs://{BUCKET}/boxes.csv", csv_text.encode())
    result = tfrecorder.convert(f"gs://{BUCKET}/boxes.csv", tmp_path / "out2", progress=False)
    assert result.metadata["task"] == "detection" and result["written"] == {"TRAIN": 2}


def test_annotation_format_is_checked(tmp_path):
    with pytest.raises(ValueError, match="annotation_format must be one of"):
        tfrecorder.convert(pd.DataFrame({"image_uri": ["a.jpg"]}), tmp_path, annotation_format="coco")
    with pytest.raises(ValueError, match="applies to AutoML CSV and Vertex AI JSONL files"):
        tfrecorder.convert(pd.DataFrame({"image_uri": ["a.jpg"]}), tmp_path, annotation_format="vertex_jsonl")


def test_cli_converts_annotation_files(tmp_path):
    from support.cli_runs import run

    paths = write_images(tmp_path / "img", ["a.jpg", "b.jpg", "c.jpg", "d.jpg"])
    (tmp_path / "boxes.csv").write_text(automl_detection_csv(paths).replace(str(tmp_path) + "/", ""))  # relative paths
    done = run("convert", "--source", str(tmp_path / "boxes.csv"), "--output_dir", str(tmp_path / "out"),
               "--no_progress")
    assert done.returncode == 0, done.stderr
    assert "rows in: 8" in done.stdout and "discarded: 4" in done.stdout
    [job] = os.listdir(tmp_path / "out")
    assert (tmp_path / "out" / job / "label_map.pbtxt").exists()
    (tmp_path / "pixels.csv").write_text(f"image_uri,label,xmin,ymin,xmax,ymax\n{paths['a.jpg']},cat,4,3,20,15\n")
    done = run("convert", "--source", str(tmp_path / "pixels.csv"), "--output_dir", str(tmp_path / "out2"),
               "--box_units", "pixels", "--split_ratios", "1,0,0", "--no_progress")
    assert done.returncode == 0, done.stderr
    [job] = os.listdir(tmp_path / "out2")
    metadata = json.loads((tmp_path / "out2" / job / "metadata.json").read_text())
    assert metadata["box_units"] == "pixels" and metadata["rows_written"] == 1
    done = run("convert", "--source", str(tmp_path / "boxes.csv"), "--output_dir", str(tmp_path / "out3"),
               "--annotation_format", "coco")
    assert done.returncode == 2 and "annotation_format must be one of" in done.stderr


def test_a_line_that_is_not_utf8_is_one_discard_in_csv_and_jsonl_files(tmp_path):
    """Import files are UTF-8: a line holding other bytes is discarded with its line number, the rest converts."""
    paths = write_images(tmp_path / "img", ["a.jpg", "b.jpg"])
    csv_file = tmp_path / "automl.csv"
    csv_file.write_bytes(f"TRAIN,{paths['a.jpg']},cat\nTRAIN,{paths['b.jpg']},d".encode() + b"\xff\xfeg\n"
                         + f"TRAIN,{paths['b.jpg']},dog\n".encode())
    jsonl = tmp_path / "import.jsonl"
    good = {"imageGcsUri": str(paths["a.jpg"]), "classificationAnnotation": {"displayName": "cat"},
            "dataItemResourceLabels": {annotation_files.ML_USE_KEY: "training"}}
    jsonl.write_bytes(json.dumps(good).encode() + b'\n{"imageGcsUri": "b\xe9.jpg"}\n')
    for source, written in ((csv_file, {"TRAIN": 2}), (jsonl, {"TRAIN": 1})):
        result = tfrecorder.convert(str(source), tmp_path / source.stem, progress=False)
        assert result["written"] == written
        [discard] = discards_of(result["tfrecord_dir"])
        expected = "0xff 0xfe" if source is csv_file else "0xe9"
        assert discard["line"] == "2" and discard["reason"] == f"invalid text: line 2: byte(s) {expected} are not valid utf-8"
