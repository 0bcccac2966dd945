"""`verify()` for a TFRecorder 2.0 directory: what its files allow checking, and what they do not.

Checked: every shard of every split is present (2.0's `-SSSSS-of-NNNNN` names say how many there
are), every record's framing and CRCs (and the gzip stream), every record parses with the feature
spec of its schema.pbtxt, and every image's base64 pixel data holds exactly image_height ×
image_width × image_channels bytes. Not checkable: record counts (2.0 recorded none), and whether
the pixels are the source image's (2.0 kept no checksum of it).
"""
from __future__ import annotations

import gzip
import zlib

from tfrecorder.example_decoder import parse_example
from tfrecorder.job_info import JobInfo
from tfrecorder import storage
from tfrecorder.legacy_records import PIXEL_MISMATCH, pixel_array
from tfrecorder.row_encoder import RowError
from tfrecorder.tfrecord_format import CorruptRecordError, read_records
from tfrecorder.verify import PARSE_BLOCK, ShardReport, VerifyReport, _ExampleChecker

MAX_REPORTED = 5
NOT_CHECKED = [
    "record counts: TFRecorder 2.0 recorded none per shard or split, so records were counted, not compared",
    "image content: TFRecorder 2.0 kept no checksum of the source images; pixel data was checked against its "
    "stated height x width x channels only",
]


def _check_pixels(job: JobInfo, record: bytes, index: int, report: ShardReport, bad: list[int]) -> None:
    if not job.pixel_images:
        return
    try:
        pixel_array(parse_example(record))
    except (RowError, ValueError, IndexError) as exc:
        bad.append(index)
        if len(bad) <= MAX_REPORTED:
            report.problems.append(f"record {index}: {exc}")


def _check_shard(job: JobInfo, checker: _ExampleChecker, split: str, shard: dict) -> ShardReport:
    report = ShardReport(shard["file"], split, None)
    bad_pixels: list[int] = []
    block: list[bytes] = []
    try:
        with job.open_shard(storage.join(job.tfrecord_dir, shard["file"])) as stream:
            for record in read_records(stream):
                _check_pixels(job, record, report.records, report, bad_pixels)
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
    if len(bad_pixels) > MAX_REPORTED:
        report.problems.append(f"{len(bad_pixels)} records in all: {PIXEL_MISMATCH}")
    return report


def verify_legacy(job: JobInfo) -> VerifyReport:
    """Check a TFRecorder 2.0 directory; the report's `not_checked` says what its files cannot tell."""
    checker = _ExampleChecker(job)
    shards = [_check_shard(job, checker, split, shard)
              for split, info in job.metadata["splits"].items() for shard in info["shards"]]
    return VerifyReport(job.tfrecord_dir, shards, list(job.metadata["layout_problems"]),
                        not_checked=NOT_CHECKED + list(job.metadata["notes"]))
