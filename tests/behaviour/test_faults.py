"""Faults: killed conversions, reruns, concurrent runs and a full disk never leave finished-looking output.

Each conversion runs the real CLI in a subprocess. Kill points are observed on disk (the temporary
job directory appearing, the first piece file, the first final shard, the discard file), not timed.
"""
from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tfrecorder.sample_data import make_sample_dataset

ROWS = 240


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return make_sample_dataset(tmp_path_factory.mktemp("faults"), count=ROWS, size=(240, 320))


def cli(csv_path: Path, output_dir: Path, **popen_kwargs) -> subprocess.Popen:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": os.getcwd()}
    return subprocess.Popen(
        [sys.executable, "-m", "tfrecorder", "convert", "--source", str(csv_path), "--output_dir", str(output_dir),
         "--job_label", "faults", "--max_shard_bytes", "400000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **popen_kwargs,
    )


def temp_dirs(output_dir: Path) -> list[Path]:
    return [p for p in output_dir.glob(".incomplete-*") if p.is_dir()] if output_dir.exists() else []


KILL_POINTS = {
    "temp directory created": lambda out: bool(temp_dirs(out)),
    "first piece written": lambda out: any(any((t / "_pieces").glob("*.part")) for t in temp_dirs(out)),
    "first shard assembled": lambda out: any(any(t.glob("*.tfrecord")) for t in temp_dirs(out)),
    "discard file written": lambda out: any((t / "discarded.csv").exists() for t in temp_dirs(out)),
}


def finished_jobs(output_dir: Path) -> list[Path]:
    return sorted(p for p in output_dir.iterdir() if not p.name.startswith("."))


def assert_complete(job: Path) -> None:
    """A visible job directory must be whole: metadata.json present and every shard intact."""
    import tfrecorder.format.framing as framing

    metadata = json.loads((job / "metadata.json").read_text())
    for info in metadata["splits"].values():
        for shard in info["shards"]:
            with open(job / shard["file"], "rb") as stream:
                assert sum(1 for _ in framing.read_records(stream)) == shard["records"]
    assert metadata["rows_in"] == metadata["records_written"] + metadata["discarded"] == ROWS


def tree_digest(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def test_kill_at_any_point_leaves_nothing_finished_looking_and_rerun_succeeds(dataset, tmp_path):
    output_dir = tmp_path / "out"
    killed_mid_run = 0
    for name, reached in KILL_POINTS.items():
        before = {job.name: tree_digest(job) for job in finished_jobs(output_dir)} if output_dir.exists() else {}
        process = cli(dataset, output_dir)
        deadline = time.monotonic() + 120
        while process.poll() is None and not reached(output_dir) and time.monotonic() < deadline:
            time.sleep(0.002)
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            killed_mid_run += 1
        process.wait()
        for job in finished_jobs(output_dir):
            assert_complete(job)
        for job_name, digest in before.items():  # earlier output untouched
            assert tree_digest(output_dir / job_name) == digest, name
    assert killed_mid_run >= 3

    rerun = cli(dataset, output_dir)
    _out, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    jobs = finished_jobs(output_dir)
    assert jobs, "the rerun published nothing"
    for job in jobs:
        assert_complete(job)


def test_two_conversions_into_one_directory_at_once(dataset, tmp_path):
    output_dir = tmp_path / "out"
    processes = [cli(dataset, output_dir) for _ in range(2)]
    for process in processes:
        _out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
    jobs = finished_jobs(output_dir)
    assert len(jobs) == 2 and jobs[0] != jobs[1]
    for job in jobs:
        assert_complete(job)
    assert temp_dirs(output_dir) == []


def _limit_file_size():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # make the write fail with EFBIG instead of killing us
    resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))


def test_full_disk_is_a_clear_error_with_nothing_published(dataset, tmp_path):
    output_dir = tmp_path / "out"
    process = cli(dataset, output_dir, preexec_fn=_limit_file_size)
    _out, err = process.communicate(timeout=300)
    assert process.returncode == 4
    assert err.strip().splitlines() == [
        f"tfrecorder: error: could not write the output under {output_dir}: file size limit exceeded; "
        "the conversion stopped and nothing was published"]
    assert list(output_dir.iterdir()) == []
