"""The verify / inspect / load-stats subcommands, run as real subprocesses on the shared converted job."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from support.cli_runs import WITHOUT_TENSORFLOW, run


def test_verify_exit_codes(converted, tmp_path):
    job = Path(shutil.copytree(converted["tfrecord_dir"], tmp_path / "job"))
    done = run("verify", str(job))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # TensorFlow (used to parse records) starts without a line of its own
    assert "OK" in done.stdout.splitlines()[0]
    metadata = json.loads((job / "metadata.json").read_text())
    (job / metadata["splits"]["TEST"]["shards"][0]["file"]).unlink()
    done = run("verify", str(job))
    assert done.returncode == 3 and "FAILED" in done.stdout and "missing shard file" in done.stdout
    done = run("verify", str(tmp_path))
    assert done.returncode == 2 and "not a finished tfrecorder job directory" in done.stderr


def test_a_corrupt_shard_is_corrupt_data_not_bad_input(converted, tmp_path):
    """inspect or load-stats meeting a damaged record exits 3 (corrupt data, as verify), never 2 (bad input)."""
    job = Path(shutil.copytree(converted["tfrecord_dir"], tmp_path / "job"))
    shard = job / json.loads((job / "metadata.json").read_text())["splits"]["TRAIN"]["shards"][0]["file"]
    data = bytearray(shard.read_bytes())
    data[20] ^= 0xFF  # inside the first record's data: its data checksum no longer matches
    shard.write_bytes(bytes(data))
    done = run("inspect", str(job), "--output_dir", str(tmp_path / "look"), entry=("-c", WITHOUT_TENSORFLOW))
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip().count("\n") == 0
    assert "corrupt data: data checksum mismatch at byte offset 0" in done.stderr
    assert run("verify", str(job)).returncode == 3
    done = run("load-stats", str(job), "--seconds", "1")  # TensorFlow's DataLossError, reported the same way
    assert done.returncode == 3, done.stderr  # TensorFlow's own C++ warning about the data loss may precede our line
    assert done.stderr.strip().splitlines()[-1].startswith("tfrecorder: error: corrupt data: TRAIN: corrupted record")


def test_inspect_and_load_stats(converted, tmp_path):
    done = run("inspect", converted["tfrecord_dir"], "--split", "validation", "--num_records", "2",
               "--output_dir", str(tmp_path / "look"), entry=("-c", WITHOUT_TENSORFLOW))
    assert done.returncode == 0, done.stderr  # 99: inspect imported TensorFlow
    assert done.stderr == "" and done.stdout.strip() == str(tmp_path / "look")
    assert (tmp_path / "look" / "records.csv").exists() and (tmp_path / "look" / "contact_sheet.png").exists()
    done = run("load-stats", converted["tfrecord_dir"], "--seconds", "1", "--batch_size", "4", "--image_size", "16x16",
               "--channels", "3")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    metadata = json.loads((Path(converted["tfrecord_dir"]) / "metadata.json").read_text())
    for split, info in metadata["splits"].items():
        assert f"{split}: {info['records']} records loaded (metadata.json: {info['records']})" in done.stdout
    assert "records/s" in done.stdout


def test_help_documents_exit_codes():
    done = run("--help")
    assert done.returncode == 0 and "3 verify found a mismatch\n  or a record is corrupt" in done.stdout
    for command in ("verify", "inspect", "load-stats"):
        assert command in done.stdout
