"""tfrecorder.legacy.v2_verify: verify() on directories written in TFRecorder 2.0's format."""
from __future__ import annotations

import gzip
import os
import subprocess
import sys

import tfrecorder
from support.tfrecorder2_writer import write_tfrecorder2_dir


def test_verify_checks_what_it_can_and_says_what_it_cannot(legacy_job, legacy_table):
    report = tfrecorder.verify(str(legacy_job))
    assert not report.ok  # the RGBA image: 4 bytes per pixel stored with image_channels=3
    assert [p for p in report.all_problems if "pixel data does not match" in p and "train-00000" in p]
    assert len(report.all_problems) == 1
    assert sum(s.records for s in report.shards) == len(legacy_table) - 2  # 2.0 discarded missing.jpg and UNASSIGNED
    assert any("record counts" in note for note in report.not_checked) and "not checked:" in str(report)
    assert "no count recorded" in str(report)


def test_verify_finds_damage(legacy_table, tmp_path):
    clean = legacy_table[~legacy_table.image_uri.str.contains("rgba")]
    legacy = write_tfrecorder2_dir(tmp_path / "a", clean, num_shards=2)
    assert tfrecorder.verify(str(legacy)).ok
    shard = legacy / "train-00001-of-00002.tfrecord.gz"
    records = gzip.decompress(shard.read_bytes())
    damaged = bytearray(records)
    damaged[40] ^= 0xFF
    shard.write_bytes(gzip.compress(bytes(damaged)))
    problems = tfrecorder.verify(str(legacy)).all_problems
    assert any("checksum mismatch" in p for p in problems)
    shard.write_bytes(gzip.compress(records)[:-30])
    assert any("broken gzip stream" in p for p in tfrecorder.verify(str(legacy)).all_problems)
    shard.unlink()
    problems = tfrecorder.verify(str(legacy)).all_problems
    assert any("missing shard numbers [1]" in p for p in problems)


def test_cli_verify_and_inspect_a_legacy_directory(legacy_job, tmp_path):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-m", "tfrecorder", "verify", str(legacy_job)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 3 and "pixel data does not match" in done.stdout and "not checked: record counts" in done.stdout
    done = subprocess.run([sys.executable, "-m", "tfrecorder", "inspect", f"--tfrecord-dir={legacy_job}", "--split=test",
                           f"--output_dir={tmp_path}"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert os.path.exists(tmp_path / "0000_image.png")
