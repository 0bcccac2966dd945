"""tfrecorder.sample_data: the generated sample dataset `make demo` converts."""
from __future__ import annotations

import csv

from PIL import Image

from tfrecorder.sample_data import make_sample_dataset


def test_sample_dataset_is_real_labelled_images_in_an_80_10_10_csv(tmp_path):
    csv_path = make_sample_dataset(tmp_path, count=10, size=(24, 32))
    with open(csv_path, newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert [r["split"] for r in rows] == ["TRAIN"] * 8 + ["VALIDATION", "TEST"]
    formats = set()
    for row in rows:
        with Image.open(row["image_uri"]) as image:
            assert image.size == (32, 24)
            formats.add(image.format)
        assert row["label"] and row["label"] in row["image_uri"]
    assert formats == {"JPEG", "PNG"}
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "images").iterdir()}
    make_sample_dataset(tmp_path, count=10, size=(24, 32))  # existing files are reused
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "images").iterdir()} == before
