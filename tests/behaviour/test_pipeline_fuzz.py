"""Fuzz the whole pipeline with mutated JPEG/PNG files: no crash, every row accounted for,
and with validate="decode" every written image decodes with TensorFlow."""
from __future__ import annotations

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

import tfrecorder
from support.mutations import mutate, mutations, tf_decodes
from support.readers import read_job
from tfrecorder.sample_data import encode_image, photo_array

SOURCES = {
    "jpg": encode_image(Image.fromarray(photo_array(40, 56, 1)), "JPEG", quality=85),
    "progressive.jpg": encode_image(Image.fromarray(photo_array(40, 56, 2)), "JPEG", progressive=True),
    "png": encode_image(Image.fromarray(photo_array(40, 56, 3)), "PNG"),
}
FILES = 36


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(sorted(SOURCES)), mutations), min_size=FILES, max_size=FILES))
def test_mutated_images_through_the_pipeline(tf, tmp_path_factory, files):
    directory = tmp_path_factory.mktemp("fuzz")
    rows = []
    for i, (kind, changes) in enumerate(files):
        path = directory / f"{i}.{kind}"
        path.write_bytes(mutate(SOURCES[kind], changes))
        rows.append({"split": "TRAIN", "image_uri": str(path), "label": "x"})
    rows.append({"split": "TRAIN", "image_uri": str(directory / "0.jpg"), "label": "x"})  # TRAIN is never empty
    (directory / "0.jpg").write_bytes(SOURCES["jpg"])
    table = pd.DataFrame(rows)
    for validate in ("header", "decode"):
        result = tfrecorder.convert(table, directory / f"out-{validate}", validate=validate)
        assert result["rows_in"] == len(rows) == sum(result["written"].values()) + result["discarded"]
        for example in read_job(result["tfrecord_dir"]).get("TRAIN", []):
            if validate == "decode" or example["image_format"] == b"png":
                assert tf_decodes(tf, example["image"]), example["image_uri"]
