"""COCO instance files as a conversion source: `images`, `annotations` and `categories` streamed.

Recognised from content (a JSON object whose top-level keys are COCO's: tfrecorder.sources.coco_json).
The driver reads the head and a sample of `images` only. Workers read three parts — the categories,
the images and the annotations — each one streaming pass over the file; the dataset graph
(beam_pipelines/graphs/dataset_graph.py) joins annotations to their image by image id. Image file names
resolve against `image_root` (default: for `annotations/instances_<name>.json`, a sibling folder
`<name>/` when it exists, else the JSON file's folder).
"""
from __future__ import annotations

import dataclasses
import os
import posixpath
from typing import Any, Iterator, Optional, Sequence

import pandas as pd

from tfrecorder.core.schema import Schema
from tfrecorder.io import storage
from tfrecorder.rows.dataset_records import DATASET_COLUMNS
from tfrecorder.sources.coco_json import SECTIONS, iter_section, looks_like_coco, sample_images
from tfrecorder.sources.source_protocol import REASONED, SAMPLE_ROWS, FileTable, parent_dir


BYTES_PER_RECORD = 460  # COCO 2017 train: 448 MB for 118,287 images + 860,001 annotations (the row estimate)


@dataclasses.dataclass(frozen=True)
class CocoRows:
    """A COCO file as workers read it: one part per section, each streamed."""

    path: str
    kind: str = "coco"

    def known_parts(self) -> list[str]:
        return list(SECTIONS)

    def scan_units(self) -> list:
        return []

    def scan(self, unit: Any) -> Any:
        raise NotImplementedError("a COCO file's parts are its sections: nothing to scan")

    def plan_parts(self, scans: Sequence[Any]) -> list[str]:
        return list(SECTIONS)

    def read_part(self, part: str, columns: Sequence[str], schema: Schema) -> Iterator[Any]:
        for item in iter_section(self.path, part):
            yield (REASONED, item) if isinstance(item, tuple) else item

    @property
    def reads_batches(self) -> bool:
        return False

    def read_batches(self, part: str, columns: Sequence[str], schema: Schema, batch_rows: int) -> Iterator[Any]:
        raise NotImplementedError("COCO files are read record by record")


@dataclasses.dataclass
class CocoTable(FileTable):
    """A COCO file opened from its head and a sample of its images."""


def default_image_root(path: str) -> str:
    """Where a COCO file's image names resolve when no image_root is given: `<root>/<name>/` beside an
    `annotations/instances_<name>.json` when that folder exists, else the JSON file's folder."""
    folder = parent_dir(path)
    stem = posixpath.splitext(posixpath.basename(path.replace("\\", "/")))[0]
    name = stem.split("_", 1)[1] if "_" in stem else stem
    if not storage.is_remote(folder) and os.path.basename(folder) == "annotations":
        candidate = os.path.join(os.path.dirname(folder), name)
        if os.path.isdir(candidate):
            return candidate
    return folder


def open_coco(path: str, image_root: Optional[str] = None) -> Optional[CocoTable]:
    """A CocoTable if `path` is a COCO instances file, else None; ValueError for a COCO file without
    images or whose JSON breaks within the sample."""
    if not looks_like_coco(path):
        return None
    if not storage.is_remote(path):
        path = os.path.abspath(path)
    sample = pd.DataFrame(sample_images(path, SAMPLE_ROWS), columns=list(DATASET_COLUMNS))
    base = image_root if image_root is not None else default_image_root(path)
    if not storage.is_remote(base):
        base = os.path.abspath(base)
    estimate = max(len(sample), storage.size(path) // BYTES_PER_RECORD)
    return CocoTable(list(DATASET_COLUMNS), sample, base, estimate, True, rows=CocoRows(path))
