"""tfrecorder.round_trip: TFRecorder 2.0's convert_and_load()."""
from __future__ import annotations

import pandas as pd

import tfrecorder


def test_convert_and_load(data_csv, tmp_path):
    datasets = tfrecorder.convert_and_load(pd.read_csv(data_csv), str(tmp_path))
    assert set(datasets) == {'TRAIN', 'VALIDATION', 'TEST'}
    train = datasets['TRAIN']
    assert len(list(train)) == 7
