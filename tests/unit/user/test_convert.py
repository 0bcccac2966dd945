"""End-to-end conversions on Beam's DirectRunner, read back with plain tf.data."""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from support import imagegen
import tfrecorder
from support.readers import read_job

ODD = imagegen.odd_images()
GOOD_NAMES = set(ODD) | {"ünïcødé name.jpg", "comma, space.jpg"}
EXPECTED_REASONS = {
    "truncated.jpg": "truncated image", "truncated.png": "truncated image", "empty.jpg": "empty file",
    "text.jpg": "not an image", "a_directory.jpg": "not a file", "missing.jpg": "missing file",
}


def discarded(tfrecord_dir: str) -> list[dict]:
    with open(os.path.join(tfrecord_dir, "discarded.csv"), newline="") as stream:
        return list(csv.DictReader(stream))


def by_uri(job: dict) -> dict[str, tuple[str, dict]]:
    return {ex["image_uri"].decode(): (split, ex) for split, examples in job.items() for ex in examples}


def test_images_are_written_byte_for_byte_with_true_sizes(converted, image_files, tf):
    written = by_uri(read_job(converted["tfrecord_dir"]))
    assert {Path(uri).name for uri in written} == GOOD_NAMES
    for uri, (_split, example) in written.items():
        source = Path(uri).read_bytes()
        assert example["image"] == source
        decoded = tf.io.decode_image(example["image"], expand_animations=False)
        assert (example["image_height"], example["image_width"], example["image_channels"]) == tuple(decoded.shape)
        name = Path(uri).name
        if name in ODD:
            assert example["image_format"].decode() == ODD[name][1]
            assert example["image_channels"] == ODD[name][2]


def test_splits_labels_and_vocabulary(converted, image_table):
    metadata = converted.metadata
    vocabulary = metadata["vocabularies"]["label"]
    expected = {row.image_uri: (row.split.upper(), row.label) for row in image_table.itertuples()}
    train_labels = {label for uri, (split, label) in expected.items() if split == "TRAIN" and Path(uri).name in GOOD_NAMES}
    assert vocabulary == sorted({label for (split, label) in expected.values() if split == "TRAIN"})
    for uri, (split, example) in by_uri(read_job(converted["tfrecord_dir"])).items():
        want_split, want_label = expected[uri]
        assert split == want_split
        assert example["label"] == (vocabulary.index(want_label) if want_label in vocabulary else -1)
    assert train_labels <= set(vocabulary)


def test_discards_have_specific_reasons_and_counts_add_up(converted):
    rows = discarded(converted["tfrecord_dir"])
    reasons = {Path(row["image_uri"]).name: row["reason"] for row in rows}
    assert set(reasons) == set(EXPECTED_REASONS)
    for name, prefix in EXPECTED_REASONS.items():
        assert reasons[name].startswith(prefix), (name, reasons[name])
    assert list(rows[0]) == ["split", "image_uri", "label", "reason"]
    assert converted["rows_in"] == sum(converted["written"].values()) + converted["discarded"]
    assert converted["discarded"] == len(rows) == len(EXPECTED_REASONS)


def test_metadata_describes_every_shard(converted):
    directory = converted["tfrecord_dir"]
    metadata = json.load(open(os.path.join(directory, "metadata.json")))
    files = {name for name in os.listdir(directory) if ".tfrecord" in name}
    listed = {s["file"] for info in metadata["splits"].values() for s in info["shards"]}
    assert files == listed
    job = read_job(directory)
    for split, info in metadata["splits"].items():
        assert info["records"] == len(job[split]) == sum(s["records"] for s in info["shards"])
        assert info["bytes"] == sum(os.path.getsize(os.path.join(directory, s["file"])) for s in info["shards"])
    assert metadata["features"]["image"] == {"dtype": "string", "shape": [], "allow_missing": False}
    assert metadata["schema"] == {"split": "SplitKey", "image_uri": "ImageUri", "label": "StringLabel"}


def test_csv_source_with_relative_paths_and_unknown_split(tmp_path, tf):
    images = imagegen.write_files(tmp_path / "data" / "img", {"a.jpg": ODD["rgb.jpg"][0], "b.png": ODD["rgba.png"][0]})
    csv_path = tmp_path / "data" / "table.csv"
    # Columns in an unusual order; values are matched by name.
    csv_path.write_text("label,image_uri,split\ncat,img/a.jpg,TRAIN\n\"dog, big\",img/b.png,test\ncat,img/a.jpg,holdout\n")
    result = tfrecorder.convert(str(csv_path), tmp_path / "out", job_label="csv")
    job = read_job(result["tfrecord_dir"])
    assert [ex["image"] for ex in job["TRAIN"]] == [images["a.jpg"].read_bytes()]
    assert [ex["image_uri"] for ex in job["TEST"]] == [b"img/b.png"]
    assert job["TEST"][0]["label"] == -1  # "dog, big" never appears in TRAIN
    assert result.metadata["splits"]["TEST"]["unknown_labels"] == 1
    assert [row["reason"] for row in discarded(result["tfrecord_dir"])] == [
        "unknown split: 'holdout' (expected TRAIN, VALIDATION, TEST or UNASSIGNED)"]


def test_image_directory_source_with_gzip_and_fixed_shards(tmp_path, tf):
    for split, label, name, key in [("train", "cat", "1.jpg", "rgb.jpg"), ("train", "dog", "2.png", "gray.png"),
                                    ("train", "dog", "3.jpg", "cmyk.jpg"), ("validation", "cat", "4.gif", "anim.gif")]:
        imagegen.write_files(tmp_path / "imgs" / split / label, {name: ODD[key][0]})
    result = tfrecorder.convert(tmp_path / "imgs", tmp_path / "out", compression="gzip", num_shards=2)
    names = sorted(n for n in os.listdir(result["tfrecord_dir"]) if "tfrecord" in n)
    assert names == ["train-00000-of-00002.tfrecord.gz", "train-00001-of-00002.tfrecord.gz",
                     "validation-00000-of-00002.tfrecord.gz", "validation-00001-of-00002.tfrecord.gz"]
    job = read_job(result["tfrecord_dir"])
    assert result.metadata["vocabularies"]["label"] == ["cat", "dog"]
    assert sorted(ex["label"] for ex in job["TRAIN"]) == [0, 1, 1]
    assert [ex["image_format"] for ex in job["VALIDATION"]] == [b"gif"]


def test_byte_bound_splits_shards_and_unassigned_rows_use_ratios(tmp_path):
    big = imagegen.write_files(tmp_path / "img", {f"{i}.png": imagegen.encode(
        imagegen.Image.fromarray(imagegen.photo_array(64, 64, i)), "PNG") for i in range(12)})
    frame = pd.DataFrame({"image_uri": [str(p) for p in big.values()], "label": ["a", "b"] * 6})
    result = tfrecorder.convert(frame, tmp_path / "out", max_shard_bytes=30_000, split_ratios=(1.0, 0.0, 0.0))
    shards = result.metadata["splits"]["TRAIN"]["shards"]
    assert len(shards) > 1 and result["written"] == {"TRAIN": 12}
    assert all(s["bytes"] <= 30_000 + 14_000 for s in shards)  # bound overshoots by at most one record
    assert shards[0]["file"] == f"train-00000-of-{len(shards):05d}.tfrecord"


def test_resize_option(tmp_path, tf):
    imagegen.write_files(tmp_path / "imgs" / "train" / "cat", {"a.jpg": ODD["rgb.jpg"][0], "b.png": ODD["rgba.png"][0]})
    result = tfrecorder.convert(tmp_path / "imgs", tmp_path / "out", image_size=(8, 10))
    for example in read_job(result["tfrecord_dir"])["TRAIN"]:
        assert tuple(tf.io.decode_image(example["image"]).shape[:2]) == (8, 10)
        assert (example["image_height"], example["image_width"]) == (8, 10)


@pytest.mark.parametrize(
    "source, options, message",
    [
        (pd.DataFrame({"split": [], "image_uri": [], "label": []}), {}, "table is empty"),
        (pd.DataFrame({"split": ["TEST"], "image_uri": ["a.jpg"], "label": ["x"]}), {}, "no rows are assigned to TRAIN"),
        (pd.DataFrame([["TRAIN", "a", "b"]], columns=["split", "label", "label"]), {}, "duplicate column"),
        (pd.DataFrame({"split": ["TRAIN"]}), {"schema": {"image_uri": "ImageUri"}}, "missing from the table"),
        (pd.DataFrame({"split": ["TRAIN"]}), {"runner": "Spark"}, "unknown runner"),
        (pd.DataFrame({"split": ["TRAIN"]}), {"runner": "DaskRunner"}, "'DaskRunner' is not supported: .*finish_bundle"),
        (pd.DataFrame({"split": ["TRAIN"]}), {"runner": "SparkRunner"}, "SparkRunner.*output_dir must be gs://"),
        (pd.DataFrame({"split": ["TRAIN"]}), {"runner": "PortableRunner", "beam_options": {"job_endpoint": "embed"},
                                              "dataflow_options": {}}, "not both"),
        (pd.DataFrame({"split": ["TRAIN"]}), {"compression": "zstd"}, "compression"),
        (pd.DataFrame({"split": ["TRAIN"]}), {"image_size": (0, 5)}, "image_size"),
        ("/definitely/not/here.csv", {}, "does not exist"),
        (pd.DataFrame({"split": [1, 2], "label": ["a", "b"]}), {}, "split column 'split' holds int64"),
        (pd.DataFrame({"split": ["TRAIN"]}), {"num_shards": -1}, "num_shards"),
        (pd.DataFrame({"split": ["TRAIN"]}), {"split_ratios": (0.5, 0.5)}, "split_ratios"),
        (pd.DataFrame({"split": ["TRAIN"]}), {"validate": "paranoid"}, "validate"),
        (pd.DataFrame({"split": ["TRAIN"]}), {"encoding": "klingon"}, "encoding 'klingon' is not a text encoding"),
        (pd.DataFrame({f"c{i}": [1] for i in range(20_001)}), {}, "the table has 20,001 columns: at most 20,000"),
    ],
)
def test_table_level_errors_are_raised_before_any_pipeline(tmp_path, source, options, message):
    with pytest.raises(ValueError, match=message):
        tfrecorder.convert(source, tmp_path / "out", **options)
    assert not (tmp_path / "out").exists() or os.listdir(tmp_path / "out") == []


def test_the_accessor_takes_and_checks_encoding_like_convert(tmp_path):
    frame = pd.DataFrame({"split": ["TRAIN"], "x": [1]})
    with pytest.raises(ValueError, match="encoding 'utf-99' is not a text encoding"):
        frame.tensorflow.to_tfrecord(str(tmp_path / "out"), encoding="utf-99")
    assert frame.tensorflow.to_tfrecord(str(tmp_path / "out"), encoding="latin-1", progress=False)["rows_in"] == 1


def test_output_dir_that_is_a_file_or_unwritable_is_refused(tmp_path, image_table):
    target = tmp_path / "file"
    target.write_text("x")
    for output_dir in (target, target / "sub"):  # the file itself, or a file above it: one check, one message
        with pytest.raises(ValueError, match=f"output_dir {output_dir} cannot be a directory: {target} is a file"):
            tfrecorder.convert(image_table, output_dir)
    with pytest.raises(ValueError, match="is not writable"):
        tfrecorder.convert(image_table, "/proc/tfrecorder-out")  # read-only even for root


def test_injected_failure_leaves_no_finished_looking_directory(tmp_path, image_table, monkeypatch):
    from beam_pipelines.steps import encode_rows

    calls = {"n": 0}
    real_read = encode_rows.read_image

    def failing_read(uri, max_bytes=None):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("injected storage outage")
        return real_read(uri)

    monkeypatch.setattr(encode_rows, "read_image", failing_read)
    with pytest.raises(Exception, match="injected storage outage"):
        tfrecorder.convert(image_table, tmp_path / "out")
    leftovers = os.listdir(tmp_path / "out")
    assert leftovers == [], leftovers
