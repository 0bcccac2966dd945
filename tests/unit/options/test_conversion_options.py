"""tfrecorder.options.conversion_options: convert()'s options checked once into one frozen value."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from tfrecorder.options.conversion_options import ConvertOptions, OutputLocation, check_fetch_concurrency, normalise_output_dir

GOOD = dict(job_label=None, num_shards=0, max_shard_bytes=1 << 20, compression=None, image_size=[32, 48],
            validate="header", split_ratios=(0.8, 0.1, 0.1), fetch_concurrency=None, max_image_pixels=10_000,
            max_image_bytes=1 << 20, box_units="relative", annotation_format=None, encoding="utf-8", verbose=False,
            progress=False)


def test_output_dir_is_normalised_once_to_one_form(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert normalise_output_dir(Path("out/")) == os.path.join(str(tmp_path), "out")
    assert normalise_output_dir("gs://bucket/out/") == "gs://bucket/out"
    assert normalise_output_dir("") == ""


def test_checked_options_are_one_frozen_value(tmp_path):
    options = ConvertOptions.check(OutputLocation.of(tmp_path / "out"), **GOOD)
    assert options.image_size == (32, 48) and options.output_dir == str(tmp_path / "out")
    assert ConvertOptions.check(OutputLocation.of(tmp_path / "out"), **{**GOOD, "encoding": "Latin-1"}).encoding == "iso8859-1"
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.num_shards = 2


@pytest.mark.parametrize("change, message", [
    ({"num_shards": -1}, "num_shards must be"),
    ({"compression": "zip"}, "compression must be"),
    ({"image_size": (0, 3)}, "image_size must be"),
    ({"validate": "maybe"}, "validate must be"),
    ({"split_ratios": (0.5, 0.1)}, "split"),
    ({"box_units": "inches"}, "box_units must be"),
    ({"fetch_concurrency": True}, "fetch_concurrency must be"),
    ({"max_image_pixels": 0}, "max_image_pixels must be a positive integer"),
    ({"max_image_pixels": 1.5e8}, "max_image_pixels must be a positive integer"),
    ({"max_image_pixels": True}, "max_image_pixels must be a positive integer"),
    ({"max_image_bytes": 0}, "max_image_bytes must be an integer from 1 to 2,147,483,646"),
    ({"max_image_bytes": 1 << 31}, "max_image_bytes must be an integer from 1"),
    ({"max_image_pixels": 1000}, "image_size 32x48 is more than max_image_pixels=1,000"),
    ({"encoding": "klingon"}, "encoding 'klingon' is not a text encoding Python knows"),
    ({"encoding": "rot13"}, "encoding 'rot13' is not a text encoding"),
    ({"encoding": None}, "encoding must be the name of a text encoding"),
])
def test_a_bad_option_is_one_value_error_before_the_output_is_touched(tmp_path, change, message):
    target = tmp_path / "never-created"
    with pytest.raises(ValueError, match=message):
        ConvertOptions.check(OutputLocation.of(target), **{**GOOD, **change})
    assert not target.exists()


def test_output_dir_must_be_a_directory(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(ValueError, match=f"output_dir {path} cannot be a directory: {path} is a file"):
        ConvertOptions.check(OutputLocation.of(path), **GOOD)
    with pytest.raises(ValueError, match="must not be empty"):
        ConvertOptions.check(OutputLocation.of(""), **GOOD)
    assert check_fetch_concurrency(8) == 8 and check_fetch_concurrency(None) is None
