"""Every file name of a job directory, built and recognised by the same values: the naming half of the on-disk contract.

A published job directory `<job_label>-<UTC timestamp>[-N]/` holds `metadata.json` (the completion
marker), shards `<split>-NNNNN-of-NNNNN.tfrecord[.gz]`, `index/<shard>.index` (tfrecorder.format.
record_index), `discarded.csv` and, for detection jobs, `label_map.pbtxt`. While it is written it is named `.incomplete-<name>` and holds
scratch directories (`_pieces/`: piece files + offsets sidecars, `_work/`, `_discards/`: discard part
files; resumable jobs also `_parts/`: a manifest per committed source part), removed before it is
published. A resumable job's fingerprint and its run's lock are beside it, in `.resume-<name>/`: outside
the directory that is renamed into place, so a published job never holds them. A Dataflow job keeps Beam's temp and staging files under
`output_dir/.tfrecorder-dataflow/`. docs/format.md describes each file.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import posixpath
import re
import uuid
from typing import Optional

METADATA_FILE = "metadata.json"
DISCARD_FILE = "discarded.csv"
TEMP_PREFIX = ".incomplete-"  # an unpublished job directory
PIECES_DIR, WORK_DIR, DISCARDS_DIR = "_pieces", "_work", "_discards"  # scratch, under the temporary directory
PARTS_DIR = "_parts"  # resumable jobs: a manifest per committed source part (tfrecorder.format.resume_files)
RESUME_PREFIX = ".resume-"  # resumable jobs: beside `.incomplete-<name>`, its fingerprint and the lock of the run continuing it
PART_SUFFIX = ".part"  # piece files and discard part files
OFFSETS_SUFFIX = ".offsets"  # a piece's sidecar: each record's end offset
DATAFLOW_STAGING_DIR = ".tfrecorder-dataflow"  # under output_dir: Beam's temp and staging files
LABEL_MAP_FILE = "label_map.pbtxt"  # detection jobs: the TF Object Detection API's label map

INDEX_DIR = "index"  # record index sidecars: index/<shard file>.index (tfrecorder.format.record_index)
INDEX_SUFFIX = ".index"
KEYS_DIR, KEYS_SUFFIX = "keys", ".keys"  # an append's image keys per shard (tfrecorder.format.image_keys)
DEFAULT_JOB_LABEL = "tfrecorder"

# What a reader treats as a shard even when metadata.json does not list it (verify reports strays).
_SHARD_LIKE = re.compile(r"\.tfrecord(\.gz)?$|-\d+-of-\d+")
# A shard name exactly (TFRecorder 2.0 named its shards the same way, and its directories are read by it).
_SHARD = re.compile(r"^(train|validation|test)-(\d{5,})-of-(\d{5,})\.tfrecord(\.gz)?$")
_STAMP = "%Y%m%d-%H%M%S"
_JOB = re.compile(r"^([a-z](?:[a-z0-9-]*[a-z0-9])?)-([0-9]{8}-[0-9]{6})(?:-v([0-9]+))?(?:-([0-9a-f]+))?$")


@dataclasses.dataclass(frozen=True)
class ShardName:
    """A shard file, `train-00000-of-00004.tfrecord` (`.tfrecord.gz` when gzip-compressed): built and parsed."""

    split: str  # upper-case: TRAIN, VALIDATION, TEST
    index: int
    count: int
    compression: Optional[str] = None  # "gzip" or None

    @property
    def file_name(self) -> str:
        suffix = ".tfrecord.gz" if self.compression == "gzip" else ".tfrecord"
        return f"{self.split.lower()}-{self.index:05d}-of-{self.count:05d}{suffix}"

    @classmethod
    def parse(cls, name: str) -> Optional["ShardName"]:
        """The shard a file name names, or None for any other name."""
        match = _SHARD.match(name)
        if not match:
            return None
        return cls(match.group(1).upper(), int(match.group(2)), int(match.group(3)), "gzip" if match.group(4) else None)

    @staticmethod
    def looks_like(name: str) -> bool:
        """Whether a reader treats the file as a shard even when metadata.json does not list it (or as
        its index file): named `.tfrecord[.gz]` or `-N-of-N` (verify reports such strays)."""
        return bool(_SHARD_LIKE.search(name))


def index_file_name(shard_file: str) -> str:
    """The index file of a shard, relative to the job directory: `index/train-00000-of-00004.tfrecord.index`."""
    return posixpath.join(INDEX_DIR, posixpath.basename(shard_file) + INDEX_SUFFIX)


def keys_file_name(job_name: str, shard_file: str) -> str:
    """The image keys sidecar of a shard as the job `job_name` wrote (or first scanned) it, relative to the
    job directory: `keys/pets-20261121-193000.train-00000-of-00004.tfrecord.keys`. Named after that job
    and file, not after the shard's name in a later version, so it is carried under the same name."""
    return posixpath.join(KEYS_DIR, f"{job_name}.{posixpath.basename(shard_file)}{KEYS_SUFFIX}")


def is_index_file(name: str) -> bool:
    """Whether a name relative to the job directory is in the index directory."""
    return name.startswith(INDEX_DIR + "/")


def sanitize_job_label(label: Optional[str]) -> str:
    """Lower-case letters, digits and dashes only, starting with a letter, at most 40 characters.

    The label becomes a directory name and (on Dataflow) part of a job name; anything else, slashes
    and dots included, is replaced so output can never escape output_dir.
    """
    text = re.sub(r"[^a-z0-9-]+", "-", str(label or DEFAULT_JOB_LABEL).lower()).strip("-")
    text = re.sub(r"-{2,}", "-", text)
    if not text or not text[0].isalpha():
        text = f"job-{text}".rstrip("-")
    return text[:40].rstrip("-")


@dataclasses.dataclass(frozen=True)
class JobName:
    """A job directory's name, `<job label>-<UTC timestamp>[-v<version>][-<suffix>]`: built and parsed.

    The suffix tells apart jobs that started in the same second: an attempt number locally, six
    random hex digits on object stores (tfrecorder.format.job_directory.reserve_job_dir). A version
    made by `tfrecorder.append` (2, 3, ...) carries `-v<version>` (tfrecorder.format.lineage)."""

    label: str
    started: dt.datetime
    suffix: Optional[str] = None
    version: Optional[int] = None

    @classmethod
    def new(cls, label: Optional[str], now: Optional[dt.datetime] = None, version: Optional[int] = None) -> "JobName":
        """A name for a job starting now, its label sanitised (`sanitize_job_label`)."""
        return cls(sanitize_job_label(label), now or dt.datetime.now(dt.timezone.utc), version=version)

    def with_suffix(self, suffix: str) -> "JobName":
        return dataclasses.replace(self, suffix=suffix)

    @property
    def name(self) -> str:
        stamp = f"{self.label}-{self.started.strftime(_STAMP)}"
        if self.version is not None:
            stamp = f"{stamp}-v{self.version}"
        return f"{stamp}-{self.suffix}" if self.suffix else stamp

    @classmethod
    def parse(cls, name: str) -> Optional["JobName"]:
        """The job a directory name names (published, without the `.incomplete-` prefix), or None."""
        match = _JOB.match(name)
        if not match:
            return None
        started = dt.datetime.strptime(match.group(2), _STAMP).replace(tzinfo=dt.timezone.utc)
        version = int(match.group(3)) if match.group(3) else None
        return cls(match.group(1), started, match.group(4), version)


def piece_file_name(split: str) -> str:
    """A fresh piece name per writer attempt, so a retried bundle never touches a committed piece."""
    return f"{split.lower()}-{uuid.uuid4().hex}{PART_SUFFIX}"


def discard_part_name() -> str:
    """A fresh discard part name per bundle attempt."""
    return f"{uuid.uuid4().hex}{PART_SUFFIX}"


def join_part_name(bucket: int) -> str:
    """A fresh name per written part of one join bucket (dataset jobs' records, spilled under _work/)."""
    return f"join-{bucket:04d}-{uuid.uuid4().hex}{PART_SUFFIX}"


def temporary_file_name(name: str) -> str:
    """A hidden, attempt-unique name next to `name`, renamed onto it once complete (local files)."""
    return f".{name}.{uuid.uuid4().hex}"


_TEMPORARY = re.compile(r"^\..+\.[0-9a-f]{32}$")


def is_temporary_name(name: str) -> bool:
    """Whether `name` is a temporary_file_name: what a killed attempt may leave beside its destination."""
    return bool(_TEMPORARY.match(name))
