"""A SPLIT/LABEL/image folder as a conversion source: listed once into split,image_uri,label rows."""
from __future__ import annotations

import logging
import os
from typing import Optional

import pandas as pd

from tfrecorder.io import storage
from tfrecorder.sources.dataframe_source import DataFrameTable, frame_table

logger = logging.getLogger("tfrecorder")


def list_image_directory(root: str, files: Optional[list[str]] = None) -> pd.DataFrame:
    """Rows split,image_uri,label for every image file at ROOT/SPLIT/LABEL/file (`files`: the listing
    of root, when the caller already has it)."""
    root = root.rstrip("/") if storage.is_remote(root) else os.path.abspath(root)
    rows, skipped = [], 0
    for path in files if files is not None else storage.list_files(root):
        parts = path[len(root):].strip("/").split("/")
        if len(parts) == 3 and not any(p.startswith(".") for p in parts):
            rows.append({"split": parts[0], "image_uri": path, "label": parts[1]})
        else:
            skipped += 1
    if skipped:
        logger.warning("ignored %d file(s) not laid out as SPLIT/LABEL/FILE under %s", skipped, root)
    if not rows:
        raise ValueError(f"directory {root} holds no Parquet files and no images laid out as SPLIT/LABEL/image")
    return pd.DataFrame(rows, columns=["split", "image_uri", "label"])


def open_image_folder(root: str, listed: Optional[list[str]] = None) -> DataFrameTable:
    """The folder's listing as a DataFrame source (image URIs are absolute: nothing to resolve them against)."""
    return frame_table(list_image_directory(root, listed), "")
