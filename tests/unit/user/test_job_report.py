"""tfrecorder.report: sections from statistics.json and duplicates.csv, recomputed statistics for older jobs."""
import json
import os

import numpy as np
import pandas as pd
from PIL import Image

import tfrecorder
from tfrecorder.format.statistics_files import DUPLICATES_FILE, STATISTICS_FILE
from tfrecorder.job_report import read_groups


def _job(tmp_path):
    rng = np.random.default_rng(0)
    rows = []
    for i in range(6):
        path = tmp_path / f"p{i}.png"
        Image.fromarray(rng.integers(0, 255, (8, 8 + i, 3), dtype=np.uint8)).save(path)
        rows.append({"image_uri": str(path), "label": "a" if i % 2 else "b", "split": "TEST" if i == 5 else "TRAIN"})
    rows.append({**rows[0], "split": "TEST"})  # the same file in TEST: a leak
    return tfrecorder.convert(pd.DataFrame(rows), tmp_path / "out", progress=False)


def test_report_shows_leaks_with_thumbnails_labels_and_sizes(tmp_path):
    result = _job(tmp_path)
    found = tfrecorder.report(result.tfrecord_dir)
    page = found.html
    assert page.startswith("<!DOCTYPE html>") and "train/test leakage: 1 duplicate group" in page
    assert page.count("data:image/png;base64,") == 2 and "label per split" in page
    assert "image_uri width (train)" in page and page.count('class="tfr-chart"') >= 5
    assert "<script" not in page and not found.recomputed
    assert found.save(str(tmp_path / "r.html")) and (tmp_path / "r.html").read_text() == page
    assert "train/test leakage" in result._repr_html_()


def test_jobs_without_statistics_are_recomputed_from_records(tmp_path):
    result = _job(tmp_path)
    job = result.tfrecord_dir
    written = json.load(open(os.path.join(job, STATISTICS_FILE)))
    os.remove(os.path.join(job, STATISTICS_FILE))
    metadata = json.load(open(os.path.join(job, "metadata.json")))
    del metadata["duplicates"]
    json.dump(metadata, open(os.path.join(job, "metadata.json"), "w"))
    found = tfrecorder.report(job)
    assert found.recomputed and found.duplicates is None and "not computed for this job" in found.html
    assert found.statistics["splits"]["TRAIN"] == written["splits"]["TRAIN"]


def test_read_groups_keeps_leaks_first_and_bounded(tmp_path):
    lines = ["group,kind,split,row,kept,leak"]
    for g in range(30):
        leak = "yes" if g % 3 == 0 else "no"
        lines += [f"g{g},exact,TRAIN,r{g}a,yes,{leak}", f"g{g},exact,TEST,r{g}b,no,{leak}"]
    (tmp_path / DUPLICATES_FILE).write_text("\n".join(lines) + "\n")
    groups = read_groups(str(tmp_path), shown=3)
    assert [g["group"] for g in groups] == ["g0", "g3", "g6", "g1", "g2", "g4"]
    assert groups[0]["members"] == [("TRAIN", "r0a", True), ("TEST", "r0b", False)]


def test_a_job_that_dropped_duplicates_says_so_without_a_leak_warning():
    from tfrecorder.job_report import duplicates_html

    counts = {"groups": 2, "rows": 5, "redundant": 3, "leaking_groups": 1, "leaking_rows": 2, "dropped": 3}
    shown = duplicates_html(counts, [])
    assert "3 rows dropped" in shown and "tfr-warn" not in shown
    assert "tfr-warn" in duplicates_html({k: v for k, v in counts.items() if k != "dropped"}, [])


def test_a_detection_job_without_statistics_gets_them_recomputed_from_its_records(detection_job, tmp_path):
    import shutil

    job = str(tmp_path / "old")
    shutil.copytree(detection_job["tfrecord_dir"], job)
    with open(os.path.join(job, STATISTICS_FILE)) as stream:
        written = json.load(stream)
    for name in (STATISTICS_FILE, "statistics.pb", DUPLICATES_FILE):
        os.remove(os.path.join(job, name))
    found = tfrecorder.report(job)
    assert found.recomputed and "images written: train 2 (3 boxes)" in found.html
    for split, info in written["splits"].items():  # boxes are float32 in the records: compare the rest
        again = found.statistics["splits"][split]
        assert (again["images"], again["boxes"]) == (info["images"], info["boxes"])
        for feature in ("image", "label"):
            assert again["features"][feature] == info["features"][feature]
