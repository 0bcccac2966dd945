"""Path arguments: `~` is the home directory in every one of them (API and CLI, also where no shell
expands it, as in `--output_dir=~/out`), and a name longer than a file system allows is one ValueError
before any work starts (CLI: one line, exit 2) rather than an OSError from the middle of a job."""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

import tfrecorder
from support.tfrecorder2_writer import sample_image_table, write_tfrecorder2_dir
from tfrecorder import cli

LONG_NAME = "x" * 256  # one byte over the file systems' limit


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """HOME is an empty folder, and so is the working directory (where a literal `~` would land)."""
    (tmp_path / "home").mkdir()
    (tmp_path / "cwd").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path / "cwd")
    return tmp_path / "home"


@pytest.fixture
def table(home, image_files) -> Path:
    with open(home / "table.csv", "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["split", "image_uri", "label"])
        writer.writerows([split, image_files["rgb.jpg"], "ab"[i % 2]] for i, split in enumerate(["TRAIN", "TEST"] * 3))
    return home / "table.csv"


def test_a_tilde_is_the_home_directory_in_every_path_argument(home, table, image_files, capsys):
    (home / "schema.json").write_text(json.dumps({"split": "SplitKey", "image_uri": "ImageUri", "label": "StringLabel"}))
    assert cli.main(["convert", "--source=~/table.csv", "--output_dir=~/out", "--schema=~/schema.json",
                     "--validate", "header", "--no_progress"]) == 0
    (job,) = (home / "out").iterdir()
    job_dir = f"~/out/{job.name}"
    assert cli.main(["verify", job_dir]) == 0
    assert sum(1 for _ in tfrecorder.load(job_dir, "TRAIN")) == 3
    assert len(tfrecorder.data_source(job_dir, "TEST")) == 3
    assert Path(tfrecorder.inspect(job_dir, output_dir="~/look")) == home / "look"
    assert (home / "look" / "records.csv").exists()
    write_tfrecorder2_dir(home / "legacy", sample_image_table(home / "legacy-images"), compression=None)
    (legacy,) = (home / "legacy").iterdir()
    upgraded = tfrecorder.upgrade(f"~/legacy/{legacy.name}", "~/upgraded")
    assert Path(upgraded["tfrecord_dir"]).parent == home / "upgraded"
    assert os.listdir(".") == []  # no literal "~" folder in the working directory


@pytest.mark.parametrize("call", [
    lambda tmp, table: tfrecorder.convert(str(table), tmp / LONG_NAME, progress=False),
    lambda tmp, table: tfrecorder.convert(str(tmp / LONG_NAME / "table.csv"), tmp / "out", progress=False),
    lambda tmp, table: tfrecorder.load(tmp / LONG_NAME),
    lambda tmp, table: tfrecorder.data_source(tmp / LONG_NAME, "TRAIN"),
    lambda tmp, table: tfrecorder.verify(tmp / LONG_NAME),
    lambda tmp, table: tfrecorder.inspect(tmp / LONG_NAME),
    lambda tmp, table: tfrecorder.upgrade(tmp / LONG_NAME, tmp / "out"),
    lambda tmp, table: tfrecorder.upgrade(tmp / "legacy", tmp / "out" / LONG_NAME),
], ids=["convert-output_dir", "convert-source", "load", "data_source", "verify", "inspect", "upgrade-legacy_dir",
        "upgrade-output_dir"])
def test_a_name_too_long_for_the_file_system_is_one_value_error_before_work_starts(call, tmp_path, table):
    with pytest.raises(ValueError, match="the name x+… is 256 bytes long; .* limited to 255 bytes"):
        call(tmp_path, table)
    assert not (tmp_path / "out").exists()


def test_the_cli_reports_a_name_too_long_on_one_line(tmp_path, table, capsys):
    assert cli.main(["convert", "--source", str(table), "--output_dir", str(tmp_path / LONG_NAME)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("tfrecorder: error: output_dir: the name x") and "limited to 255 bytes" in line
