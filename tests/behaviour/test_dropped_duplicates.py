"""Issue 29, point 4: UNASSIGNED exact duplicates share a split; duplicates="drop" keeps one row per group."""
import csv
import os
import shutil

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import tfrecorder
from support.replay import REPLAY, snapshot
from tfrecorder.format.statistics_files import DUPLICATES_FILE

GROUPS, COPIES = 24, 3


def _copied_images(tmp_path, groups=GROUPS, copies=COPIES):
    """`groups` distinct PNGs, each under `copies` file names (byte-identical), with labels; no split column."""
    rng = np.random.default_rng(7)
    rows = []
    for group in range(groups):
        first = tmp_path / f"g{group:02d}-0.png"
        Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(first)
        for copy in range(copies):
            path = tmp_path / f"g{group:02d}-{copy}.png"
            if copy:
                shutil.copy(first, path)
            rows.append({"image_uri": str(path), "label": "even" if group % 2 == 0 else "odd"})
    return pd.DataFrame(rows)


def _duplicate_rows(job):
    with open(os.path.join(job, DUPLICATES_FILE)) as stream:
        return list(csv.DictReader(stream))


def test_unassigned_exact_duplicates_land_in_one_split(tmp_path):
    result = tfrecorder.convert(_copied_images(tmp_path), tmp_path / "out", progress=False)
    counts = result.metadata["duplicates"]
    assert counts["groups"] == GROUPS and counts["rows"] == GROUPS * COPIES
    assert counts["leaking_groups"] == 0 and "leakage" not in repr(result)
    splits_of = {}
    for row in _duplicate_rows(result.tfrecord_dir):
        splits_of.setdefault(row["group"], set()).add(row["split"])
    assert len(splits_of) == GROUPS and all(len(found) == 1 for found in splits_of.values())
    assert len(set().union(*splits_of.values())) > 1  # the groups themselves spread over splits


def _kept_and_dropped(frame):
    kept = sorted(uri for uri in frame["image_uri"] if uri.endswith("-0.png"))
    dropped = {uri: uri.rsplit("-", 1)[0] + "-0.png" for uri in frame["image_uri"] if not uri.endswith("-0.png")}
    return kept, dropped


def test_drop_keeps_one_row_per_group_and_discards_the_others_identically_under_replay(tmp_path):
    frame = _copied_images(tmp_path)
    frame["split"] = ["TEST" if i % COPIES == 2 else "TRAIN" for i in range(len(frame))]  # every group leaks
    options = {"duplicates": "drop", "max_shard_bytes": 1500, "progress": False}  # many pieces
    plain = tfrecorder.convert(frame, tmp_path / "plain", **options)
    replayed = tfrecorder.convert(frame, tmp_path / "replayed", beam_options=REPLAY, **options)
    assert snapshot(replayed.tfrecord_dir) == snapshot(plain.tfrecord_dir)
    kept, dropped = _kept_and_dropped(frame)
    metadata = plain.metadata
    assert sum(info["records"] for info in metadata["splits"].values()) == GROUPS
    assert metadata["splits"]["TRAIN"]["records"] == GROUPS and "TEST" not in metadata["splits"]
    assert metadata["discard_reasons"] == {"duplicate of": len(dropped)} and len(dropped) == GROUPS * (COPIES - 1)
    assert metadata["discarded"] == len(dropped)
    counts = metadata["duplicates"]
    assert counts["dropped"] == len(dropped) and counts["leaking_groups"] == GROUPS
    assert "leakage" not in repr(plain)  # nothing left leaks
    with open(os.path.join(plain.tfrecord_dir, "discarded.csv")) as stream:
        discarded = {row["image_uri"]: row["reason"] for row in csv.DictReader(stream)}
    assert discarded == {uri: f"duplicate of {kept_uri}" for uri, kept_uri in dropped.items()}
    written = sorted(example["image_uri/uri"] for example in _examples(plain.tfrecord_dir))
    assert written == kept
    for row in _duplicate_rows(plain.tfrecord_dir):  # duplicates.csv's kept rows are the ones written
        assert (row["kept"] == "yes") == (row["row"] in kept)


def _examples(job):
    import tensorflow as tf

    from tfrecorder.format.metadata_file import JobMetadata

    document = JobMetadata.read(job).document
    for info in document["splits"].values():
        for shard in info["shards"]:
            for record in tf.data.TFRecordDataset(os.path.join(job, shard["file"])):
                example = tf.train.Example.FromString(record.numpy())
                yield {"image_uri/uri": example.features.feature["image_uri"].bytes_list.value[0].decode()}


def test_drop_refuses_tables_it_cannot_drop_from_before_work_starts(tmp_path):
    frame = pd.DataFrame({"x": [1.0, 1.0, 2.0], "split": ["TRAIN"] * 3})
    with pytest.raises(ValueError, match="duplicates='drop' is supported for tables of images"):
        tfrecorder.convert(frame, tmp_path / "out", progress=False, duplicates="drop")
    assert not os.path.exists(tmp_path / "out") or not os.listdir(tmp_path / "out")
