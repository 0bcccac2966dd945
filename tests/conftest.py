"""Shared fixtures: real image files of many kinds, and conversions reused across test modules.

Conversions run Beam pipelines, so each distinct conversion is made once per session.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from support import imagegen  # noqa: E402


@pytest.fixture(scope="session")
def tf():
    import tensorflow

    return tensorflow


@pytest.fixture(scope="session")
def image_files(tmp_path_factory) -> dict[str, Path]:
    """Odd and broken image files, plus odd file names, all written to one folder."""
    directory = tmp_path_factory.mktemp("images")
    files = {name: data for name, (data, _fmt, _ch) in imagegen.odd_images().items()}
    files.update({name: data for name, (data, _reason) in imagegen.broken_images().items()})
    rgb = imagegen.odd_images()["rgb.jpg"][0]
    files["ünïcødé name.jpg"] = rgb
    files["comma, space.jpg"] = rgb
    paths = imagegen.write_files(directory, files)
    (directory / "a_directory.jpg").mkdir()
    paths["a_directory.jpg"] = directory / "a_directory.jpg"
    paths["missing.jpg"] = directory / "missing.jpg"
    return paths


@pytest.fixture(scope="session")
def image_table(image_files) -> pd.DataFrame:
    """One row per file in `image_files`, alternating labels, explicit splits cycling over all three."""
    rows = []
    for i, (name, path) in enumerate(sorted(image_files.items())):
        rows.append({"split": ("TRAIN", "train", "VALIDATION", "TRAIN", "test")[i % 5],
                     "image_uri": str(path), "label": ("cat", "dog", "fox")[i % 3]})
    return pd.DataFrame(rows)


@pytest.fixture(scope="session")
def converted(image_table, tmp_path_factory):
    """The image table converted with default options (DataFrame source), reused by many tests."""
    import tfrecorder

    return tfrecorder.convert(image_table, tmp_path_factory.mktemp("out"))


@pytest.fixture
def job_copy(converted, tmp_path) -> Path:
    """A private copy of the shared converted job, free to damage."""
    return Path(shutil.copytree(converted["tfrecord_dir"], tmp_path / "job"))


@pytest.fixture(scope="session")
def gcs():
    """A real GCS emulator on loopback (STORAGE_EMULATOR_HOST points at it) for the whole session."""
    from support.gcs_emulator import start_emulator

    emulator = start_emulator()
    yield emulator
    emulator.stop()


@pytest.fixture
def proxy(gcs, monkeypatch):
    """A fault-injecting proxy in front of the emulator; tfrecorder talks to the proxy."""
    from support.gcs_proxy import FaultProxy

    fault_proxy = FaultProxy(gcs.host, delay_seconds=0.01).start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", fault_proxy.url)
    yield fault_proxy
    fault_proxy.stop()


@pytest.fixture(scope="session")
def data_csv(tmp_path_factory) -> Path:
    """TFRecorder 2.0's tfrecorder/test_data/data.csv shape: split,image_uri,label with readable images only."""
    from support.tfrecorder2_writer import sample_image_table

    directory = tmp_path_factory.mktemp("test_data")
    table = sample_image_table(directory / "images")
    table = table[table.split.isin(["TRAIN", "VALIDATION", "TEST"]) & ~table.image_uri.str.contains("missing|rgba")]
    table.to_csv(directory / "data.csv", index=False)
    return directory / "data.csv"


@pytest.fixture(scope="session")
def photos(tmp_path_factory) -> dict[str, Path]:
    """Images of known sizes for detection jobs (support/boxes.py): a.jpg 40x60 (h x w), b.png 50x80, …"""
    from support.boxes import write_photos

    return write_photos(tmp_path_factory.mktemp("photos"))


@pytest.fixture(scope="session")
def detection_job(photos, tmp_path_factory):
    """The box table of support/boxes.py converted once: a detection job with every kind of box discard."""
    import tfrecorder
    from support.boxes import box_table

    return tfrecorder.convert(box_table(photos), tmp_path_factory.mktemp("det"), progress=False)


@pytest.fixture(scope="session")
def legacy_table(tmp_path_factory) -> pd.DataFrame:
    """support/tfrecorder2_writer.py's sample image table (odd images, every split, a missing file)."""
    from support.tfrecorder2_writer import sample_image_table

    return sample_image_table(tmp_path_factory.mktemp("legacy_images"))


@pytest.fixture(scope="session")
def legacy_job(legacy_table, tmp_path_factory) -> Path:
    """`legacy_table` written as TFRecorder 2.0 wrote it (gzip shards); read-only: copy it to damage it."""
    from support.tfrecorder2_writer import write_tfrecorder2_dir

    return write_tfrecorder2_dir(tmp_path_factory.mktemp("legacy"), legacy_table)
