"""Issue 29 end to end: statistics.json/.pb, duplicates.csv, leak counts and duplicates="fail", under bundle replay."""
import csv
import json
import os
import shutil

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import tfrecorder
from support.replay import REPLAY
from support.duplicate_sets import planted_photos
from tfrecorder.format.statistics_files import DUPLICATES_FILE, STATISTICS_FILE, STATISTICS_PROTO_FILE


def _images(tmp_path, count=12):
    rng = np.random.default_rng(3)
    rows = []
    for i in range(count):
        path = tmp_path / f"img{i:02d}.jpg"
        Image.fromarray(rng.integers(0, 255, (16 + i, 20, 3), dtype=np.uint8)).save(path, quality=90)
        rows.append({"image_uri": str(path), "label": "cat" if i % 2 else "dog",
                     "split": "TEST" if i >= 10 else "TRAIN", "weight": float(i)})
    shutil.copy(tmp_path / "img00.jpg", tmp_path / "copy-of-0.jpg")  # a leak: same bytes in TRAIN and TEST
    rows.append({"image_uri": str(tmp_path / "copy-of-0.jpg"), "label": "dog", "split": "TEST", "weight": None})
    shutil.copy(tmp_path / "img01.jpg", tmp_path / "copy-of-1.jpg")  # a duplicate inside TRAIN
    rows.append({"image_uri": str(tmp_path / "copy-of-1.jpg"), "label": "cat", "split": "TRAIN", "weight": 1.0})
    return pd.DataFrame(rows)


def test_image_job_writes_statistics_duplicates_and_counts_leaks(tmp_path):
    frame = _images(tmp_path)
    result = tfrecorder.convert(frame, tmp_path / "out", progress=False, beam_options=REPLAY)
    job = result.tfrecord_dir
    counts = result.metadata["duplicates"]
    assert {k: v for k, v in counts.items() if k != "near"} == {"groups": 2, "rows": 4, "redundant": 2,
                                                                "leaking_groups": 1, "leaking_rows": 2}
    assert counts["near"]["groups"] == 0  # noise images: nothing alike but the copies
    with open(os.path.join(job, DUPLICATES_FILE)) as stream:
        rows = list(csv.DictReader(stream))
    assert {(r["row"].rsplit("/", 1)[-1], r["split"], r["kept"], r["leak"]) for r in rows} == {
        ("copy-of-0.jpg", "TEST", "yes", "yes"), ("img00.jpg", "TRAIN", "no", "yes"),
        ("copy-of-1.jpg", "TRAIN", "yes", "no"), ("img01.jpg", "TRAIN", "no", "no")}
    statistics = json.load(open(os.path.join(job, STATISTICS_FILE)))
    train, test = statistics["splits"]["TRAIN"], statistics["splits"]["TEST"]
    assert train["rows"] == 11 and test["rows"] == 3  # replayed bundles are counted once
    assert train["features"]["image_uri"]["image"]["height"]["min"] == 16
    assert test["features"]["weight"]["missing"] == 1
    assert {c["value"]: c["count"] for c in train["features"]["label"]["labels"]["counts"]} == {"dog": 5, "cat": 6}
    assert os.path.getsize(os.path.join(job, STATISTICS_PROTO_FILE)) > 0
    assert "train/test leakage: 1 duplicate group" in repr(result)


def test_fail_mode_fails_a_leaking_job_before_publishing(tmp_path):
    with pytest.raises(ValueError, match="train/test leakage: 1 duplicate group.*copy-of-0.jpg"):
        tfrecorder.convert(_images(tmp_path), tmp_path / "out", progress=False, duplicates="fail")
    assert not [name for name in os.listdir(tmp_path / "out") if not name.startswith(".")]
    with pytest.raises(ValueError, match="duplicates must be one of"):
        tfrecorder.convert(_images(tmp_path), tmp_path / "out", progress=False, duplicates="maybe")


def test_planted_near_duplicates_are_grouped_and_leaks_counted(tmp_path):
    rows = planted_photos(tmp_path, photos=8, varied=2)  # every variant of two photos, in TEST: near leaks
    result = tfrecorder.convert(pd.DataFrame(rows), tmp_path / "out", progress=False,  # hashes from the decode pool
                                near_duplicate_distance=7)
    near = result.metadata["duplicates"]["near"]
    assert near["groups"] == 2 and near["rows"] == 10 and near["leaking_groups"] == 2
    with open(os.path.join(result.tfrecord_dir, DUPLICATES_FILE)) as stream:
        groups = {}
        for row in csv.DictReader(stream):
            groups.setdefault(row["group"], set()).add(os.path.basename(row["row"]).split("-")[0].split(".")[0])
    assert sorted(map(sorted, groups.values())) == [["p0"], ["p1"]]
    assert "(2 of them near-duplicates)" in repr(result)
    header = tfrecorder.convert(pd.DataFrame(rows), tmp_path / "header", progress=False, validate="header",
                                near_duplicate_distance=7)
    assert header.metadata["duplicates"]["near"] == near  # hashes from Pillow's small decode
    off = tfrecorder.convert(pd.DataFrame(rows), tmp_path / "off", progress=False, validate="header")  # the default
    assert off.metadata["duplicates"]["near"]["groups"] == 0


def test_tabular_job_groups_identical_rows(tmp_path):
    frame = pd.DataFrame({"x": [1.0, 2.0, 1.0, 3.0] * 5, "s": ["a", "b", "a", "c"] * 5,
                          "split": ["TRAIN"] * 16 + ["TEST"] * 4})
    result = tfrecorder.convert(frame, tmp_path / "out", progress=False, beam_options=REPLAY)
    counts = result.metadata["duplicates"]
    assert counts["groups"] == 3 and counts["rows"] == 20 and counts["leaking_groups"] == 3
    statistics = json.load(open(os.path.join(result.tfrecord_dir, STATISTICS_FILE)))
    assert statistics["splits"]["TRAIN"]["features"]["x"]["numeric"]["mean"] == pytest.approx(1.75)
    assert statistics["splits"]["TRAIN"]["features"]["s"]["string"]["unique_estimate"] == 3
