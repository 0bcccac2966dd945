"""A finished job directory as its readers (`load`, `inspect`, `verify`) see it, from metadata.json.

One place resolves split names, shard paths, compression and which features are images or labels,
so the three readers agree. Metadata is read through tfrecorder.io.storage, so gs:// works.

Every file the metadata names (shards, index files, TFRecorder 2.0 discard files) is checked when it
is read (`tfrecorder.format.job_directory.job_file`): a name that leaves the job directory is a
CorruptDataError before any reader opens anything, and readers build paths through `path` only.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gzip
import json
from typing import Any, BinaryIO, Iterator, Mapping, Optional

from tfrecorder.core import types
from tfrecorder.errors import CorruptDataError
from tfrecorder.format import job_directory
from tfrecorder.format.legacy import v2_directory
from tfrecorder.io import storage
from tfrecorder.format.feature_spec import image_feature_prefix
from tfrecorder.format.file_names import METADATA_FILE
from tfrecorder.format.metadata_file import JobMetadata
from tfrecorder.core.schema import Schema
from tfrecorder.format.framing import read_records


@dataclasses.dataclass(frozen=True)
class JobInfo:
    tfrecord_dir: str
    metadata: Mapping[str, Any]

    @classmethod
    def read(cls, tfrecord_dir: str) -> "JobInfo":
        tfrecord_dir = storage.user_path(tfrecord_dir, "job directory")
        try:
            job = cls(tfrecord_dir, JobMetadata.read(tfrecord_dir).document)
        except json.JSONDecodeError as exc:
            raise CorruptDataError(f"{tfrecord_dir}: {METADATA_FILE} is not valid JSON ({exc}); nothing is read") from None
        except ValueError:
            if not v2_directory.is_legacy_dir(tfrecord_dir):  # TFRecorder 2.0 wrote no metadata.json
                raise
            job = cls(tfrecord_dir, v2_directory.read_metadata(tfrecord_dir))
        try:
            names = job.listed_files
        except (AttributeError, KeyError, TypeError) as exc:
            raise CorruptDataError(f"{tfrecord_dir}: {METADATA_FILE} does not list its splits' shards as a job's "
                                   f"does ({type(exc).__name__}: {exc}); nothing is read") from None
        for name in names:
            job.path(name)  # CorruptDataError for a file outside the directory, before anything is opened
        return job

    def path(self, name: str) -> str:
        """The path of a file the metadata names (relative to the job directory); CorruptDataError if it
        would lead outside the directory."""
        return job_directory.job_file(self.tfrecord_dir, name)

    @property
    def listed_files(self) -> list[str]:
        """Every file the metadata names: each split's shards and their index (and, for versions, image
        keys) files, TFRecorder 2.0 discard files."""
        names = []
        for info in self.metadata["splits"].values():
            for shard in info["shards"]:
                names.append(shard["file"])
                if shard.get("index_file"):
                    names.append(shard["index_file"])
                if shard.get("keys_file"):
                    names.append(shard["keys_file"])
        return names + list(self.metadata.get("discard_files", []))

    @property
    def legacy(self) -> bool:
        """True for a directory TFRecorder 2.0 wrote (metadata synthesised by tfrecorder.format.legacy.v2_directory)."""
        return "legacy_format" in self.metadata

    @property
    def pixel_images(self) -> list[str]:
        """Image features stored as base64 raw pixels (TFRecorder 2.0) rather than encoded files."""
        return list(self.metadata.get("pixel_images", []))

    @property
    def splits(self) -> list[str]:
        return list(self.metadata["splits"])

    def split_name(self, split: str) -> str:
        """The canonical (upper-case) name of a split present in this job; ValueError otherwise."""
        name = str(split).upper()
        if name not in self.metadata["splits"]:
            raise ValueError(f"split {split!r} is not in {self.tfrecord_dir}; it has {', '.join(self.splits) or 'no splits'}")
        return name

    def shard_paths(self, split: str) -> list[str]:
        shards = self.metadata["splits"][self.split_name(split)]["shards"]
        return [self.path(shard["file"]) for shard in shards]

    @property
    def compression(self) -> Optional[str]:
        return self.metadata.get("compression")

    @property
    def features(self) -> Mapping[str, Mapping[str, Any]]:
        return self.metadata["features"]

    @property
    def schema(self) -> Schema:
        return Schema.from_json(self.metadata.get("schema", {}))

    @property
    def image_prefixes(self) -> list[str]:
        """Features holding encoded image bytes (`image` for an `image_uri` column)."""
        return [image_feature_prefix(column) for column in self.schema.image_columns]

    @property
    def label_columns(self) -> list[str]:
        return self.schema.label_columns

    def label_name(self, column: str, value: int) -> str:
        """Vocabulary text of a label value; integer labels and unknown (-1) labels as text."""
        vocabulary = self.metadata.get("vocabularies", {}).get(column)
        if self.schema[column] not in (types.StringLabel, types.MultiLabel) or vocabulary is None:
            return str(value)
        return vocabulary[value] if 0 <= value < len(vocabulary) else "<unknown>"

    @contextlib.contextmanager
    def open_shard(self, path: str) -> Iterator[BinaryIO]:
        """A readable stream of a shard's TFRecord bytes (decompressed if the job is gzip)."""
        with storage.open_read(path) as raw:
            if self.compression == "gzip":
                with gzip.GzipFile(fileobj=raw, mode="rb") as stream:
                    yield stream
            else:
                yield raw

    def iter_records(self, split: str) -> Iterator[bytes]:
        """Every record of a split in shard order, CRC-checked."""
        for path in self.shard_paths(split):
            with self.open_shard(path) as stream:
                yield from read_records(stream)
