"""A job's fingerprint: what its output depends on, so that a later run can tell whether an incomplete
job is the same job (issue 27: resumable conversion).

Two runs match only if the source is unchanged — every file the workers read by path, size and
modification time (gs://: generation and size), a DataFrame (an image folder's listing too) by the
SHA-256 of its staged rows (the Arrow file its workers read, staged before the fingerprint is taken)
— and every option that changes output is equal. Options that change only how the job runs
(fetch_concurrency, beam_options, progress, verbose) are left out: a resumed job may run with others.
"""
from __future__ import annotations

import hashlib
import os
import time
from typing import Any, Optional

import pandas as pd

from tfrecorder.core.schema import Schema
from tfrecorder.rows.row_encoding import content_splits
from tfrecorder.core.version import __version__
from tfrecorder.io import storage
from tfrecorder.io.perceptual_hash import METHOD as PERCEPTUAL_HASH
from tfrecorder.options.piece_units import unit_batches
from tfrecorder.rows.duplicate_groups import buckets_per_key
from tfrecorder.rows.near_duplicates import bucket_shift

FINGERPRINT_VERSION = 10  # 2: a resumable image job's pieces end every 4 batches (were every batch); 3: units grow with
# the job; 4: columns outside the schema keep their numbers, datetimes and lists (their discarded rows sort otherwise);
# 5: Parquet row groups of more than SLICE_ROWS rows are parts as slices (other part names, other pieces); 6: image-free
# records' digests are SipHash halves (committed digest blocks of older runs are BLAKE2b), a DataFrame is named by
# its staged rows' digest; 7: Parquet slices of up to 500k rows (were 250k: other parts, other pieces); 8: Parquet
# slices cost alike, later ones shorter by the rows they skip (were equal); 9: CSV ranges and DataFrame row groups
# are equal, more than two of them a multiple of four (source_protocol.balanced_count); statistics' moments summed
# in sorted order; a DataFrame is staged as an Arrow file (was Parquet); committed quality files have a head; 10: a
# resumable image job's units hold rows of one split (encode_rows.SplitUnits), of at most 1,600 rows (were 2,048)


def source_identity(table: Any) -> dict[str, Any]:
    """The source as the fingerprint sees it: its files' identities, or the digest of a DataFrame's staged
    rows (the bytes its workers read; the table is staged first: Table.stage)."""
    frame = getattr(table, "frame", None)
    if isinstance(frame, pd.DataFrame):
        if table.staged is None:
            raise ValueError("a DataFrame's fingerprint is its staged rows' digest: stage the table first")
        return {"dataframe": table.staged.digest(), "rows": len(frame), "base_dir": table.base_dir}
    files = sorted(table.worker_files())
    return {"files": [[path, folder_listing(path) if storage.is_dir(path) else list(storage.identity(path))]
                      for path in files], "base_dir": table.base_dir}


def folder_listing(folder: str) -> list:
    """A VOC or YOLO folder's identity: a digest of its listing (every file's relative path, size and
    modification time locally; on remote storage the names), and how many files it holds. One listing
    in the driver, as the source's own opening takes; no file is read. Hidden entries are left out: an
    output_dir inside the folder holds the job's own `.incomplete-…`/`.resume-…` directories."""
    digest = hashlib.sha256()
    count = 0
    if storage.is_remote(folder):
        for path in storage.list_files(folder):
            if "/." in path[len(folder.rstrip("/")):]:
                continue
            digest.update(path.encode("utf-8") + b"\0")
            count += 1
        return ["listing", digest.hexdigest(), count]
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(name for name in dirs if not name.startswith("."))
        for name in sorted(name for name in names if not name.startswith(".")):
            path = os.path.join(root, name)
            try:
                status = os.stat(path)
            except OSError:  # a dangling link: its name is its identity
                status = None
            entry = (os.path.relpath(path, folder), status and status.st_size, status and status.st_mtime_ns)
            digest.update(repr(entry).encode("utf-8"))
            count += 1
    return ["listing", digest.hexdigest(), count]


def job_fingerprint(table: Any, schema: Schema, options: Any, runner: str, is_detection: bool,
                    dataset_split: Optional[str] = None, is_dataset: bool = False) -> dict[str, Any]:
    """Everything the output depends on: the source's identity and every output-affecting option
    (`options`: a checked ConvertOptions; `dataset_split`: a COCO/VOC/YOLO job's `split=`; its
    image_root is the table's base_dir, in the source's identity)."""
    return {
        "version": FINGERPRINT_VERSION,
        "tfrecorder_version": __version__,
        "source": source_identity(table),
        "options": {
            "schema": schema.to_json(),
            "detection": is_detection,
            **({"dataset": True, "split": dataset_split} if is_dataset else {}),
            "runner": runner,
            "job_label": options.job_label,
            "num_shards": options.num_shards,
            "max_shard_bytes": options.max_shard_bytes,
            "compression": options.compression,
            "image_size": list(options.image_size) if options.image_size else None,
            "validate": options.validate,
            "split_ratios": list(options.split_ratios),
            "max_image_pixels": options.max_image_pixels,
            "max_image_bytes": options.max_image_bytes,
            "box_units": options.box_units,
            "annotation_format": options.annotation_format,
            "encoding": options.encoding,
            # a unit's pieces close together: its size (from the job's size) decides the shards' pieces
            "unit_batches": unit_batches(table.rows_estimate, schema, options.validate),
            # issue 29: committed parts hold their statistics and digests (and band keys when searched)
            "statistics": options.statistics,
            # committed parts group their exact buckets under keys of as many as the job's size allows
            **({"buckets_per_key": buckets_per_key(table.rows_estimate)} if options.statistics else {}),
            "near_duplicate_distance": options.near_duplicate_distance,
            # committed parts hold perceptual hashes: a part hashed by another method is not comparable,
            # nor one whose band keys were bucketed with another shift (it follows the row estimate)
            **({"perceptual_hash": PERCEPTUAL_HASH, "near_bucket_shift": bucket_shift(table.rows_estimate)}
               if options.near_duplicate_distance else {}),
            # issue 29: UNASSIGNED rows of images take their split from their image bytes (committed
            # parts hold those splits); "drop" commits each row's place in its piece with its digest
            **({"content_splits": True} if content_splits(schema, is_detection) else {}),
            **({"duplicates": "drop"} if options.duplicates == "drop" else {}),
        },
    }


def with_progress_facts(fingerprint: dict, rows_estimate: int, parts_total: Optional[int]) -> dict:
    """The fingerprint as written: plus when the job started and its size (for `tfrecorder status`;
    never compared)."""
    return {**fingerprint, "created": time.time(), "rows_estimate": rows_estimate, "parts_total": parts_total}


def mismatch(old: Optional[dict], new: dict) -> Optional[str]:
    """Why the job of fingerprint `old` is not the job of `new` (one line), or None when they match."""
    if old is None:
        return "it has no fingerprint"
    for key in ("version", "tfrecorder_version"):
        if old.get(key) != new[key]:
            return f"it was written by another tfrecorder ({key} {old.get(key)} ≠ {new[key]})"
    old_source, new_source = old.get("source", {}), new["source"]
    if old_source != new_source:
        if ("dataframe" in old_source) != ("dataframe" in new_source):
            return "its source is of another kind"
        if "dataframe" in new_source:
            return "the DataFrame's content changed"
        old_files = dict((path, identity) for path, identity in old_source.get("files", []))
        for path, identity in new_source["files"]:
            if path not in old_files:
                return f"the source file {path} is not the one it read"
            if old_files[path] != identity:
                return f"the source file {path} changed (size, modification time or generation)"
        return "the source changed"
    old_options = old.get("options", {})
    for name, value in new["options"].items():
        if old_options.get(name) != value:
            return f"option {name} differs ({old_options.get(name)!r} then, {value!r} now)"
    return None
