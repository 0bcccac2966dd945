"""Issue 29, point 4: UNASSIGNED exact duplicates share a split; duplicates="drop" keeps one row per group."""
import csv
import os
import shutil

import numpy as np
import pandas as pd
from PIL import Image

import tfrecorder
from support.replay import REPLAY
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
