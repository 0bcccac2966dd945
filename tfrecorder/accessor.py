"""The pandas accessor: `df.tensorflow.to_tfrecord(output_dir, **options)` (alias `to_tfr`)."""
from __future__ import annotations

from typing import Any

import pandas as pd

from tfrecorder.convert import convert
from tfrecorder.result import ConversionResult


@pd.api.extensions.register_dataframe_accessor("tensorflow")
class TensorFlowAccessor:
    def __init__(self, frame: pd.DataFrame) -> None:
        self._frame = frame

    def to_tfrecord(self, output_dir: str, **options: Any) -> ConversionResult:
        """Convert this DataFrame to sharded TFRecords; options as for `tfrecorder.convert`."""
        return convert(self._frame, output_dir, **options)

    to_tfr = to_tfrecord
