"""tfrecorder.inspect: CSV, original image bytes and a contact sheet, locally and on the GCS emulator."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from PIL import Image

from support import jobbuilder
import tfrecorder
from tfrecorder.format.example_encoder import bytes_feature, int64_feature
from tfrecorder.inspection import CONTACT_SHEET, CSV_FILE


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as stream:
        return list(csv.DictReader(stream))


def test_inspect_writes_csv_original_images_and_contact_sheet(converted, tmp_path):
    out = tfrecorder.inspect(converted["tfrecord_dir"], split="train", num_records=4, output_dir=str(tmp_path / "look"))
    assert out == str(tmp_path / "look")
    rows = read_csv(Path(out) / CSV_FILE)
    assert len(rows) == 4 and [r["record"] for r in rows] == ["0", "1", "2", "3"]
    assert "image" not in rows[0]  # the bytes are files, not CSV cells
    vocabulary = json.loads((Path(converted["tfrecord_dir"]) / "metadata.json").read_text())["vocabularies"]["label"]
    for row in rows:
        image_file = Path(out) / row["image_file"]
        assert image_file.read_bytes() == Path(row["image_uri"]).read_bytes()  # original bytes, unchanged
        extension = {"jpeg": ".jpg"}.get(row["image_format"], "." + row["image_format"])
        assert image_file.suffix == extension
        assert row["label_name"] == vocabulary[int(row["label"])]
        assert int(row["image_height"]) > 0
    with Image.open(Path(out) / CONTACT_SHEET) as sheet:
        assert sheet.format == "PNG" and sheet.width >= 4 * 100 and sheet.height > 100


def test_default_output_dir_and_errors(converted, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tfrecorder.inspect(converted["tfrecord_dir"], split="Test", num_records=100)
    job_name = Path(converted["tfrecord_dir"]).name
    assert Path(out) == tmp_path / "tfrecorder-inspect" / f"{job_name}-test"
    assert len(read_csv(Path(out) / CSV_FILE)) == json.loads(
        (Path(converted["tfrecord_dir"]) / "metadata.json").read_text())["splits"]["TEST"]["records"]
    with pytest.raises(ValueError, match="num_records"):
        tfrecorder.inspect(converted["tfrecord_dir"], num_records=0)
    with pytest.raises(ValueError, match="split 'nope'"):
        tfrecorder.inspect(converted["tfrecord_dir"], split="nope")


def test_csv_shows_float64_lists_and_missing(tmp_path):
    features = {"price": {"dtype": "float64", "shape": [], "allow_missing": True, "stored_as": "float64_bits"},
                "tags": {"dtype": "string", "shape": None, "allow_missing": True},
                "label": {"dtype": "int64", "shape": [], "allow_missing": False}}
    rows = [{"price": int64_feature(jobbuilder.float64_bits(0.1)), "tags": bytes_feature(b"a", b"b"),
             "label": int64_feature(1)}, {"label": int64_feature(-1)}]
    job = jobbuilder.write_job(tmp_path / "job", features, rows, {"label": "StringLabel"}, {"label": ["cat", "dog"]})
    out = tfrecorder.inspect(str(job), num_records=5, output_dir=str(tmp_path / "look"))
    first, second = read_csv(Path(out) / CSV_FILE)
    assert (first["price"], first["tags"], first["label_name"]) == ("0.1", '["a", "b"]', "dog")
    assert (second["price"], second["tags"], second["label_name"]) == ("", "[]", "<unknown>")
    assert Image.open(Path(out) / CONTACT_SHEET).format == "PNG"  # no images: an empty sheet, still valid


def test_inspect_and_verify_on_gcs_emulator(converted, gcs, tmp_path):
    """A job copied to the GCS emulator: verify reads it, inspect writes its output to gs:// too."""
    emulator = gcs
    local = Path(converted["tfrecord_dir"])
    remote = f"gs://tfr-inspect/jobs/{local.name}"
    for path in local.rglob("*"):  # index/ files included
        if path.is_file():
            emulator.upload(f"{remote}/{path.relative_to(local).as_posix()}", path.read_bytes())
    report = tfrecorder.verify(remote)
    assert report.ok, report
    assert sum(s.records for s in report.shards) == json.loads((local / "metadata.json").read_text())["records_written"]
    out = tfrecorder.inspect(remote, num_records=2, output_dir="gs://tfr-inspect/look")
    assert out == "gs://tfr-inspect/look"
    written = emulator.list("gs://tfr-inspect/look/")
    assert f"{out}/{CSV_FILE}" in written and f"{out}/{CONTACT_SHEET}" in written
    rows = list(csv.DictReader(io.StringIO(emulator.download(f"{out}/{CSV_FILE}").decode())))
    for row in rows:
        assert emulator.download(f"{out}/{row['image_file']}") == Path(row["image_uri"]).read_bytes()
    emulator.upload(f"{remote}/train-00009-of-00010.tfrecord", b"junk")
    assert not tfrecorder.verify(remote).ok
