"""Which source kind a `convert()` source is: the one place a source is recognised and opened.

Kinds are tried in order: detection datasets (a COCO instances file, a Pascal VOC or YOLO folder,
recognised from their content), annotation files (recognised from their content, or forced by
`annotation_format`), a DataFrame, then a path — a directory of Parquet files or a SPLIT/LABEL image
folder, a glob of Parquet files, a Parquet file by its name, a gzip-compressed CSV by its first bytes,
else a CSV file. Adding a kind means one module with its Table and RowSource (see source_protocol) and
one line here.
"""
from __future__ import annotations

import os
from typing import Any, Optional, Union

import pandas as pd

from tfrecorder.io import storage
from tfrecorder.sources import parquet_files
from tfrecorder.sources.annotation_source import open_annotations
from tfrecorder.sources.coco_source import open_coco
from tfrecorder.sources.voc_source import open_voc
from tfrecorder.sources.yolo_source import open_yolo
from tfrecorder.sources.csv_source import open_csv
from tfrecorder.sources.csv_text import DEFAULT_ENCODING
from tfrecorder.sources.dataframe_source import open_dataframe
from tfrecorder.sources.gzip_csv_source import is_gzip, open_gzip_csv
from tfrecorder.sources.image_folder_source import open_image_folder
from tfrecorder.sources.parquet_source import open_parquet
from tfrecorder.sources.source_protocol import Table


def open_table(source: Union[pd.DataFrame, str, os.PathLike], annotation_format: Optional[str] = None,
               encoding: str = DEFAULT_ENCODING, image_root: Optional[str] = None) -> Table:
    """Recognise the source and open it as a Table from a sample; raise ValueError for anything unusable.
    `encoding` (checked by conversion_options) is a CSV file's; `image_root` where a COCO file's image
    names resolve."""
    dataset = open_dataset(source, image_root) if annotation_format is None else None
    if dataset is not None:
        return dataset
    if image_root is not None:
        raise ValueError(f"image_root applies to COCO instances files; {source!r} is not one")
    annotations = open_annotations(source, annotation_format)
    if annotations is not None:
        return annotations
    if isinstance(source, pd.DataFrame):
        return open_dataframe(source)
    if not isinstance(source, (str, os.PathLike)):
        raise ValueError(f"source must be a DataFrame, a CSV or Parquet path or an image directory, "
                         f"not {type(source).__name__}")
    return _open_path(os.fspath(source), encoding)


def open_dataset(source: Any, image_root: Optional[str] = None) -> Optional[Table]:
    """A COCO instances file or a YOLO data.yaml as a Table, else None (Pascal VOC and YOLO folders are
    recognised with the other folders, from their one listing: `_open_directory`)."""
    if not isinstance(source, (str, os.PathLike)):
        return None
    path = os.fspath(source)
    if parquet_files.is_parquet_name(path) or parquet_files.is_glob(path):
        return None
    is_file = storage.exists(path.rstrip("/")) if storage.is_remote(path) else os.path.isfile(path)
    if is_file:
        return open_coco(path, image_root) or open_yolo(path)
    return None


def _open_path(path: str, encoding: str) -> Table:
    if storage.is_remote(path):  # one listing tells a folder (of Parquet files or images) from a missing object
        listed = None if storage.exists(path.rstrip("/")) else storage.list_files(path)
        if listed is not None and parquet_files.is_glob(path):
            return open_parquet(path)
        if listed:
            return _open_directory(path, listed)
        if listed is not None:
            raise ValueError(f"source {path} does not exist")
    elif os.path.isdir(path):
        return _open_directory(os.path.abspath(path), storage.list_files(os.path.abspath(path)))
    elif not os.path.exists(path):
        if parquet_files.is_glob(path):
            return open_parquet(path)
        raise ValueError(f"source {path} does not exist")
    if parquet_files.is_parquet_name(path):
        return open_parquet(path)
    if is_gzip(path):
        return open_gzip_csv(path, encoding)
    return open_csv(path, encoding)


def _open_directory(path: str, listed: list[str]) -> Table:
    """A directory (its absolute path or URL, and every file under it): a Pascal VOC or YOLO dataset,
    Parquet files, else a SPLIT/LABEL image folder."""
    dataset = open_voc(path, listed) or open_yolo(path, listed)
    if dataset is not None:
        return dataset
    if parquet_files.parquet_files_in(path.rstrip("/"), listed):
        return open_parquet(path, listed)
    return open_image_folder(path, listed)

