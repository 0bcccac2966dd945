"""tfrecorder.format.tfds_files: TensorFlow Datasets reads job directories as they are,
tfds.builder_from_directory(job_dir), from the dataset_info.json, features.json and label files written here."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from support import imagegen
import tfrecorder
from tfrecorder.format import tfds_files
from tfrecorder.io import storage

tfds = pytest.importorskip("tensorflow_datasets")

# Every kind TFDS's Image decodes (GIF and WebP excluded: TFDS decodes them as 4-D frames), mixed channels.
NAMES = ["rgb.jpg", "gray.jpg", "cmyk.jpg", "rgb.png", "gray.png", "rgba.png", "palette.png", "rgb.bmp"]


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> pd.DataFrame:
    images = imagegen.odd_images()
    paths = imagegen.write_files(tmp_path_factory.mktemp("tfds_images"), {n: images[n][0] for n in NAMES})
    rows = []
    for i in range(24):
        name = NAMES[i % len(NAMES)]
        rows.append({"split": "TRAIN" if i % 4 else "TEST", "image_uri": str(paths[name]),
                     "label": ("cat", "dog", "emu")[i % 3], "count": i, "score": i / 4,
                     "tags": json.dumps(["a"] * (i % 3)), "vector": json.dumps([i, -i])})
    return pd.DataFrame(rows)


SCHEMA = {"split": "SplitKey", "image_uri": "ImageUri", "label": "StringLabel", "count": "IntegerInput",
          "score": "DoubleInput", "tags": "StringInput[]", "vector": "IntegerInput[2]"}


@pytest.fixture(scope="module")
def job(table, tmp_path_factory) -> str:
    return tfrecorder.convert(table, tmp_path_factory.mktemp("tfds_out"), schema=SCHEMA, num_shards=2)["tfrecord_dir"]


def by_row(examples) -> dict[int, dict]:
    return {int(ex["count"]): ex for ex in examples}


def test_tfds_reads_the_job_directory_as_it_is(job, tf):
    builder = tfds.builder_from_directory(job)
    metadata = json.loads((Path(job) / "metadata.json").read_text())
    assert builder.info.features["label"].names == metadata["vocabularies"]["label"] == ["cat", "dog", "emu"]
    assert {name: info.num_examples for name, info in builder.info.splits.items()} == {
        split.lower(): info["records"] for split, info in metadata["splits"].items()}
    assert builder.info.splits["train"].num_shards == 2
    loaded = by_row(ex for ex in tfrecorder.load(job, "train").as_numpy_iterator())
    read = by_row(tfds.as_numpy(builder.as_dataset(split="train")))
    assert sorted(read) == sorted(loaded) and len(read) == metadata["splits"]["TRAIN"]["records"]
    for row, example in read.items():
        expected = loaded[row]
        assert example["image"].dtype == np.uint8
        assert np.array_equal(example["image"], expected["image"]), row  # decoded as stored, mixed channels
        assert example["label"] == expected["label"] and example["count"] == expected["count"]
        assert list(example["tags"]) == list(expected["tags"]) and list(example["vector"]) == list(expected["vector"])
    assert "score" not in builder.info.features  # float64 stored as bits: left out, the records are unchanged


def test_as_supervised_yields_image_label_pairs_like_load(job, tf):
    builder = tfds.builder_from_directory(job)
    assert builder.info.supervised_keys == ("image", "label")
    pairs = list(tfds.as_numpy(builder.as_dataset(split="train", as_supervised=True)))
    loaded = list(tfrecorder.load(job, "train", as_supervised=True).as_numpy_iterator())
    assert len(pairs) == len(loaded) == builder.info.splits["train"].num_examples
    key = lambda pair: (pair[0].tobytes(), int(pair[1]))  # noqa: E731
    assert sorted(map(key, pairs)) == sorted(map(key, loaded))


def test_as_supervised_pairs_the_features_of_a_table_without_images_with_its_label(tmp_path, tf):
    table = pd.DataFrame({"split": ["TRAIN", "TEST"] * 4, "size": range(8), "name": list("abcdefgh"),
                          "vector": [json.dumps([i, i + 1]) for i in range(8)], "kind": ["x", "y"] * 4})
    job = tfrecorder.convert(table, tmp_path, schema={"split": "SplitKey", "size": "IntegerInput", "name": "StringInput",
                                                        "vector": "IntegerInput[2]", "kind": "StringLabel"})["tfrecord_dir"]
    builder = tfds.builder_from_directory(job)
    assert builder.info.supervised_keys == ({"name": "name", "size": "size", "vector": "vector"}, "kind")
    pairs = {int(features["size"]): (features, label) for features, label in
             tfds.as_numpy(builder.as_dataset(split="train", as_supervised=True))}
    assert sorted(pairs) == [0, 2, 4, 6]
    features, label = pairs[2]
    assert (features["name"], list(features["vector"]), label) == (b"c", [2, 3], 0)


def test_supervised_keys_only_for_one_label_with_something_to_pair(tmp_path):
    def keys(schema, features):
        return tfds_files.supervised_keys({"schema": schema, "features": {
            name: {"dtype": "int64", "shape": [], "allow_missing": False} for name in features}})

    assert keys({"a": "IntegerLabel", "b": "IntegerLabel", "x": "IntegerInput"}, ["a", "b", "x"]) is None
    assert keys({"a": "IntegerLabel"}, ["a"]) is None
    assert keys({"x": "IntegerInput"}, ["x"]) is None
    assert keys({"a": "IntegerLabel", "x": "IntegerInput"}, ["a", "x"]) == ({"x": "x"}, "a")


def test_split_slicing_uses_the_shard_lengths(job, tf):
    builder = tfds.builder_from_directory(job)
    train = builder.info.splits["train"].num_examples
    assert sum(1 for _ in builder.as_dataset(split="train[:50%]")) == train // 2
    assert sum(1 for _ in builder.as_dataset(split="train[-3:]")) == 3
    assert sum(1 for _ in builder.as_dataset(split="train+test")) == train + builder.info.splits["test"].num_examples


def test_features_json_mapping(job):
    features, labels = tfds_files.tfds_features(json.loads((Path(job) / "metadata.json").read_text()))
    features = features["featuresDict"]["features"]
    assert features["image"]["image"]["shape"]["dimensions"] == ["-1", "-1", "-1"]  # 1, 3 and 4 channels seen
    assert "encodingFormat" not in features["image"]["image"]  # jpeg, png, bmp mixed
    assert features["tags"]["tensor"]["shape"]["dimensions"] == ["-1"]
    assert features["vector"]["tensor"] == {"shape": {"dimensions": ["2"]}, "dtype": "int64", "encoding": "none"}
    assert labels == {"label": ["cat", "dog", "emu"]}
    assert (Path(job) / "label.labels.txt").read_text() == "cat\ndog\nemu\n"

    def image_feature(kinds):
        metadata = {"schema": {"image_uri": "ImageUri"}, "features": {}, "images": {"image": kinds}}
        return tfds_files.tfds_features(metadata)[0]["featuresDict"]["features"]["image"]

    gif = image_feature({"channels": [3], "formats": ["gif", "png"]})
    assert gif["pythonClassName"].endswith("Tensor") and gif["tensor"]["dtype"] == "string"
    one = image_feature({"channels": [3], "formats": ["jpeg"]})["image"]
    assert one == {"shape": {"dimensions": ["-1", "-1", "3"]}, "dtype": "uint8", "encodingFormat": "jpeg"}
    assert tfds_files.tfds_name("My Job-20250101-120000") == "my_job_20250101_120000"


def test_gzip_jobs_get_no_tfds_files(table, tmp_path):
    result = tfrecorder.convert(table.head(4), tmp_path, compression="gzip")
    assert not (Path(result["tfrecord_dir"]) / tfds_files.DATASET_INFO_FILE).exists()


def test_gs_job_directory_reads_with_tfds_after_copying_through_the_storage_layer(gcs, table, tmp_path, tf):
    """TFDS reaches gs:// through TensorFlow's filesystem, which cannot be pointed at an emulator: the
    emulator's job directory (written through tfrecorder.io.storage) is copied verbatim, then read."""
    gcs.bucket("tfr-tfds")
    job = tfrecorder.convert(table, "gs://tfr-tfds/jobs", schema=SCHEMA)["tfrecord_dir"]
    local = tmp_path / "copy"
    for url in storage.list_files(job):
        target = local / url[len(job.rstrip("/")) + 1:]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(storage.read_bytes(url))
    builder = tfds.builder_from_directory(str(local))
    assert builder.info.features["label"].names == ["cat", "dog", "emu"]
    assert sum(1 for _ in builder.as_dataset(split="train[:50%]")) == builder.info.splits["train"].num_examples // 2


def test_dataset_info_lists_every_split_by_shard_lengths_and_gzip_jobs_get_no_files(tmp_path):
    metadata = {"job_name": "Cats-20250101-120000", "created_utc": "2025-01-01T12:00:00Z",
                "schema": {"split": "SplitKey", "label": "StringLabel"},
                "features": {"label": {"dtype": "int64", "shape": [], "allow_missing": False}},
                "vocabularies": {"label": ["cat", "dog"]},
                "splits": {"TRAIN": {"bytes": 300, "shards": [{"records": 2}, {"records": 1}]},
                           "TEST": {"bytes": 90, "shards": [{"records": 1}]}}}
    info = tfds_files.dataset_info(metadata)
    assert info["name"] == "cats_20250101_120000" and info["version"] == tfds_files.VERSION
    assert info["splits"] == [
        {"name": "train", "numBytes": "300", "shardLengths": ["2", "1"], "filepathTemplate": tfds_files.FILE_TEMPLATE},
        {"name": "test", "numBytes": "90", "shardLengths": ["1"], "filepathTemplate": tfds_files.FILE_TEMPLATE}]
    written = tfds_files.write_tfds_files(str(tmp_path), metadata)
    assert written == sorted(os.listdir(tmp_path)) == [tfds_files.DATASET_INFO_FILE, tfds_files.FEATURES_FILE,
                                                       "label" + tfds_files.LABELS_SUFFIX]
    assert json.loads((tmp_path / tfds_files.DATASET_INFO_FILE).read_text()) == info
    assert tfds_files.write_tfds_files(str(tmp_path / "gz"), {**metadata, "compression": "gzip"}) == []
    assert not (tmp_path / "gz").exists()


def test_a_label_column_named_like_a_path_writes_and_reads_nothing_outside_the_job(tmp_path, tf):
    """TFDS reads `<label>.labels.txt` from the job directory: a label column named `../../evil` (or one too
    long for a file name) keeps its classes in metadata.json only, and TFDS reads its class indices."""
    out = tmp_path / "a" / "b"
    long_name = "l" * 250
    table = pd.DataFrame({"split": ["TRAIN"] * 4, "x": range(4), "../../evil": ["p", "q"] * 2, long_name: ["r"] * 4})
    job = tfrecorder.convert(table, out, schema={"split": "SplitKey", "x": "IntegerInput", "../../evil": "StringLabel",
                                                 long_name: "StringLabel"})["tfrecord_dir"]
    assert sorted(p.name for p in tmp_path.rglob("*.labels.txt")) == []
    assert sorted(os.listdir(tmp_path)) == ["a"] and os.listdir(out) == [os.path.basename(job)]
    builder = tfds.builder_from_directory(job)
    assert builder.info.features["../../evil"].dtype == tf.int64
    assert sorted(int(ex["../../evil"]) for ex in tfds.as_numpy(builder.as_dataset(split="train"))) == [0, 0, 1, 1]
