"""A job directory's files name nothing outside it: every reader (load, data_source, inspect, verify, the CLI,
TFRecorder 2.0 directories) refuses a shard or index path that is absolute, climbs out with `..`, or is a
symbolic link leading elsewhere, with CorruptDataError (CLI exit 3) before anything is opened."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tfrecorder
from support.jobbuilder import write_job
from tfrecorder.errors import CorruptDataError
from tfrecorder.format import job_directory
from tfrecorder.format.example_encoder import Feature

FEATURES = {"x": {"dtype": "int64", "shape": [], "allow_missing": False}}


def small_job(directory: Path, value: int) -> Path:
    """A one-shard job whose single record holds x=value (and its index file, as conversions write)."""
    job = write_job(directory, FEATURES, [{"x": Feature("int64", (value,))}], {"x": "IntegerInput"})
    shard = job / "train-00000-of-00001.tfrecord"
    (job / "index").mkdir()
    (job / "index" / (shard.name + ".index")).write_text(f"0 {shard.stat().st_size}\n")
    edit_shard_entry(job, index_file="index/train-00000-of-00001.tfrecord.index")
    return job


def edit_shard_entry(job: Path, **entry) -> None:
    metadata = json.loads((job / "metadata.json").read_text())
    metadata["splits"]["TRAIN"]["shards"][0].update(entry)
    (job / "metadata.json").write_text(json.dumps(metadata))


@pytest.fixture
def jobs(tmp_path) -> tuple[Path, Path]:
    """(our job, another job next to it whose shard a hostile metadata.json might point at)."""
    return small_job(tmp_path / "ours", 1), small_job(tmp_path / "theirs", 2)


def hostile_names(ours: Path, theirs: Path) -> list[str]:
    shard = theirs / "train-00000-of-00001.tfrecord"
    return [str(shard), os.path.relpath(shard, ours), "../" * 12 + "etc/passwd", "/etc/passwd", "./" + shard.name,
            "index//x.index", "gs://other-bucket/train-00000-of-00001.tfrecord", "a\\..\\..\\b"]


def read_with_every_reader(job: Path, tmp_path: Path) -> None:
    """Each reader in turn; each must raise before returning anything."""
    for read in (lambda: tfrecorder.data_source(str(job), "train")[0],
                 lambda: tfrecorder.verify(str(job)),
                 lambda: tfrecorder.inspect(str(job), "train", output_dir=str(tmp_path / "look")),
                 lambda: list(tfrecorder.load(str(job), "train"))):
        with pytest.raises(CorruptDataError, match="not a relative path inside the job directory|outside the job"):
            read()


def test_a_shard_path_outside_the_job_directory_is_refused_by_every_reader(jobs, tmp_path, tf):
    ours, theirs = jobs
    assert tfrecorder.data_source(str(ours), "train")[0]["x"] == 1
    for name in hostile_names(ours, theirs):
        edit_shard_entry(ours, file=name)
        read_with_every_reader(ours, tmp_path)


def test_an_index_path_outside_the_job_directory_is_refused(jobs, tmp_path, tf):
    ours, theirs = jobs
    for name in (str(theirs / "index" / "train-00000-of-00001.tfrecord.index"), "../theirs/index/x.index", "/dev/zero"):
        edit_shard_entry(ours, index_file=name)
        read_with_every_reader(ours, tmp_path)


def test_a_shard_that_is_a_symbolic_link_out_of_the_job_directory_is_refused(jobs, tmp_path, tf):
    ours, theirs = jobs
    shard = ours / "train-00000-of-00001.tfrecord"
    shard.unlink()
    shard.symlink_to(theirs / shard.name)
    read_with_every_reader(ours, tmp_path)


def test_links_inside_the_job_directory_and_a_linked_job_directory_are_fine(jobs, tmp_path):
    ours, _theirs = jobs
    (ours / "data").mkdir()
    shard = ours / "train-00000-of-00001.tfrecord"
    shutil.move(shard, ours / "data" / "blob")
    shard.symlink_to(Path("data") / "blob")
    (tmp_path / "latest").symlink_to(ours)
    assert tfrecorder.data_source(str(tmp_path / "latest"), "train")[0]["x"] == 1
    assert tfrecorder.verify(str(tmp_path / "latest")).ok


def test_the_cli_reports_a_hostile_job_directory_as_corrupt_data_on_one_line(jobs):
    ours, _theirs = jobs
    edit_shard_entry(ours, file="../" * 12 + "etc/passwd")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-m", "tfrecorder", "verify", str(ours)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "" and "passwd:" not in done.stderr  # nothing of the file was read or reported
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("tfrecorder: error: corrupt data: ") and "etc/passwd" in line


def test_a_tfrecorder2_shard_linked_from_outside_is_refused(legacy_job, tmp_path):
    legacy = Path(shutil.copytree(legacy_job, tmp_path / "legacy"))
    shard = next(legacy.glob("train-*.tfrecord.gz"))
    outside = tmp_path / "outside.gz"
    shutil.move(shard, outside)
    shard.symlink_to(outside)
    for read in (lambda: tfrecorder.verify(str(legacy)), lambda: tfrecorder.data_source(str(legacy), "train")):
        with pytest.raises(CorruptDataError, match="outside the job directory"):
            read()


def test_job_file_resolves_names_inside_the_directory_only(tmp_path):
    assert job_directory.job_file(str(tmp_path), "index/a.index") == str(tmp_path / "index" / "a.index")
    assert job_directory.job_file("gs://b/job", "index/a.index") == "gs://b/job/index/a.index"
    for name in ("", "/a", "a/", "a/../b", "..", ".", "C:a", "a\\b", "a\0b", None, ["a"], 3):
        with pytest.raises(CorruptDataError):
            job_directory.job_file(str(tmp_path), name)
    with pytest.raises(CorruptDataError):
        job_directory.job_file("gs://b/job", "../other-job/train-00000-of-00001.tfrecord")


def test_a_metadata_file_linked_from_outside_is_refused(jobs):
    ours, theirs = jobs
    (ours / "metadata.json").unlink()
    (ours / "metadata.json").symlink_to(theirs / "metadata.json")
    with pytest.raises(CorruptDataError, match="outside the job directory"):
        tfrecorder.data_source(str(ours), "train")


@pytest.mark.parametrize("metadata", ['{"splits": ', '{"splits": []}', '{"splits": {"TRAIN": {"shards": [{}]}}}',
                                      '{"splits": {"TRAIN": {"shards": "train.tfrecord"}}}'],
                         ids=["not-json", "splits-a-list", "shard-without-file", "shards-a-string"])
def test_a_metadata_json_that_lists_no_shards_is_corrupt_data(tmp_path, metadata):
    """A damaged metadata.json is a CorruptDataError (exit 3) naming it, before any reader opens a file."""
    job = small_job(tmp_path / "job", 1)
    (job / "metadata.json").write_text(metadata)
    with pytest.raises(CorruptDataError, match="metadata.json (is not valid JSON|does not list its splits' shards)"):
        tfrecorder.verify(str(job))
    with pytest.raises(CorruptDataError, match="metadata.json"):
        tfrecorder.data_source(str(job), "train")
