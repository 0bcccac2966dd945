"""runner="PortableRunner", offline: Beam's embedded job service runs the distributed graph (the one
Dataflow runs, with its reshuffles) on SDK workers in processes of their own, started with this very
interpreter (`beam:env:harness_subprocess_python:v1`). What they publish is what the in-process run
publishes, shard for shard and byte for byte, for every kind of job: images (both validate modes), a CSV
table, a Parquet file, a DataFrame (staged for the workers) and a detection table; and so do EXTERNAL
workers started by Beam's worker pool, the job submitted to Beam's job service, both servers of their own.
(A worker's table error and storage outage, raised as tfrecorder's own errors:
tests/behaviour/test_local_runs.py.)"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tfrecorder
from tfrecorder.sample_data import make_sample_dataset
from tfrecorder.format import file_names
from support.boxes import box_table
from support.portable import SUBPROCESS_WORKERS, job_service_and_worker_pool, published


@pytest.fixture(scope="module")
def image_csv(tmp_path_factory) -> Path:
    """40 sample images as a CSV, with rows discarded for a missing image and an unknown split."""
    path = make_sample_dataset(tmp_path_factory.mktemp("portable"), count=40)
    frame = pd.read_csv(path)
    frame.loc[3, "image_uri"] = "/no/such/image.jpg"
    frame.loc[17, "split"] = "HOLDOUT"
    frame.to_csv(path, index=False)
    return Path(path)


def run_both(source, tmp_path: Path, beam_options: dict = SUBPROCESS_WORKERS, shared_filesystem: bool = False,
             **options) -> tuple[dict, dict]:
    """What the in-process run and the portable run (`beam_options`) of the same job publish."""
    local = tfrecorder.convert(source, tmp_path / "local", job_label="same", progress=False, **options)
    portable = tfrecorder.convert(source, tmp_path / "portable", job_label="same", progress=False,
                                  runner="PortableRunner", beam_options=beam_options,
                                  shared_filesystem=shared_filesystem, **options)
    return (published(local["tfrecord_dir"], "DirectRunner"),
            published(portable["tfrecord_dir"], "PortableRunner"))


@pytest.mark.parametrize("validate", ["header", "decode"])
def test_an_image_job_on_portable_workers_publishes_what_the_in_process_run_does(image_csv, tmp_path, validate):
    local, portable = run_both(str(image_csv), tmp_path, validate=validate, num_shards=2)
    assert portable == local
    assert local["metadata"]["discarded"] == 2 and local["metadata"]["records_written"] == 38
    assert local["metadata"]["validate"] == validate


def table_csv(directory: Path) -> Path:
    """300 rows of ids, prices, names and every split."""
    source = directory / "table.csv"
    rows = [f"{i},{i * 0.5},name-{i % 7},{['TRAIN', 'VALIDATION', 'TEST'][i % 3]}" for i in range(300)]
    source.write_text("id,price,name,split\n" + "\n".join(rows) + "\n")
    return source


def test_a_tabular_csv_job_on_portable_workers_publishes_what_the_in_process_run_does(tmp_path):
    local, portable = run_both(str(table_csv(tmp_path)), tmp_path, max_shard_bytes=4_000)
    assert portable == local
    assert local["metadata"]["records_written"] == 300 and len(local["records"]["TRAIN"]) > 1



def structured_frame(n: int = 120) -> pd.DataFrame:
    """Ints with nulls, floats, strings, a list column, timestamps and splits of every kind: 88 rows kept,
    24 discarded for an unknown split and 8 more for a missing label."""
    return pd.DataFrame({
        "id": np.arange(n, dtype=np.int64),
        "count": pd.array([i * 3 if i % 5 else None for i in range(n)], dtype="Int64"),
        "price": np.linspace(-2, 7, n).astype(np.float32),
        "tags": [["a", "b, c", "ü"][: i % 4] for i in range(n)],
        "when": pd.to_datetime(np.arange(n) * 3_600_123_456_789 + 10**18, unit="ns", utc=True),
        "label": [None if i % 13 == 0 else ("cat", "dog", "fox")[i % 3] for i in range(n)],
        "split": [("TRAIN", "VALIDATION", "TEST", "TRAIN", "bogus")[i % 5] for i in range(n)],
    })


def test_a_parquet_job_on_portable_workers_publishes_what_the_in_process_run_does(tmp_path):
    source = tmp_path / "table.parquet"
    pq.write_table(pa.Table.from_pandas(structured_frame(), preserve_index=False), source, row_group_size=16)
    assert pq.ParquetFile(source).num_row_groups > 1
    local, portable = run_both(str(source), tmp_path, max_shard_bytes=4_000)
    assert portable == local
    assert local["metadata"]["records_written"] == 88 and local["metadata"]["discarded"] == 32
    assert len(local["records"]["TRAIN"]) > 1


def test_a_dataframe_job_on_portable_workers_publishes_what_the_in_process_run_does(tmp_path):
    local, portable = run_both(structured_frame(), tmp_path, max_shard_bytes=4_000)
    assert portable == local
    assert local["metadata"]["records_written"] == 88 and len(local["records"]["TRAIN"]) > 1
    left = list((tmp_path / "portable").iterdir())  # the frame staged for the workers is not left behind
    assert len(left) == 1 and left[0].name.startswith("same-")


def test_a_detection_job_on_portable_workers_publishes_what_the_in_process_run_does(photos, tmp_path):
    local, portable = run_both(box_table(photos), tmp_path)
    assert portable == local
    assert b"name: 'cat'" in local["other_files"][file_names.LABEL_MAP_FILE]
    assert local["metadata"]["records_written"] == 3 and local["metadata"]["discarded"] > 0


def test_a_job_service_and_worker_pool_of_their_own_publish_what_the_in_process_run_does(tmp_path):
    """Beam's job service and Beam's worker pool started as servers of their own (as on a cluster), the
    workers the pool starts with a TMPDIR of their own (their temporary files are not the driver's)."""
    services = tmp_path / "services"
    with job_service_and_worker_pool(services) as beam_options:
        local, portable = run_both(str(table_csv(tmp_path)), tmp_path, beam_options=beam_options,
                                   shared_filesystem=True, max_shard_bytes=4_000)
    assert portable == local
    assert b"Starting worker with command ['python'" in (services / "worker-pool.log").read_bytes()
    assert local["metadata"]["records_written"] == 300 and len(local["records"]["TRAIN"]) > 1
