"""Versions of a dataset (issue 28): what a version inherits from its parent, and the "lineage" entry of its metadata.json.

A version is an immutable job directory holding every record of its parent (the parent's shards carried
over under new names, never re-read or re-encoded) plus the records of newly appended rows. Its
metadata.json lists all shards like any job's, so readers need nothing new, and adds:

    "lineage": {
      "version": 2,                                   # 1 for a plain conversion (no entry at all)
      "parent": {"job_name": ..., "metadata_sha256": ..., "version": 1},
      "added": {"rows_in": ..., "discarded": ..., "records": {"TRAIN": n, ...}},
      "vocabulary_growth": {"label": ["new", "labels"]},
      "carried_shards": [{"file": new name, "parent_file": ..., "records": ..., "bytes": ...}, ...],
      "merged_shards": [{"parent_file": ..., "records": ...}, ...],
      "small_shards": [file, ...],
      "image_size": [h, w] or null
    }

No flood of tiny shards after many appends: a shard an append writes that is smaller than half of
max_shard_bytes is listed in "small_shards"; the next append does not carry such shards but re-assembles
their records together with its new rows' records ("merged_shards"). Shards of the first conversion are
never rewritten, nor any shard that was full. (Gzip jobs carry every shard: their shards have no index
of record offsets to re-assemble from.)

`BaseJob` is what the driver reads of the parent (O(shards), as metadata.json itself) and the pipeline
carries in its JobConfig. Pure: no Beam, no row logic.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, Iterable, Mapping, Optional, Sequence

from tfrecorder.core.schema import Schema
from tfrecorder.core.splits import SPLITS
from tfrecorder.format.file_names import METADATA_FILE, JobName, ShardName, index_file_name
from tfrecorder.format.job_directory import job_file
from tfrecorder.format.legacy import v2_directory
from tfrecorder.io import storage

LINEAGE_KEY = "lineage"
DUPLICATE_REASON = "already in base"  # discard reason of a new row already in the base: "already in base: <job>"
DUPLICATES_CHOICES = ("discard", "keep")


@dataclasses.dataclass(frozen=True)
class CarriedShard:
    """One shard of the parent, as its metadata.json records it."""

    split: str
    parent_file: str
    records: int
    bytes: int
    parent_index_file: Optional[str] = None
    parent_keys_file: Optional[str] = None  # its image keys sidecar (tfrecorder.format.image_keys), if any


@dataclasses.dataclass(frozen=True)
class BaseJob:
    """The parent of a new version, read once by the driver from its metadata.json."""

    tfrecord_dir: str
    job_name: str
    metadata_sha256: str
    version: int
    schema: Schema
    compression: Optional[str]
    validate: str
    image_size: Optional[tuple[int, int]]
    vocabularies: Mapping[str, tuple[str, ...]]
    shards: tuple[CarriedShard, ...]
    records_written: int
    unknown_labels: Mapping[str, int] = dataclasses.field(default_factory=dict)
    nullable_columns: tuple[str, ...] = ()  # inputs the parent's feature spec lets be missing
    images: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # the parent's "images" entry
    task: Optional[str] = None
    duplicates: str = "discard"
    new_rows_estimate: int = 0  # the driver's estimate of the new rows (sizes the duplicates filter)
    merged: tuple[CarriedShard, ...] = ()  # small shards of earlier appends, re-assembled with the new rows

    @classmethod
    def read(cls, tfrecord_dir: str, duplicates: str = "discard") -> "BaseJob":
        """The finished job at `tfrecord_dir`; ValueError for anything that cannot be a parent."""
        tfrecord_dir = storage.user_path(tfrecord_dir, "base job directory").rstrip("/")
        if duplicates not in DUPLICATES_CHOICES:
            raise ValueError(f"duplicates must be one of {', '.join(DUPLICATES_CHOICES)}, got {duplicates!r}")
        path = job_file(tfrecord_dir, METADATA_FILE)
        if not storage.exists(path):
            if v2_directory.is_legacy_dir(tfrecord_dir):
                raise ValueError(f"{tfrecord_dir} was written by TFRecorder 2.0; convert it with "
                                 "tfrecorder.upgrade (CLI: tfrecorder upgrade) first, then append to the upgraded job")
            raise ValueError(f"{tfrecord_dir} is not a finished tfrecorder job directory (no {METADATA_FILE})")
        raw = storage.read_bytes(path)
        try:
            document = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"{tfrecord_dir}: {METADATA_FILE} is not valid JSON ({exc})") from None
        return cls.from_document(tfrecord_dir, document, hashlib.sha256(raw).hexdigest(), duplicates)

    @classmethod
    def from_document(cls, tfrecord_dir: str, document: Mapping[str, Any], digest: str,
                      duplicates: str = "discard") -> "BaseJob":
        if "legacy_format" in document:
            raise ValueError(f"{tfrecord_dir} was written by TFRecorder 2.0; run tfrecorder.upgrade on it first")
        lineage = document.get(LINEAGE_KEY) or {}
        small = set(lineage.get("small_shards", [])) if document.get("compression") is None else set()
        shards, merged = [], []
        for split in SPLITS:
            for shard in document.get("splits", {}).get(split, {}).get("shards", []):
                entry = CarriedShard(split, shard["file"], int(shard["records"]), int(shard["bytes"]),
                                     shard.get("index_file"), shard.get("keys_file"))
                (merged if shard["file"] in small and entry.parent_index_file else shards).append(entry)
        size = lineage.get("image_size", document.get("image_size"))
        return cls(
            tfrecord_dir=tfrecord_dir,
            job_name=str(document.get("job_name") or tfrecord_dir.rstrip("/").rsplit("/", 1)[-1]),
            metadata_sha256=digest,
            version=version_of(document),
            schema=Schema.from_json(document.get("schema", {})),
            compression=document.get("compression"),
            validate=str(document.get("validate") or "decode"),
            image_size=None if size is None else (int(size[0]), int(size[1])),
            vocabularies={column: tuple(labels) for column, labels in document.get("vocabularies", {}).items()},
            shards=tuple(shards),
            merged=tuple(merged),
            records_written=int(document.get("records_written", sum(s.records for s in shards))),
            unknown_labels={split: int(info.get("unknown_labels", 0))
                            for split, info in document.get("splits", {}).items()},
            nullable_columns=tuple(sorted(
                name for name, feature in document.get("features", {}).items() if feature.get("allow_missing"))),
            images=dict(document.get("images", {})),
            task=document.get("task"),
            duplicates=duplicates,
        )

    @property
    def label(self) -> Optional[str]:
        """The job label of the parent's name, given to the new version ("pets" of pets-20261121-193000-v2)."""
        parsed = JobName.parse(self.job_name)
        return parsed.label if parsed else None

    @property
    def next_version(self) -> int:
        return self.version + 1

    def check_columns(self, columns: Iterable[str]) -> None:
        """The new rows must have the parent's columns: ValueError naming a missing or extra one."""
        present, expected = [str(c) for c in columns], list(self.schema)
        missing = [c for c in expected if c not in present]
        extra = [c for c in present if c not in expected]
        if missing:
            raise ValueError(f"the new rows lack column(s) {missing} of the base job {self.job_name} "
                             f"(its columns: {expected})")
        if extra:
            raise ValueError(f"the new rows have column(s) {extra} the base job {self.job_name} does not have "
                             f"(its columns: {expected}); drop them or convert a new dataset")

    @property
    def all_shards(self) -> tuple[CarriedShard, ...]:
        """Every shard of the parent: those carried, then those merged."""
        return self.shards + self.merged

    def shards_of(self, split: str) -> list[CarriedShard]:
        return [shard for shard in self.shards if shard.split == split]

    def carried_count(self, split: str) -> int:
        return len(self.shards_of(split))


def version_of(document: Mapping[str, Any]) -> int:
    """A job's version number: 1 unless it was made by an append."""
    return int((document.get(LINEAGE_KEY) or {}).get("version", 1))


def grown_vocabularies(base: Mapping[str, Sequence[str]],
                       found: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """The parent's vocabularies with labels first seen in the new rows' TRAIN split appended in sorted
    order: an existing label keeps its id."""
    grown = {column: list(labels) for column, labels in base.items()}
    for column, labels in found.items():
        known = set(grown.get(column, ()))
        grown.setdefault(column, []).extend(sorted(set(labels) - known))
    return {column: labels for column, labels in grown.items() if labels}


def vocabulary_growth(base: Mapping[str, Sequence[str]], grown: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Labels each vocabulary gained, in id order."""
    return {column: list(labels[len(base.get(column, ())):]) for column, labels in grown.items()
            if len(labels) > len(base.get(column, ()))}


def merged_images(base: Mapping[str, Any], found: Mapping[str, Any]) -> dict[str, Any]:
    """The "images" entry of a version: the formats and channel counts of the parent's images and the new ones."""
    merged: dict[str, Any] = {}
    for prefix in sorted(set(base) | set(found)):
        kinds = [base.get(prefix, {}), found.get(prefix, {})]
        merged[prefix] = {key: sorted({value for kind in kinds for value in kind.get(key, [])})
                          for key in sorted({key for kind in kinds for key in kind})}
    return merged


def carried_name(shard: CarriedShard, index: int, count: int, compression: Optional[str]) -> str:
    """The carried shard's name in the new version: its place among the split's base + new shards."""
    return ShardName(shard.split, index, count, compression).file_name


def carried_index_name(shard_file: str) -> str:
    return index_file_name(shard_file)


def lineage_entry(base: BaseJob, rows_in: int, discarded: int, shards: Iterable[Mapping[str, Any]],
                  vocabularies: Mapping[str, Sequence[str]], image_size: Optional[Sequence[int]],
                  small_bytes: int = 0, compression: Optional[str] = None) -> dict[str, Any]:
    """The "lineage" entry of a version's metadata.json, from its shard summaries (carried ones hold
    "parent_file"); shards written here under `small_bytes` are listed as small (merged by the next append)."""
    added: dict[str, int] = {}
    carried, small = [], []
    for shard in sorted(shards, key=lambda s: (SPLITS.index(s["split"]), s["index"])):
        if shard.get("parent_file"):
            carried.append({"file": shard["file"], "parent_file": shard["parent_file"],
                            "records": shard["records"], "bytes": shard["bytes"]})
        else:
            added[shard["split"]] = added.get(shard["split"], 0) + shard["records"]
            if compression is None and shard["bytes"] < small_bytes:
                small.append(shard["file"])
    for shard in base.merged:  # their records are in the new shards, but were in the parent already
        added[shard.split] -= shard.records
    added = {split: n for split, n in added.items() if n}
    return {
        "version": base.next_version,
        "parent": {"job_name": base.job_name, "metadata_sha256": base.metadata_sha256, "version": base.version},
        "added": {"rows_in": rows_in, "discarded": discarded,
                  "records": {split: added[split] for split in SPLITS if split in added}},
        "vocabulary_growth": vocabulary_growth(base.vocabularies, vocabularies),
        "carried_shards": carried,
        "merged_shards": [{"parent_file": shard.parent_file, "records": shard.records} for shard in base.merged],
        "small_shards": small,
        "image_size": None if image_size is None else list(image_size),
    }


def carried_problems(document: Mapping[str, Any], shard_sizes: Mapping[str, tuple[int, Optional[int]]],
                     parent: Optional[Mapping[str, Any]], parent_digest: Optional[str]) -> list[str]:
    """What verify() finds wrong with a version's carried shards: `shard_sizes` maps each listed file to
    (records read, bytes on disk); `parent` is the parent's metadata.json when it can be read (with its
    sha256), whose recorded sizes the carried shards must still have."""
    lineage = document.get(LINEAGE_KEY) or {}
    problems = []
    parent_shards = {}
    if parent is not None:
        recorded = lineage.get("parent", {}).get("metadata_sha256")
        if parent_digest != recorded:
            problems.append(f"parent {lineage['parent']['job_name']}: its {METADATA_FILE} changed since this version "
                            f"was made (sha256 {parent_digest}, recorded {recorded})")
        parent_shards = {s["file"]: s for info in parent.get("splits", {}).values() for s in info.get("shards", [])}
    for carried in lineage.get("carried_shards", []):
        found = shard_sizes.get(carried["file"])
        if found is None:
            problems.append(f"carried shard {carried['file']} is not listed in the version's splits")
            continue
        records, size = found
        expected = parent_shards.get(carried["parent_file"], carried) if parent is not None else carried
        if parent is not None and carried["parent_file"] not in parent_shards:
            problems.append(f"carried shard {carried['file']}: the parent lists no {carried['parent_file']}")
            continue
        if records != expected["records"] or (size is not None and size != expected["bytes"]):
            problems.append(f"carried shard {carried['file']}: {records} records, {size} bytes; the parent recorded "
                            f"{expected['records']} records, {expected['bytes']} bytes for {carried['parent_file']}")
    return problems
