"""tfrecorder.reading.shard_checks: one shard against metadata.json (framing, CRCs, gzip stream, index file, parsing)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

import tfrecorder
from support import jobbuilder
from support.jobbuilder import index_of, largest_shard
from tfrecorder.format.example_encoder import encode_example, float_feature, int64_feature
from tfrecorder.format.framing import write_record
from tfrecorder.format.finished_job import JobInfo
from tfrecorder.reading.shard_checks import ExampleChecker, ShardReport, VerifyReport, check_shard


def test_truncated_shard(job_copy):
    shard = largest_shard(job_copy)
    shard.write_bytes(shard.read_bytes()[:-10])
    report = tfrecorder.verify(str(job_copy))
    assert not report.ok and "FAILED" in repr(report)
    (bad,) = [s for s in report.shards if not s.ok]
    assert bad.file == shard.name
    assert any("truncated record" in p for p in bad.problems)
    assert any("metadata.json says" in p for p in bad.problems)  # size and count
    assert bad.records == bad.expected_records - 1


def test_flipped_byte(job_copy):
    shard = largest_shard(job_copy)
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    report = tfrecorder.verify(str(job_copy))
    assert not report.ok
    (bad,) = [s for s in report.shards if not s.ok]
    assert any("checksum mismatch" in p for p in bad.problems), bad.problems


def test_records_that_do_not_parse(tmp_path, tf):
    features = {"x": {"dtype": "float32", "shape": [], "allow_missing": False},
                "v": {"dtype": "int64", "shape": [2], "allow_missing": True}}
    rows = [{"x": float_feature(1.0)}, {"x": float_feature(2.0), "v": int64_feature(1, 2)}]
    job = jobbuilder.write_job(tmp_path / "job", features, rows, {})
    assert tfrecorder.verify(str(job)).ok
    shard = job / "train-00000-of-00001.tfrecord"
    with open(shard, "ab") as stream:  # valid framing and CRCs, wrong contents
        write_record(stream, b"not an example")
        write_record(stream, encode_example({"x": int64_feature(3)}))
        write_record(stream, encode_example({"x": float_feature(4.0), "v": int64_feature(1, 2, 3)}))
    report = tfrecorder.verify(str(job))
    problems = report.shards[0].problems
    assert [p.split(" does not parse")[0] for p in problems if "does not parse" in p] == [
        "record 2", "record 3", "record 4"]
    assert "feature 'v' must have 0 or 2 values" in problems[-2]
    assert report.shards[0].records == 5 and not report.ok


def test_truncated_gzip_shard(image_table, tmp_path):
    result = tfrecorder.convert(pd.DataFrame(image_table.head(6)), tmp_path / "out", compression="gzip")
    job = Path(result["tfrecord_dir"])
    assert tfrecorder.verify(str(job)).ok
    shard = largest_shard(job)
    shard.write_bytes(shard.read_bytes()[:-40])
    report = tfrecorder.verify(str(job))
    assert not report.ok
    (bad,) = [s for s in report.shards if not s.ok]
    assert bad.file.endswith(".tfrecord.gz")


def test_index_file_that_disagrees_with_its_shard(job_copy):
    shard = largest_shard(job_copy)
    index = index_of(job_copy, shard)
    lines = index.read_text().splitlines()
    offset, length = lines[1].split()
    lines[1] = f"{offset} {int(length) + 1}"
    index.write_text("\n".join(lines[:-1]) + "\n")  # one length off, last record dropped
    report = tfrecorder.verify(str(job_copy))
    (bad,) = [s for s in report.shards if not s.ok]
    assert bad.file == shard.name and not report.ok
    assert any("line 2 says" in p and f"length {length}" in p for p in bad.problems), bad.problems
    assert any(f"lists {len(lines) - 1} records" in p for p in bad.problems), bad.problems


def test_check_shard_reads_one_listed_shard_and_runs_the_extra_record_check(job_copy):
    job = JobInfo.read(str(job_copy))
    checker = ExampleChecker(job)
    split = job.splits[0]
    shard = job.metadata["splits"][split]["shards"][0]
    report = check_shard(job, checker, split, shard)
    assert report.ok and report.records == report.expected_records == shard["records"] > 0
    seen = []
    check_shard(job, checker, split, shard, lambda record, index, problems: seen.append((index, len(record) > 0)))
    assert seen == [(i, True) for i in range(shard["records"])]

    def flag_first(record, index, problems):
        if index == 0:
            problems.append("record 0: flagged")

    assert check_shard(job, checker, split, shard, flag_first).problems == ["record 0: flagged"]
    gone = check_shard(job, checker, split, {**shard, "file": "train-00009-of-00010.tfrecord"})
    assert gone.problems == ["missing shard file"] and gone.records == 0 and not gone.ok


def test_reports_read_as_what_was_found():
    bad = ShardReport("train-00000-of-00001.tfrecord", "TRAIN", 3, records=2, problems=["truncated record"])
    assert str(bad) == "train-00000-of-00001.tfrecord: 2 records (expected 3) — truncated record"
    assert str(ShardReport("x.tfrecord", None, None)) == "x.tfrecord: 0 records (not in metadata) — ok"
    assert str(ShardReport("x.tfrecord", "TRAIN", None, records=4)) == "x.tfrecord: 4 records (no count recorded) — ok"
    report = VerifyReport("/job", [bad], ["TRAIN: 2 readable records, metadata.json says 3"], not_checked=["counts"])
    assert not report.ok
    assert report.all_problems == [f"{bad.file}: truncated record", "TRAIN: 2 readable records, metadata.json says 3"]
    assert repr(report).splitlines() == ["verify /job: FAILED — 1 shard files, 2 records", f"  {bad}",
                                         "  TRAIN: 2 readable records, metadata.json says 3", "  not checked: counts"]
    assert VerifyReport("/job", [ShardReport("a", "TRAIN", 0)], []).ok
