"""Which source kind a `convert()` source is: the one place a source is recognised and opened.

Kinds are tried in order: detection datasets (a COCO instances file — or several of one dataset: a
list of paths, a glob ending in .json, a folder of `instances_*.json` —, a Pascal VOC or YOLO folder,
recognised from their content), annotation files (recognised from their content, or forced by
`annotation_format`), a DataFrame, then a path — a directory of Parquet files or a SPLIT/LABEL image
folder, a glob of Parquet files, a Parquet file by its name, a gzip-compressed CSV by its first bytes,
else a CSV file. Adding a kind means one module with its Table and RowSource (see source_protocol) and
one line here.
"""
from __future__ import annotations

import os
from typing import Any, Optional, Sequence, Union

import pandas as pd

from tfrecorder.io import storage
from tfrecorder.sources import parquet_files
from tfrecorder.sources.annotation_source import open_annotations
from tfrecorder.sources.coco_source import CocoFilesTable, CocoTable, check_split, coco_files_in, open_coco, open_coco_files
from tfrecorder.sources.voc_source import open_voc
from tfrecorder.sources.yolo_source import open_yolo
from tfrecorder.sources.csv_source import open_csv
from tfrecorder.sources.csv_text import DEFAULT_ENCODING
from tfrecorder.sources.dataframe_source import open_dataframe
from tfrecorder.sources.gzip_csv_source import is_gzip, open_gzip_csv
from tfrecorder.sources.image_folder_source import open_image_folder
from tfrecorder.sources.parquet_source import open_parquet
from tfrecorder.sources.source_protocol import Table


Source = Union[pd.DataFrame, str, os.PathLike, Sequence[Union[str, os.PathLike]]]


def open_table(source: Source, annotation_format: Optional[str] = None, encoding: str = DEFAULT_ENCODING,
               image_root: Optional[str] = None, split: Optional[str] = None) -> Table:
    """Recognise the source and open it as a Table from a sample; raise ValueError for anything unusable.
    `encoding` (checked by conversion_options) is a CSV file's; `image_root` where a COCO file's image
    names resolve; `split` the split every image of COCO files takes (else each file's name says it).
    A list or tuple of paths is the files of one COCO dataset."""
    split = check_split(split)
    if isinstance(source, (list, tuple)):
        if annotation_format is not None or not all(isinstance(p, (str, os.PathLike)) for p in source):
            raise ValueError("a list of sources is the COCO instances files of one dataset: paths, without "
                             "annotation_format")
        return open_coco_files([os.fspath(p) for p in source], image_root, split)
    dataset = open_dataset(source, image_root, split) if annotation_format is None else None
    if dataset is not None:
        return _coco_options_apply(dataset, source, image_root, split)
    if image_root is not None or split is not None:
        if not (isinstance(source, (str, os.PathLike)) and _is_folder(os.fspath(source))):
            _coco_options_apply(None, source, image_root, split)
    annotations = open_annotations(source, annotation_format)
    if annotations is not None:
        return annotations
    if isinstance(source, pd.DataFrame):
        return open_dataframe(source)
    if not isinstance(source, (str, os.PathLike)):
        raise ValueError(f"source must be a DataFrame, a CSV or Parquet path, an image directory or a list "
                         f"of COCO files, not {type(source).__name__}")
    return _coco_options_apply(_open_path(os.fspath(source), encoding, image_root, split), source, image_root, split)


def _is_folder(path: str) -> bool:
    """Whether a path may be a folder (of COCO files): a gs:// one is known only once listed."""
    return storage.is_remote(path) or os.path.isdir(path)


def _coco_options_apply(table: Optional[Table], source: Any, image_root: Optional[str],
                        split: Optional[str]) -> Table:
    """The table, unless image_root or split was given for a source that is no COCO file: ValueError."""
    if not isinstance(table, (CocoTable, CocoFilesTable)):
        for name, value in (("image_root", image_root), ("split", split)):
            if value is not None:
                raise ValueError(f"{name} applies to COCO instances files; {source!r} is not one")
    return table


def open_dataset(source: Any, image_root: Optional[str] = None, split: Optional[str] = None) -> Optional[Table]:
    """A COCO instances file, a glob of COCO files (one ending in .json) or a YOLO data.yaml as a Table,
    else None (Pascal VOC and YOLO folders and folders of COCO files are recognised with the other
    folders, from their one listing: `_open_directory`)."""
    if not isinstance(source, (str, os.PathLike)):
        return None
    path = os.fspath(source)
    if parquet_files.is_glob(path) and path.lower().endswith(".json"):
        matches = parquet_files.match_glob(path)
        if not matches:
            raise ValueError(f"glob {path} matches no file")
        return open_coco_files(matches, image_root, split)
    if parquet_files.is_parquet_name(path) or parquet_files.is_glob(path):
        return None
    is_file = storage.exists(path.rstrip("/")) if storage.is_remote(path) else os.path.isfile(path)
    if is_file:
        return open_coco(path, image_root, split) or open_yolo(path)
    return None


def _open_path(path: str, encoding: str, image_root: Optional[str] = None, split: Optional[str] = None) -> Table:
    if storage.is_remote(path):  # one listing tells a folder (of Parquet files or images) from a missing object
        listed = None if storage.exists(path.rstrip("/")) else storage.list_files(path)
        if listed is not None and parquet_files.is_glob(path):
            return open_parquet(path)
        if listed:
            return _open_directory(path, listed, image_root, split)
        if listed is not None:
            raise ValueError(f"source {path} does not exist")
    elif os.path.isdir(path):
        return _open_directory(os.path.abspath(path), storage.list_files(os.path.abspath(path)), image_root, split)
    elif not os.path.exists(path):
        if parquet_files.is_glob(path):
            return open_parquet(path)
        raise ValueError(f"source {path} does not exist")
    if parquet_files.is_parquet_name(path):
        return open_parquet(path)
    if is_gzip(path):
        return open_gzip_csv(path, encoding)
    return open_csv(path, encoding)


def _open_directory(path: str, listed: list[str], image_root: Optional[str] = None,
                    split: Optional[str] = None) -> Table:
    """A directory (its absolute path or URL, and every file under it): a Pascal VOC or YOLO dataset,
    COCO files (`instances_*.json` directly in it), Parquet files, else a SPLIT/LABEL image folder."""
    dataset = open_voc(path, listed) or open_yolo(path, listed)
    if dataset is not None:
        return dataset
    coco = coco_files_in(path, listed)
    if coco:
        return open_coco_files(coco, image_root, split)
    if parquet_files.parquet_files_in(path.rstrip("/"), listed):
        return open_parquet(path, listed)
    return open_image_folder(path, listed)

