"""Checking one shard of a job against metadata.json: framing, CRCs, index file, Example parsing and counts
(shared by `verify()` and its TFRecorder 2.0 variant, tfrecorder.legacy.v2_verify)."""
from __future__ import annotations

import dataclasses
import gzip
import math
import zlib
from typing import Callable, Iterable, Optional

from tfrecorder.io import storage
from tfrecorder.errors import CorruptDataError, CorruptRecordError
from tfrecorder.format.finished_job import JobInfo
from tfrecorder.format.record_index import index_array
from tfrecorder.format.framing import read_records

PARSE_BLOCK = 256


@dataclasses.dataclass
class ShardReport:
    """What was found in one shard file (`split` is None for a file metadata.json does not list)."""

    file: str
    split: Optional[str]
    expected_records: Optional[int]
    records: int = 0
    problems: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def __str__(self) -> str:
        expected = ("not in metadata" if self.split is None else "no count recorded") if self.expected_records is None \
            else f"expected {self.expected_records}"
        status = "ok" if self.ok else "; ".join(self.problems)
        return f"{self.file}: {self.records} records ({expected}) — {status}"


@dataclasses.dataclass
class VerifyReport:
    """The result of `verify()`: `ok`, per-shard findings, and job-level problems."""

    tfrecord_dir: str
    shards: list[ShardReport]
    problems: list[str]
    not_checked: list[str] = dataclasses.field(default_factory=list)  # what the directory's files cannot tell

    @property
    def ok(self) -> bool:
        return not self.problems and all(shard.ok for shard in self.shards)

    @property
    def all_problems(self) -> list[str]:
        return [f"{s.file}: {p}" for s in self.shards for p in s.problems] + list(self.problems)

    def __repr__(self) -> str:
        records = sum(s.records for s in self.shards)
        head = f"verify {self.tfrecord_dir}: {'OK' if self.ok else 'FAILED'} — {len(self.shards)} shard files, {records} records"
        lines = [head] + [f"  {shard}" for shard in self.shards] + [f"  {problem}" for problem in self.problems]
        lines += [f"  not checked: {item}" for item in self.not_checked]
        return "\n".join(lines)

    __str__ = __repr__


def check_shard(job: JobInfo, checker: "ExampleChecker", split: str, shard: dict,
                 check_record: Optional[Callable[[bytes, int, list[str]], None]] = None) -> ShardReport:
    """Read one shard: framing, CRCs, parsing, count; `check_record(record, index, problems)` adds checks."""
    report = ShardReport(shard["file"], split, shard["records"])
    path = job.path(shard["file"])
    if not storage.exists(path):
        report.problems.append("missing shard file")
        return report
    size = storage.size(path)
    if "bytes" in shard and size != shard["bytes"]:
        report.problems.append(f"{size} bytes, metadata.json says {shard['bytes']}")
    block: list[bytes] = []
    offsets = _IndexCheck(job, shard, report.problems)
    try:
        with job.open_shard(path) as stream:
            for record in read_records(stream):
                offsets.add(len(record))
                if check_record is not None:
                    check_record(record, report.records, report.problems)
                report.records += 1
                block.append(record)
                if len(block) == PARSE_BLOCK:
                    checker.check(block, report.records - len(block), report.problems)
                    block = []
    except CorruptRecordError as exc:
        report.problems.append(f"record {report.records}: {exc}")
    except (EOFError, OSError, zlib.error, gzip.BadGzipFile) as exc:
        report.problems.append(f"record {report.records}: broken gzip stream ({exc})")
    checker.check(block, report.records - len(block), report.problems)
    offsets.finish()
    if shard["records"] is not None and report.records != shard["records"]:  # None: TFRecorder 2.0 kept no count
        report.problems.append(f"{report.records} readable records, metadata.json says {shard['records']}")
    return report


class _IndexCheck:
    """Compares a shard's index file (if metadata.json lists one) with the records as they are read."""

    MAX_REPORTED = 5

    def __init__(self, job: JobInfo, shard: dict, problems: list[str]) -> None:
        self.problems = problems
        self.name = shard.get("index_file")
        self.entries = None  # int64 [records, 2] of (offset, length)
        self.offset = self.position = self.mismatches = 0
        if not self.name:
            return
        path = job.path(self.name)
        if not storage.exists(path):
            problems.append(f"index file {self.name} is missing")
            return
        try:
            self.entries = index_array(storage.read_bytes(path))
        except CorruptDataError as exc:
            problems.append(f"index file {self.name}: {exc}")

    def add(self, data_length: int) -> None:
        if self.entries is None:
            return
        actual = (self.offset, data_length + 16)
        expected = tuple(int(v) for v in self.entries[self.position]) if self.position < len(self.entries) else None
        if expected != actual and self.mismatches < self.MAX_REPORTED:
            self.mismatches += 1
            self.problems.append(f"index file {self.name} line {self.position + 1} says "
                                 f"{'nothing' if expected is None else '%d %d' % expected}, record {self.position} "
                                 f"is at offset {actual[0]} with length {actual[1]}")
        self.offset += data_length + 16
        self.position += 1

    def finish(self) -> None:
        if self.entries is not None and len(self.entries) != self.position:
            self.problems.append(f"index file {self.name} lists {len(self.entries)} records, "
                                 f"the shard has {self.position} readable records")


class ExampleChecker:
    """Parses records as tf.train.Example with the job's feature spec, a block at a time."""

    MAX_REPORTED = 5  # per shard; a badly damaged shard should not produce a million lines

    def __init__(self, job: JobInfo) -> None:
        from tfrecorder.format.feature_spec import parse_spec
        from tfrecorder.core.tensorflow_import import import_tensorflow

        self.tf = import_tensorflow()
        self.spec = parse_spec(job.features)
        self.fixed_lengths = {  # ragged-parsed features that must still hold exactly n values when present
            name: math.prod(feature["shape"]) for name, feature in job.features.items()
            if feature["allow_missing"] and feature["shape"] is not None
        }

    def check(self, records: list[bytes], first_index: int, problems: list[str]) -> None:
        if not records:
            return
        if self._problem(records) is None:
            return
        for index, record in enumerate(records):  # locate the bad records one by one
            problem = self._problem([record])
            if problem is not None and sum("does not parse" in p for p in problems) < self.MAX_REPORTED:
                problems.append(f"record {first_index + index} does not parse: {problem}")

    def _problem(self, records: Iterable[bytes]) -> Optional[str]:
        tf = self.tf
        try:
            parsed = tf.io.parse_example(tf.constant(list(records)), self.spec)
        except (tf.errors.InvalidArgumentError, ValueError) as exc:
            return str(exc).splitlines()[0][:300]
        for name, size in self.fixed_lengths.items():
            lengths = parsed[name].row_lengths().numpy()
            if ((lengths != 0) & (lengths != size)).any():
                return f"feature {name!r} must have 0 or {size} values"
        return None
