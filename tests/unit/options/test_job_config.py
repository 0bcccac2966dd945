"""tfrecorder.options.job_config: the plain, picklable description of a conversion that Beam ships to workers."""
from __future__ import annotations

import dataclasses
import os
import pickle

import pytest

from tfrecorder.options.job_config import JobConfig
from tfrecorder.core import types
from tfrecorder.core.schema import Schema
from tfrecorder.sources.csv_source import CsvRows


def config(temp_dir: str) -> JobConfig:
    return JobConfig(source=CsvRows("data.csv", 100, 10), schema=Schema({"image_uri": "ImageUri"}),
                     columns=("image_uri",), base_dir="", final_dir="out/job", temp_dir=temp_dir, job_name="job",
                     runner="DirectRunner", split_ratios=(0.8, 0.1, 0.1), num_shards=0, max_shard_bytes=1 << 20,
                     compression=None, image_size=None, validate="header")


def test_scratch_directories_live_under_the_temporary_directory():
    local = config(os.path.join("out", ".incomplete-job"))
    # part manifests first (nothing trusts pieces being removed); the fingerprint goes with publishing (issue 27)
    assert local.scratch_dirs == tuple(os.path.join("out", ".incomplete-job", name)
                                       for name in ("_parts", "_pieces", "_work", "_discards"))
    remote = config("gs://b/out/.incomplete-job")
    assert remote.pieces_dir == "gs://b/out/.incomplete-job/_pieces"
    assert remote.discards_dir == "gs://b/out/.incomplete-job/_discards"


def test_a_config_is_frozen_and_survives_pickling():
    original = config("tmp")
    with pytest.raises(dataclasses.FrozenInstanceError):
        original.num_shards = 3
    copy = pickle.loads(pickle.dumps(original))
    assert copy == original
    # The pipeline gets the Schema itself, not its JSON: its roles still compare as roles after the trip.
    assert isinstance(copy.schema, Schema) and copy.schema["image_uri"] == types.ImageUri
    assert copy.schema.image_columns == ["image_uri"]
