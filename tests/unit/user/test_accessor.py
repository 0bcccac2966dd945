"""tfrecorder.accessor: DataFrame.tensorflow.to_tfrecord and TFRecorder 2.0's to_tfr."""
from __future__ import annotations

import os

import pandas as pd

import tfrecorder
from tfrecorder.legacy import input_schema


def test_accessor_and_alias(tmp_path, image_table):
    frame = image_table[image_table.image_uri.str.endswith("rgb.jpg")]
    first = frame.tensorflow.to_tfrecord(output_dir=str(tmp_path / "out"), job_label="acc")
    second = frame.tensorflow.to_tfr(str(tmp_path / "out"), job_label="acc")
    assert first["tfrecord_dir"] != second["tfrecord_dir"]
    assert first["written"] == second["written"] == {"TRAIN": 1}


def test_to_tfr_with_every_documented_keyword(data_csv, tmp_path):
    df = pd.read_csv(data_csv)
    results = df.tensorflow.to_tfr(
        output_dir=str(tmp_path),
        schema=input_schema.IMAGE_CSV_SCHEMA,
        runner='DirectRunner',
        project=None,
        region=None,
        tfrecorder_wheel=None,
        dataflow_options=None,
        job_label='to-tfr',
        compression='gzip',
        num_shards=2)
    files = sorted(os.listdir(results['tfrecord_dir']))
    assert 'train-00000-of-00002.tfrecord.gz' in files and 'train-00001-of-00002.tfrecord.gz' in files
    assert tfrecorder.verify(results['tfrecord_dir']).ok
