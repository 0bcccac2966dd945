"""COCO instance files as a conversion source: `images`, `annotations` and `categories` streamed.

Recognised from content (a JSON object whose top-level keys are COCO's: tfrecorder.sources.coco_json).
The driver reads the head and a sample of `images` only. Workers read three parts — the categories,
the images and the annotations — each one streaming pass over the file; the dataset graph
(beam_pipelines/graphs/dataset_graph.py) joins annotations to their image by image id. Image file names
resolve against `image_root` (default: for `annotations/instances_<name>.json`, a sibling folder
`<name>/` when it exists, else the JSON file's folder).

A dataset delivered as one file per split (`instances_train2017.json`, `instances_val2017.json`: a
glob, a directory of `instances_*.json` or a list of paths) is one job (`open_coco_files`): each file
keeps its split (from its name, or the `split` option), its images' folder and its own image ids (a
record's image key is prefixed with its file's name, so equal ids in two files never meet in the join).
The files must declare the same categories: the driver reads each file's `categories` (coco_json.
read_categories: from the file's tail when they come last) and raises one ValueError naming the first
file that differs. Workers read the
categories of the first file and the images and annotations of every file, one part each.
"""
from __future__ import annotations

import dataclasses
import os
import posixpath
from typing import Any, Iterator, Optional, Sequence

import pandas as pd

from tfrecorder.core.schema import Schema
from tfrecorder.io import storage
from tfrecorder.core import splits
from tfrecorder.rows.dataset_records import DATASET_COLUMNS, IMAGE, RECORD
from tfrecorder.sources.coco_json import SECTIONS, iter_section, looks_like_coco, read_categories, sample_images
from tfrecorder.sources.source_protocol import REASONED, SAMPLE_ROWS, FileTable, Table, parent_dir


BYTES_PER_RECORD = 460  # COCO 2017 train: 448 MB for 118,287 images + 860,001 annotations (the row estimate)


@dataclasses.dataclass(frozen=True)
class CocoRows:
    """A COCO file as workers read it: one part per section, each streamed."""

    path: str
    kind: str = "coco"
    split: Optional[str] = None  # the split every image takes (the `split` option); None: from the file's name
    image_prefix: str = ""  # one file of several: its image folder, relative to the job's base_dir
    key_prefix: str = ""  # one file of several: its name, so image ids are the file's own

    def known_parts(self) -> list[str]:
        return list(SECTIONS)

    def scan_units(self) -> list:
        return []

    def scan(self, unit: Any) -> Any:
        raise NotImplementedError("a COCO file's parts are its sections: nothing to scan")

    def plan_parts(self, scans: Sequence[Any]) -> list[str]:
        return list(SECTIONS)

    def read_part(self, part: str, columns: Sequence[str], schema: Schema) -> Iterator[Any]:
        for item in iter_section(self.path, part, self.split):
            if self.image_prefix or self.key_prefix:
                item = (self._placed(item[0]), item[1]) if isinstance(item, tuple) else self._placed(item)
            yield (REASONED, item) if isinstance(item, tuple) else item

    def _placed(self, row: dict) -> dict:
        """A record of one file among several: its image key prefixed with the file's name, an image's
        relative name with the file's image folder."""
        row = dict(row)
        if row.get("image_key") is not None:
            row["image_key"] = self.key_prefix + str(row["image_key"])
        if row.get(RECORD) == IMAGE:
            if row.get("ref"):
                row["ref"] = f"{self.key_prefix} {row['ref']}"
            uri = row.get("image_uri")
            if isinstance(uri, str) and "://" not in uri and not uri.startswith("/"):
                row["image_uri"] = self.image_prefix + uri
        return row

    @property
    def reads_batches(self) -> bool:
        return False

    def read_batches(self, part: str, columns: Sequence[str], schema: Schema, batch_rows: int) -> Iterator[Any]:
        raise NotImplementedError("COCO files are read record by record")


@dataclasses.dataclass(frozen=True)
class CocoFilesRows:
    """Several COCO files of one dataset as workers read them: the first file's categories, then every
    file's images and annotations, one part each ((file index, section))."""

    files: tuple[CocoRows, ...]
    kind: str = "coco"

    def known_parts(self) -> list[tuple[int, str]]:
        return [(0, "categories")] + [(index, section) for index in range(len(self.files))
                                      for section in SECTIONS if section != "categories"]

    def scan_units(self) -> list:
        return []

    def scan(self, unit: Any) -> Any:
        raise NotImplementedError("COCO files' parts are their sections: nothing to scan")

    def plan_parts(self, scans: Sequence[Any]) -> list[tuple[int, str]]:
        return self.known_parts()

    def read_part(self, part: tuple[int, str], columns: Sequence[str], schema: Schema) -> Iterator[Any]:
        index, section = part
        return self.files[index].read_part(section, columns, schema)

    @property
    def reads_batches(self) -> bool:
        return False

    def read_batches(self, part: Any, columns: Sequence[str], schema: Schema, batch_rows: int) -> Iterator[Any]:
        raise NotImplementedError("COCO files are read record by record")


@dataclasses.dataclass
class CocoTable(FileTable):
    """A COCO file opened from its head and a sample of its images."""


@dataclasses.dataclass
class CocoFilesTable(Table):
    """Several COCO files of one dataset, opened from each one's head and a sample of its images."""

    rows: Optional[CocoFilesRows] = None

    def worker_files(self) -> list[str]:
        return [rows.path for rows in self.rows.files]

    def row_source(self, schema: Schema, work_dir: str) -> CocoFilesRows:
        return self.rows


def check_split(split: Optional[str]) -> Optional[str]:
    """The `split` option as a split name (TRAIN, VALIDATION, TEST, or UNASSIGNED: assigned by hash),
    None when not given; ValueError for anything else."""
    if split is None:
        return None
    name = splits.normalize_split(split) if isinstance(split, str) and split.strip() else None
    if name is None:
        raise ValueError(f"split must be one of train, validation, test or unassigned (every image of a COCO "
                         f"file takes it), not {split!r}")
    return name


def default_image_root(path: str) -> str:
    """Where a COCO file's image names resolve when no image_root is given: `<root>/<name>/` beside an
    `annotations/instances_<name>.json` when that folder exists (on gs://: holds an object), else the
    JSON file's folder."""
    folder = parent_dir(path)
    stem = posixpath.splitext(posixpath.basename(path.replace("\\", "/")))[0]
    name = stem.split("_", 1)[1] if "_" in stem else stem
    remote = storage.is_remote(folder)
    if (posixpath if remote else os.path).basename(folder) == "annotations":
        candidate = storage.join((posixpath if remote else os.path).dirname(folder), name)
        if storage.holds_files(candidate):
            return candidate
    return folder


def _absolute(path: str) -> str:
    return path if storage.is_remote(path) else os.path.abspath(path)


def open_coco(path: str, image_root: Optional[str] = None, split: Optional[str] = None) -> Optional[CocoTable]:
    """A CocoTable if `path` is a COCO instances file, else None; ValueError for a COCO file without
    images or whose JSON breaks within the sample. `split` (checked by `check_split`) is the split of
    every image, else the file's name says it."""
    if not looks_like_coco(path):
        return None
    path = _absolute(path)
    sample = pd.DataFrame(sample_images(path, SAMPLE_ROWS, split), columns=list(DATASET_COLUMNS))
    base = _absolute(image_root if image_root is not None else default_image_root(path))
    estimate = max(len(sample), storage.size(path) // BYTES_PER_RECORD)
    return CocoTable(list(DATASET_COLUMNS), sample, base, estimate, True, rows=CocoRows(path, split=split))


def common_root(roots: Sequence[str]) -> str:
    """The deepest folder holding every image root (all local, or all in one bucket), else "" (image
    names then stay absolute)."""
    if all(not storage.is_remote(root) for root in roots):
        return os.path.commonpath(roots)
    heads = {root.split("://", 1)[0] + "://" + root.split("://", 1)[1].split("/", 1)[0]
             for root in roots if storage.is_remote(root)}
    if len(heads) != 1 or not all(storage.is_remote(root) for root in roots):
        return ""
    head = heads.pop()
    return head + posixpath.commonpath(["/" + root[len(head):].strip("/") for root in roots]).rstrip("/")


def folder_under(root: str, base: str) -> str:
    """The folder prefix of an image root under the job's base_dir ("" when equal; the whole root,
    absolute, when there is no common base)."""
    if not base:
        return root.rstrip("/") + "/"
    rest = root[len(base):].strip("/").replace(os.sep, "/") if storage.is_remote(root) else \
        os.path.relpath(root, base).replace(os.sep, "/")
    return "" if rest in ("", ".") else rest + "/"


def open_coco_files(paths: Sequence[str], image_root: Optional[str] = None,
                    split: Optional[str] = None) -> Table:
    """Several COCO files of one dataset (one per split) as one table; a single file opens as `open_coco`
    does. ValueError, before any work, for a file that is not a COCO instances file, has no images, or
    declares other categories than the first file; for two paths naming the same file."""
    paths = [_absolute(path) for path in paths]
    if not paths:
        raise ValueError("no COCO file to convert: the list, glob or folder names none")
    if len(paths) == 1:
        table = open_coco(paths[0], image_root, split)
        if table is None:
            raise ValueError(f"{paths[0]} is not a COCO instances file (a JSON object with images, "
                             "annotations and categories)")
        return table
    if len(set(paths)) != len(paths):
        raise ValueError(f"a COCO file is named twice: {sorted(p for p in paths if paths.count(p) > 1)[0]}")
    for path in paths:
        if not looks_like_coco(path):
            raise ValueError(f"{path} is not a COCO instances file (a JSON object with images, annotations "
                             "and categories)")
    names = [posixpath.basename(path.replace("\\", "/")) for path in paths]
    tags = names if len(set(names)) == len(names) else paths
    categories = read_categories(paths[0])
    for path in paths[1:]:
        theirs = read_categories(path)
        if theirs != categories:
            differing = sorted(set(theirs.items()) ^ set(categories.items()))[:3]
            raise ValueError(f"{path} declares other categories than {paths[0]} (e.g. id, name: {differing}); "
                             "the files of one dataset must share their categories")
    roots = [_absolute(image_root if image_root is not None else default_image_root(path)) for path in paths]
    base = common_root(roots)
    files = tuple(CocoRows(path, split=split, image_prefix=folder_under(root, base), key_prefix=f"{tag}:")
                  for path, root, tag in zip(paths, roots, tags))
    each = max(1, SAMPLE_ROWS // len(paths))
    samples = [pd.DataFrame([rows._placed(r) for r in sample_images(rows.path, each, split)],
                            columns=list(DATASET_COLUMNS)) for rows in files]
    sample = pd.concat(samples, ignore_index=True)
    estimate = max(len(sample), sum(storage.size(path) for path in paths) // BYTES_PER_RECORD)
    return CocoFilesTable(list(DATASET_COLUMNS), sample, base, estimate, True, rows=CocoFilesRows(files))


def coco_files_in(path: str, listed: Sequence[str]) -> list[str]:
    """The `instances_*.json` files directly in a folder (its absolute path or URL, and its listing),
    else those in its `annotations/` (the root of COCO's layout), sorted."""
    prefix = path.rstrip("/").replace("\\", "/") + "/"
    for folder in ("", "annotations/"):
        found = []
        for name in listed:
            slashed = name.replace("\\", "/")
            relative = slashed[len(prefix + folder):] if slashed.startswith(prefix + folder) else ""
            if "/" not in relative and relative.startswith("instances_") and relative.lower().endswith(".json"):
                found.append(name)
        if found:
            return sorted(found)
    return []
