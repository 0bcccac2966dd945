"""metadata.json, the document that describes a finished job: one class builds, writes and reads it.

It holds everything `load()` needs to parse the records (feature spec, compression, vocabularies)
and everything `verify()` needs to check them (record count of each shard and split). Its presence
marks a job directory complete (tfrecorder.format.job_directory). Files go through
tfrecorder.io.storage, so gs:// works.
"""
from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import json
from typing import Any, Collection, Iterable, Mapping, Optional, Protocol

from tfrecorder.format.feature_spec import feature_spec
from tfrecorder.format.file_names import INDEX_DIR, METADATA_FILE
from tfrecorder.format.job_directory import job_file
from tfrecorder.io import storage
from tfrecorder.core.schema import Schema
from tfrecorder.core.splits import SPLITS
from tfrecorder.core.version import __version__

FORMAT_VERSION = 1


class JobDescription(Protocol):
    """What metadata.json records of the job itself (the pipeline's JobConfig is one)."""

    job_name: str
    runner: str
    compression: Optional[str]
    validate: str
    schema: Schema
    nullable_columns: Collection[str]
    extra_metadata: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class JobMetadata:
    """A job's metadata.json: built from the finished job's counts, written, and read back (`document`
    is the JSON object, keys in the order they are written)."""

    document: Mapping[str, Any]

    @classmethod
    def build(
        cls,
        config: JobDescription,
        shards: Iterable[Mapping[str, Any]],
        vocabularies: Mapping[str, list[str]],
        rows_in: int,
        discard_reasons: Mapping[str, int],
        unknown_labels: Mapping[str, int],
        rows_written: Optional[int] = None,
        images: Optional[Mapping[str, Any]] = None,
    ) -> "JobMetadata":
        """`shards`: dicts with split, index, file, records, bytes.

        `rows_written`: for jobs that merge several rows into one record (detection: one row per box),
        how many input rows are inside the written records; by default one row is one record.
        `images`: the formats and channel counts written per image feature (the "images" entry).
        """
        by_split: dict[str, list[Mapping[str, Any]]] = collections.defaultdict(list)
        for shard in shards:
            by_split[shard["split"]].append(shard)
        split_info = {}
        for split in SPLITS:
            entries = sorted(by_split.get(split, []), key=lambda s: s["index"])
            if not entries:
                continue
            split_info[split] = {
                "records": sum(s["records"] for s in entries),
                "bytes": sum(s["bytes"] for s in entries),
                "unknown_labels": int(unknown_labels.get(split, 0)),
                "shards": [{"file": s["file"], "records": s["records"], "bytes": s["bytes"],
                            **({"index_file": s["index_file"]} if s.get("index_file") else {}),
                            **({"keys_file": s["keys_file"]} if s.get("keys_file") else {})} for s in entries],
            }
        written = sum(info["records"] for info in split_info.values())
        discarded = sum(discard_reasons.values())
        inside = written if rows_written is None else rows_written
        if inside + discarded != rows_in:
            raise RuntimeError(
                f"row accounting failed: {rows_in} rows in, {inside} written + {discarded} discarded"
            )
        return cls({
            "format_version": FORMAT_VERSION,
            "tfrecorder_version": __version__,
            "job_name": config.job_name,
            "created_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "runner": config.runner,
            "compression": config.compression,
            "validate": config.validate,
            "schema": config.schema.to_json(),
            "features": feature_spec(config.schema, config.nullable_columns),
            "vocabularies": {k: list(v) for k, v in vocabularies.items()},
            "rows_in": rows_in,
            "records_written": written,
            **({} if rows_written is None else {"rows_written": rows_written}),
            "discarded": discarded,
            "discard_reasons": dict(sorted(discard_reasons.items(), key=lambda kv: -kv[1])),
            "splits": split_info,
            "record_index": record_index_note(config.compression),
            **config.extra_metadata,
            **({} if images is None else {"images": dict(images)}),
        })

    def updated(self, **entries: Any) -> "JobMetadata":
        """The document with `entries` set: existing keys keep their place, new ones go last."""
        return JobMetadata({**self.document, **entries})

    def to_json(self) -> bytes:
        return json.dumps(self.document, indent=2).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes) -> "JobMetadata":
        return cls(json.loads(data))

    def write(self, directory: str) -> None:
        """Write metadata.json into `directory`: the last file of a job, the mark that it is complete."""
        storage.write_bytes(storage.join(directory, METADATA_FILE), self.to_json())

    @classmethod
    def read(cls, directory: str) -> "JobMetadata":
        """A finished job's metadata.json; ValueError for a directory without one (not a finished job)."""
        path = job_file(directory, METADATA_FILE)  # a link to another job's metadata.json is refused
        if not storage.exists(path):
            raise ValueError(f"{directory} is not a finished tfrecorder job directory (no {METADATA_FILE})")
        return cls.from_json(storage.read_bytes(path))


def record_index_note(compression: str | None) -> dict[str, Any]:
    """What metadata.json says about index files (each shard entry names its own "index_file")."""
    if compression:
        return {"written": False, "reason": f"{compression} shards allow no random access, so they have no index files"}
    return {"written": True, "directory": INDEX_DIR, "line_format": "offset length",
            "length": "whole framed record: 12-byte header + data + 4-byte footer"}


def reason_category(reason: str) -> str:
    """Group discard reasons for counting: the text before the first colon ('missing file: x' → 'missing file');
    a duplicate dropped by duplicates="drop" ('duplicate of <uri>') counts as 'duplicate of'."""
    if reason.startswith("duplicate of "):
        return "duplicate of"
    return reason.split(":", 1)[0].strip()
