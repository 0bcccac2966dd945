"""Issue 29 for object-detection jobs (box tables, COCO datasets): statistics.json/.pb, duplicates.csv,
leak counts, duplicates="fail", and UNASSIGNED byte-identical images in one split."""
import csv
import json
import os

import pandas as pd
import pytest

import tfrecorder
from support.datasets import scenes, write_coco
from support.detection_records import read_od_records
from support.duplicate_sets import copied_pngs, duplicate_rows
from support.replay import REPLAY, snapshot
from tfrecorder.format.statistics_files import DUPLICATES_FILE, STATISTICS_FILE, STATISTICS_PROTO_FILE

GROUPS, COPIES = 12, 3


def _boxes_of_copies(tmp_path, split=None):
    """GROUPS distinct PNGs, each under COPIES names (byte-identical); each image has two boxes, and
    groups of odd number a third, "rare" one. `split`: a function of (group, copy) → split cell."""
    rows = []
    for group, paths in enumerate(copied_pngs(tmp_path, GROUPS, COPIES, shape=(12, 16), seed=3)):
        for copy, path in enumerate(paths):
            cell = split(group, copy) if split else None
            rows.append((cell, str(path), "cat", 0.0, 0.0, 0.5, 0.5))
            rows.append((cell, str(path), "dog", 0.5, 0.25, 1.0, 1.0))
            if group % 2:
                rows.append((cell, str(path), "rare", 0.1, 0.1, 0.2, 0.6))
    frame = pd.DataFrame(rows, columns=["split", "image_uri", "label", "xmin", "ymin", "xmax", "ymax"])
    return frame if split else frame.drop(columns=["split"])


def test_a_detection_job_writes_statistics_and_reports_leaking_copies(tmp_path):
    # copy 2 of every group is in TEST, the others in TRAIN: every group leaks; "rare" never in TEST
    frame = _boxes_of_copies(tmp_path, lambda group, copy: "TEST" if copy == 2 else "TRAIN")
    frame = frame[~((frame["split"] == "TEST") & (frame["label"] == "rare"))]
    result = tfrecorder.convert(frame, tmp_path / "out", progress=False)
    job = result.tfrecord_dir
    statistics = json.loads(open(os.path.join(job, STATISTICS_FILE)).read())
    assert statistics["task"] == "object_detection"
    train, test = statistics["splits"]["TRAIN"], statistics["splits"]["TEST"]
    assert (train["images"], train["boxes"]) == (2 * GROUPS, 2 * (2 * GROUPS) + 2 * GROUPS // 2)
    assert (test["images"], test["boxes"]) == (GROUPS, 2 * GROUPS)
    labels = train["features"]["label"]["labels"]
    assert {e["value"]: e["count"] for e in labels["counts"]} == {"cat": 2 * GROUPS, "dog": 2 * GROUPS, "rare": GROUPS}
    assert test["features"]["label"]["labels"]["missing_classes"] == ["rare"]
    per_image = train["features"]["label"]["list_lengths"]
    assert (per_image["min"], per_image["max"]) == (2, 3)
    image = train["features"]["image"]["image"]
    assert (image["width"]["min"], image["height"]["max"]) == (16, 12)
    assert image["formats"] == [{"value": "png", "count": 2 * GROUPS}]
    area = train["features"]["box_area"]["numeric"]
    assert area["min"] == pytest.approx(0.05) and area["max"] == pytest.approx(0.375)
    aspect = train["features"]["box_aspect"]["numeric"]  # cat: 8x6 px, dog: 8x9, rare: 1.6x6
    assert aspect["max"] == pytest.approx(8 / 6) and aspect["min"] == pytest.approx(1.6 / 6)
    assert os.path.getsize(os.path.join(job, STATISTICS_PROTO_FILE)) > 0
    counts = result.metadata["duplicates"]
    assert (counts["groups"], counts["rows"], counts["leaking_groups"]) == (GROUPS, GROUPS * COPIES, GROUPS)
    assert "train/test leakage" in repr(result)
    rows = duplicate_rows(job)
    assert len(rows) == GROUPS * COPIES and all(row["leak"] == "yes" for row in rows)
    assert {row["row"] for row in rows if row["kept"] == "yes"} == {str(tmp_path / f"g{g:02d}-0.png")
                                                                   for g in range(GROUPS)}
    html = tfrecorder.report(job).html
    assert f"train {2 * GROUPS} ({train['boxes']} boxes)" in html and "Labels: label" in html
    with pytest.raises(ValueError, match="train/test leakage"):
        tfrecorder.convert(frame, tmp_path / "failed", progress=False, duplicates="fail")
    assert not [name for name in os.listdir(tmp_path / "failed") if not name.startswith(".")]


def test_unassigned_copies_of_a_detection_table_land_in_one_split_identically_under_replay(tmp_path, tf):
    frame = _boxes_of_copies(tmp_path)  # no split column: every image UNASSIGNED
    options = {"progress": False, "max_shard_bytes": 2000, "split_ratios": (0.4, 0.3, 0.3)}  # groups spread
    plain = tfrecorder.convert(frame, tmp_path / "plain", **options)
    replayed = tfrecorder.convert(frame, tmp_path / "replayed", beam_options=REPLAY, **options)
    assert snapshot(replayed.tfrecord_dir) == snapshot(plain.tfrecord_dir)
    for name in (STATISTICS_FILE, DUPLICATES_FILE):
        assert open(os.path.join(replayed.tfrecord_dir, name)).read() == open(os.path.join(plain.tfrecord_dir, name)).read()
    counts = plain.metadata["duplicates"]
    assert counts["groups"] == GROUPS and counts["leaking_groups"] == 0 and "leakage" not in repr(plain)
    records = read_od_records(tf, plain.tfrecord_dir)
    assert len(records) == GROUPS * COPIES
    split_of_group = {}
    for uri, record in records.items():
        split_of_group.setdefault(os.path.basename(uri)[:3], set()).add(record["split"])
    assert all(len(found) == 1 for found in split_of_group.values())
    assert len(set().union(*split_of_group.values())) > 1  # the groups themselves spread over splits
    metadata = plain.metadata
    assert sum(info["records"] for info in metadata["splits"].values()) == GROUPS * COPIES
    statistics = json.loads(open(os.path.join(plain.tfrecord_dir, STATISTICS_FILE)).read())
    assert {split: info["images"] for split, info in statistics["splits"].items()} == \
        {split: info["records"] for split, info in metadata["splits"].items()}


def test_a_coco_dataset_writes_statistics_and_groups_copies_in_one_split(tmp_path):
    items = scenes(6)
    copies = [dataclass_copy(scene, f"copy-{scene.name}") for scene in items[:2]]
    path = write_coco(tmp_path / "coco", items + copies)
    result = tfrecorder.convert(str(path), tmp_path / "out", progress=False, split="unassigned")
    job = result.tfrecord_dir
    statistics = json.loads(open(os.path.join(job, STATISTICS_FILE)).read())
    boxes = sum(len(scene.objects) for scene in items + copies)
    assert sum(info["boxes"] for info in statistics["splits"].values()) == boxes
    assert sum(info["images"] for info in statistics["splits"].values()) == len(items) + 2
    counts = result.metadata["duplicates"]
    assert (counts["groups"], counts["rows"], counts["leaking_groups"]) == (2, 4, 0)
    for group in {row["group"] for row in duplicate_rows(job)}:
        assert len({row["split"] for row in duplicate_rows(job) if row["group"] == group}) == 1


def dataclass_copy(scene, name):
    import dataclasses

    return dataclasses.replace(scene, name=name)


def test_drop_keeps_one_image_per_group_with_its_boxes_identically_under_replay(tmp_path, tf):
    frame = _boxes_of_copies(tmp_path, lambda group, copy: "TEST" if copy == 2 else "TRAIN")  # every group leaks
    options = {"duplicates": "drop", "max_shard_bytes": 2000, "progress": False}  # several pieces
    plain = tfrecorder.convert(frame, tmp_path / "plain", **options)
    replayed = tfrecorder.convert(frame, tmp_path / "replayed", beam_options=REPLAY, **options)
    assert snapshot(replayed.tfrecord_dir) == snapshot(plain.tfrecord_dir)
    metadata = plain.metadata
    kept = {str(tmp_path / f"g{g:02d}-0.png") for g in range(GROUPS)}
    records = read_od_records(tf, plain.tfrecord_dir)
    assert set(records) == kept and metadata["splits"]["TRAIN"]["records"] == GROUPS and "TEST" not in metadata["splits"]
    assert all(len(record["image/object/class/text"]) == (3 if int(uri[-8:-6]) % 2 else 2)
               for uri, record in records.items())
    dropped_rows = len(frame) - len(frame[frame["image_uri"].isin(kept)])
    assert metadata["discard_reasons"] == {"duplicate of": dropped_rows}
    assert metadata["rows_written"] + metadata["discarded"] == metadata["rows_in"] == len(frame)
    assert metadata["duplicates"]["dropped"] == GROUPS * (COPIES - 1)  # images
    assert "leakage" not in repr(plain)
    with open(os.path.join(plain.tfrecord_dir, "discarded.csv")) as stream:
        discarded = list(csv.DictReader(stream))
    assert len(discarded) == dropped_rows
    assert all(row["reason"] == f"duplicate of {row['image_uri'][:-6]}-0.png" for row in discarded)
    assert tfrecorder.verify(plain.tfrecord_dir).ok


def test_drop_in_a_coco_dataset_discards_the_copy_and_its_objects_identically_under_replay(tmp_path, tf):
    items = scenes(4)
    copy = dataclass_copy(items[1], "zz-copy")  # sorts after its original: the original is kept
    path = write_coco(tmp_path / "coco", items + [copy])
    result = tfrecorder.convert(str(path), tmp_path / "out", progress=False, duplicates="drop")
    replayed = tfrecorder.convert(str(path), tmp_path / "replayed", progress=False, duplicates="drop",
                                  beam_options=REPLAY)
    assert snapshot(replayed.tfrecord_dir) == snapshot(result.tfrecord_dir)
    for name in (STATISTICS_FILE, DUPLICATES_FILE):
        assert open(os.path.join(replayed.tfrecord_dir, name)).read() == open(os.path.join(result.tfrecord_dir, name)).read()
    metadata = result.metadata
    assert metadata["records_written"] == len(items)
    assert metadata["discard_reasons"] == {"duplicate of": 1 + len(copy.objects)}  # the image and its objects
    assert metadata["rows_written"] + metadata["discarded"] == metadata["rows_in"]
    assert not any("zz-copy" in uri for uri in read_od_records(tf, result.tfrecord_dir))


def test_a_resumed_detection_drop_job_publishes_what_an_uninterrupted_one_does(tmp_path):
    """Committed buckets of images hold their images' places with their digests and statistics: a
    continued job publishes the same statistics, duplicates.csv, records and discards."""
    from pathlib import Path

    from support.resume_runs import convert_code, detection_csv, incomplete, job_contents, manifests, run_killed

    source = detection_csv(tmp_path / "boxes", images=120, files=12)  # every file under 10 names
    options = {"num_shards": 2, "duplicates": "drop"}
    reference = tfrecorder.convert(str(source), str(tmp_path / "reference"), progress=False,
                                   beam_options={"direct_num_workers": 1}, **options)
    assert reference.metadata["duplicates"]["dropped"] > 0
    output = tmp_path / "out"
    run_killed(convert_code(source, output, **options), lambda: manifests(output) >= 2)
    assert incomplete(output)
    result = tfrecorder.convert(str(source), str(output), progress=False, beam_options={"direct_num_workers": 1},
                                **options)
    assert result["resumed"] is True
    assert job_contents(Path(result["tfrecord_dir"])) == job_contents(Path(reference["tfrecord_dir"]))
