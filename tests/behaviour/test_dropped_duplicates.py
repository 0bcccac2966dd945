"""Issue 29, point 4: UNASSIGNED exact duplicates share a split; duplicates="drop" keeps one row per group."""
import csv
import os
import shutil

import pandas as pd

import tfrecorder
from support.duplicate_sets import copied_pngs, duplicate_rows, planted_photos
from support.replay import REPLAY, snapshot

GROUPS, COPIES = 24, 3


def _copied_images(tmp_path, groups=GROUPS, copies=COPIES):
    """`groups` distinct PNGs, each under `copies` file names (byte-identical), with labels; no split column."""
    return pd.DataFrame([{"image_uri": str(path), "label": "even" if group % 2 == 0 else "odd"}
                         for group, paths in enumerate(copied_pngs(tmp_path, groups, copies, shape=(8, 8), seed=7))
                         for path in paths])


def test_unassigned_exact_duplicates_land_in_one_split(tmp_path):
    result = tfrecorder.convert(_copied_images(tmp_path), tmp_path / "out", progress=False)
    counts = result.metadata["duplicates"]
    assert counts["groups"] == GROUPS and counts["rows"] == GROUPS * COPIES
    assert counts["leaking_groups"] == 0 and "leakage" not in repr(result)
    splits_of = {}
    for row in duplicate_rows(result.tfrecord_dir):
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
    written = sorted(example["image_uri"] for example in _examples(plain.tfrecord_dir))
    assert written == kept
    for row in duplicate_rows(plain.tfrecord_dir):  # duplicates.csv's kept rows are the ones written
        assert (row["kept"] == "yes") == (row["row"] in kept)


def _examples(job):
    import tensorflow as tf

    from tfrecorder.format.metadata_file import JobMetadata

    document = JobMetadata.read(job).document
    for info in document["splits"].values():
        for shard in info["shards"]:
            for record in tf.data.TFRecordDataset(os.path.join(job, shard["file"])):
                example = tf.train.Example.FromString(record.numpy())
                yield {"image_uri": example.features.feature["image_uri"].bytes_list.value[0].decode()}


def test_a_resumed_drop_job_publishes_what_an_uninterrupted_one_does(tmp_path):
    """Committed parts hold their rows' places with their digests (their quality file): a continued job
    drops the same records from the same committed pieces."""
    from pathlib import Path

    from support.resume_runs import convert_code, image_parquet, incomplete, job_contents, manifests, run_killed
    from tfrecorder.format import resume_files

    source = image_parquet(tmp_path / "images", rows=600, row_group=50, images=30)  # 12 parts, 30 images
    options = {"num_shards": 2, "duplicates": "drop"}
    reference = tfrecorder.convert(str(source), str(tmp_path / "reference"), progress=False,
                                   beam_options={"direct_num_workers": 1}, **options)
    assert sum(info["records"] for info in reference.metadata["splits"].values()) == 30  # one row per image
    assert reference.metadata["duplicates"]["dropped"] == reference.metadata["discard_reasons"]["duplicate of"]
    output = tmp_path / "out"
    run_killed(convert_code(source, output, **options), lambda: manifests(output) >= 3)
    (job,) = incomplete(output)
    assert 3 <= len(resume_files.committed_parts(str(job))) < 12
    result = tfrecorder.convert(str(source), str(output), progress=False, beam_options={"direct_num_workers": 1},
                                **options)
    assert result["resumed"] is True
    assert job_contents(Path(result["tfrecord_dir"])) == job_contents(Path(reference["tfrecord_dir"]))


def test_drop_with_near_duplicates_keeps_one_row_of_each_near_group(tmp_path):
    rows = planted_photos(tmp_path, photos=3, varied=3)
    shutil.copy(tmp_path / "p0.jpg", tmp_path / "p0-copy.jpg")  # an exact duplicate of a near group's member too
    rows.append({"image_uri": str(tmp_path / "p0-copy.jpg"), "split": "VALIDATION"})
    result = tfrecorder.convert(pd.DataFrame(rows), tmp_path / "out", progress=False, duplicates="drop",
                                near_duplicate_distance=7, beam_options=REPLAY)
    counts = result.metadata["duplicates"]
    assert counts["near"]["groups"] == 3 and counts["groups"] == 1
    assert counts["dropped"] == len(rows) - 3 == result.metadata["discarded"]
    kept = [min(row["image_uri"] for row in rows if os.path.basename(row["image_uri"])[:2] == f"p{i}")
            for i in range(3)]  # the smallest URI of each photo's rows (duplicates.csv's kept rule)
    assert sorted(example["image_uri"] for example in _examples(result.tfrecord_dir)) == kept
    with open(os.path.join(result.tfrecord_dir, "discarded.csv")) as stream:
        reasons = {os.path.basename(row["image_uri"]): row["reason"] for row in csv.DictReader(stream)}
    assert reasons["p0.jpg"] == f"duplicate of {kept[0]}" and len(reasons) == len(rows) - 3
    assert all(reason == f"duplicate of {kept[int(name[1])]}" for name, reason in reasons.items())
