"""Image sets with planted duplicates, shared by the duplicate and leakage tests (issue 29).

`copied_pngs` writes byte-identical copies (exact duplicates); `planted_photos` writes natural-looking
photos with every near-duplicate variant of `support.natural_images`; `duplicate_rows` reads a job's
duplicates.csv back.
"""
from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

import numpy as np
from PIL import Image

from support.natural_images import VARIANTS, encoded, photo, variant
from tfrecorder.format.statistics_files import DUPLICATES_FILE


def copied_pngs(directory: Path, groups: int, copies: int, shape: tuple[int, int], seed: int) -> list[list[Path]]:
    """`groups` distinct random PNGs of `shape` (height, width), each under `copies` names `g<group>-<copy>.png`
    (byte-identical within a group). Returns the paths, one list per group."""
    rng = np.random.default_rng(seed)
    paths = []
    for group in range(groups):
        first = directory / f"g{group:02d}-0.png"
        Image.fromarray(rng.integers(0, 255, (*shape, 3), dtype=np.uint8)).save(first)
        for copy in range(1, copies):
            shutil.copy(first, directory / f"g{group:02d}-{copy}.png")
        paths.append([directory / f"g{group:02d}-{copy}.png" for copy in range(copies)])
    return paths


def planted_photos(directory: Path, photos: int, varied: int, split: str = "TRAIN",
                   variant_split: str = "TEST") -> list[dict]:
    """`photos` distinct JPEG photos `p<i>.jpg` in `split`; the first `varied` of them also get every planted
    variant `p<i>-<kind>.<ext>` in `variant_split`. Returns the rows (image_uri, split)."""
    rows = []
    for i in range(photos):
        data = encoded(photo(i), "JPEG")
        (directory / f"p{i}.jpg").write_bytes(data)
        rows.append({"image_uri": str(directory / f"p{i}.jpg"), "split": split})
        if i < varied:
            for kind in VARIANTS:
                copy, extension = variant(data, kind)
                (directory / f"p{i}-{kind}.{extension}").write_bytes(copy)
                rows.append({"image_uri": str(directory / f"p{i}-{kind}.{extension}"), "split": variant_split})
    return rows


def duplicate_rows(job: str) -> list[dict]:
    """The rows of `job`'s duplicates.csv, as dicts."""
    with open(os.path.join(job, DUPLICATES_FILE)) as stream:
        return list(csv.DictReader(stream))
