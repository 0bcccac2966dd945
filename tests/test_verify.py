"""tfrecorder.verify on intact and deliberately damaged copies of a converted job."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from support import jobbuilder
import tfrecorder
from tfrecorder.format.example_encoder import encode_example, float_feature, int64_feature
from tfrecorder.format.framing import write_record


@pytest.fixture
def job_copy(converted, tmp_path) -> Path:
    """A private copy of the shared converted job, free to damage."""
    return Path(shutil.copytree(converted["tfrecord_dir"], tmp_path / "job"))


def shards(job: Path) -> list[Path]:
    metadata = json.loads((job / "metadata.json").read_text())
    return [job / s["file"] for info in metadata["splits"].values() for s in info["shards"]]


def largest_shard(job: Path) -> Path:
    return max(shards(job), key=lambda p: p.stat().st_size)


def test_intact_job_passes(job_copy):
    report = tfrecorder.verify(str(job_copy))
    assert report.ok, report
    assert sorted(s.file for s in report.shards) == sorted(p.name for p in shards(job_copy))
    assert all(s.records == s.expected_records for s in report.shards)
    assert "OK" in repr(report) and not report.all_problems


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


def test_missing_shard(job_copy):
    shard = largest_shard(job_copy)
    shard.unlink()
    report = tfrecorder.verify(str(job_copy))
    assert not report.ok
    assert [p for s in report.shards for p in s.problems if "missing shard file" in p]
    assert any("readable records, metadata.json says" in p for p in report.problems)  # the split total


def test_extra_shard(job_copy):
    shard = largest_shard(job_copy)
    extra = job_copy / shard.name.replace("-00000-", "-00007-")
    shutil.copy(shard, extra)
    report = tfrecorder.verify(str(job_copy))
    assert not report.ok
    (bad,) = [s for s in report.shards if not s.ok]
    assert bad.file == extra.name and bad.split is None and "not listed in metadata.json" in bad.problems[0]


def test_other_files_are_not_shards(job_copy):
    (job_copy / "notes.txt").write_text("hello")
    assert tfrecorder.verify(str(job_copy)).ok


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


def test_not_a_job_directory(tmp_path):
    with pytest.raises(ValueError, match="not a finished tfrecorder job directory"):
        tfrecorder.verify(str(tmp_path))


def index_of(job: Path, shard: Path) -> Path:
    return job / "index" / (shard.name + ".index")


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


def test_missing_and_unlisted_index_files(job_copy):
    shard = largest_shard(job_copy)
    index = index_of(job_copy, shard)
    index.rename(job_copy / "index" / "stray-00000-of-00001.tfrecord.index")
    report = tfrecorder.verify(str(job_copy))
    problems = report.all_problems
    assert any(f"index file index/{shard.name}.index is missing" in p for p in problems), problems
    assert any("index file not listed in metadata.json" in p for p in problems), problems
