"""Every file name of a job directory, and its recognition: the naming half of the on-disk contract.

A published job directory `<job_label>-<UTC timestamp>[-N]/` holds `metadata.json` (the completion
marker), shards `<split>-NNNNN-of-NNNNN.tfrecord[.gz]`, `index/<shard>.index` (tfrecorder.format.
record_index), `discarded.csv` and, for detection jobs, `label_map.pbtxt`. While it is written it is named `.incomplete-<name>` and holds
scratch directories (`_pieces/`: piece files + offsets sidecars, `_work/`, `_discards/`: discard part
files), removed before it is published. A Dataflow job keeps Beam's temp and staging files under
`output_dir/.tfrecorder-dataflow/`. docs/format.md describes each file.
"""
from __future__ import annotations

import re
import uuid
from typing import Optional

METADATA_FILE = "metadata.json"
DISCARD_FILE = "discarded.csv"
TEMP_PREFIX = ".incomplete-"  # an unpublished job directory
PIECES_DIR, WORK_DIR, DISCARDS_DIR = "_pieces", "_work", "_discards"  # scratch, under the temporary directory
PART_SUFFIX = ".part"  # piece files and discard part files
OFFSETS_SUFFIX = ".offsets"  # a piece's sidecar: each record's end offset
DATAFLOW_STAGING_DIR = ".tfrecorder-dataflow"  # under output_dir: Beam's temp and staging files
LABEL_MAP_FILE = "label_map.pbtxt"  # detection jobs: the TF Object Detection API's label map

# What a reader treats as a shard even when metadata.json does not list it (verify reports strays).
SHARD_LIKE = re.compile(r"\.tfrecord(\.gz)?$|-\d+-of-\d+")


def shard_file_name(split: str, index: int, count: int, compression: Optional[str]) -> str:
    """`train-00000-of-00004.tfrecord`, `.tfrecord.gz` when gzip-compressed."""
    suffix = ".tfrecord.gz" if compression == "gzip" else ".tfrecord"
    return f"{split.lower()}-{index:05d}-of-{count:05d}{suffix}"


def piece_file_name(split: str) -> str:
    """A fresh piece name per writer attempt, so a retried bundle never touches a committed piece."""
    return f"{split.lower()}-{uuid.uuid4().hex}{PART_SUFFIX}"


def discard_part_name() -> str:
    """A fresh discard part name per bundle attempt."""
    return f"{uuid.uuid4().hex}{PART_SUFFIX}"


def temporary_file_name(name: str) -> str:
    """A hidden, attempt-unique name next to `name`, renamed onto it once complete (local files)."""
    return f".{name}.{uuid.uuid4().hex}"
