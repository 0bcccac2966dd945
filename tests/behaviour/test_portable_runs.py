"""runner="PortableRunner", offline: Beam's embedded job service runs the distributed graph (the one
Dataflow runs, with its reshuffles) on SDK workers in processes of their own, started with this very
interpreter (`beam:env:harness_subprocess_python:v1`). What they publish is what the in-process run
publishes, shard for shard and byte for byte. (A worker's table error and storage outage, raised as
tfrecorder's own errors: tests/behaviour/test_local_runs.py.)"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import tfrecorder
from tfrecorder.sample_data import make_sample_dataset
from support.portable import SUBPROCESS_WORKERS
from support.replay import snapshot


def published(job: str, runner: str) -> dict:
    """A job's files, records and metadata, without what names the run (its name, time and `runner`)."""
    found = snapshot(job)
    assert found["metadata"].pop("runner") == runner
    return found


@pytest.fixture(scope="module")
def image_csv(tmp_path_factory) -> Path:
    """40 sample images as a CSV, with rows discarded for a missing image and an unknown split."""
    path = make_sample_dataset(tmp_path_factory.mktemp("portable"), count=40)
    frame = pd.read_csv(path)
    frame.loc[3, "image_uri"] = "/no/such/image.jpg"
    frame.loc[17, "split"] = "HOLDOUT"
    frame.to_csv(path, index=False)
    return Path(path)


def run_both(source, tmp_path: Path, **options) -> tuple[dict, dict]:
    local = tfrecorder.convert(source, tmp_path / "local", job_label="same", progress=False, **options)
    portable = tfrecorder.convert(source, tmp_path / "portable", job_label="same", progress=False,
                                  runner="PortableRunner", beam_options=SUBPROCESS_WORKERS, **options)
    return (published(local["tfrecord_dir"], "DirectRunner"),
            published(portable["tfrecord_dir"], "PortableRunner"))


def test_an_image_job_on_portable_workers_publishes_what_the_in_process_run_does(image_csv, tmp_path):
    local, portable = run_both(str(image_csv), tmp_path, validate="header", num_shards=2)
    assert portable == local
    assert local["metadata"]["discarded"] == 2 and local["metadata"]["records_written"] == 38


def test_a_tabular_csv_job_on_portable_workers_publishes_what_the_in_process_run_does(tmp_path):
    source = tmp_path / "table.csv"
    rows = [f"{i},{i * 0.5},name-{i % 7},{['TRAIN', 'VALIDATION', 'TEST'][i % 3]}" for i in range(300)]
    source.write_text("id,price,name,split\n" + "\n".join(rows) + "\n")
    local, portable = run_both(str(source), tmp_path, max_shard_bytes=4_000)
    assert portable == local
    assert local["metadata"]["records_written"] == 300 and len(local["records"]["TRAIN"]) > 1

