"""`verify()` for a TFRecorder 2.0 directory: what its files allow checking, and what they do not.

Checked: every shard of every split is present (2.0's `-SSSSS-of-NNNNN` names say how many there
are), every record's framing and CRCs (and the gzip stream), every record parses with the feature
spec of its schema.pbtxt, and every image's base64 pixel data holds exactly image_height ×
image_width × image_channels bytes. Not checkable: record counts (2.0 recorded none), and whether
the pixels are the source image's (2.0 kept no checksum of it).
"""
from __future__ import annotations

from tfrecorder.format.example_decoder import parse_example
from tfrecorder.format.finished_job import JobInfo
from tfrecorder.format.legacy.v2_records import PIXEL_MISMATCH, pixel_array
from tfrecorder.errors import RowError
from tfrecorder.reading.shard_checks import ExampleChecker, ShardReport, VerifyReport, check_shard

MAX_REPORTED = 5
NOT_CHECKED = [
    "record counts: TFRecorder 2.0 recorded none per shard or split, so records were counted, not compared",
    "image content: TFRecorder 2.0 kept no checksum of the source images; pixel data was checked against its "
    "stated height x width x channels only",
]


class _PixelCheck:
    """Each record's image pixel data against its stated shape; the first few mismatches named, then a count."""

    def __init__(self) -> None:
        self.bad = 0

    def __call__(self, record: bytes, index: int, problems: list[str]) -> None:
        try:
            pixel_array(parse_example(record))
        except (RowError, ValueError, IndexError) as exc:
            self.bad += 1
            if self.bad <= MAX_REPORTED:
                problems.append(f"record {index}: {exc}")

    def finish(self, problems: list[str]) -> None:
        if self.bad > MAX_REPORTED:
            problems.append(f"{self.bad} records in all: {PIXEL_MISMATCH}")


def _check_shard(job: JobInfo, checker: ExampleChecker, split: str, shard: dict) -> ShardReport:
    pixels = _PixelCheck() if job.pixel_images else None
    report = check_shard(job, checker, split, shard, pixels)
    if pixels is not None:
        pixels.finish(report.problems)
    return report


def verify_legacy(job: JobInfo) -> VerifyReport:
    """Check a TFRecorder 2.0 directory; the report's `not_checked` says what its files cannot tell."""
    checker = ExampleChecker(job)
    shards = [_check_shard(job, checker, split, shard)
              for split, info in job.metadata["splits"].items() for shard in info["shards"]]
    return VerifyReport(job.tfrecord_dir, shards, list(job.metadata["layout_problems"]),
                        not_checked=NOT_CHECKED + list(job.metadata["notes"]))
