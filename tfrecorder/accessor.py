"""The pandas accessor: `df.tensorflow.to_tfrecord(output_dir, **options)` (TFRecorder 2.0's name: `to_tfr`)."""
from __future__ import annotations

from typing import Any

import pandas as pd

from tfrecorder.legacy.v2_compat import legacy_positional
from tfrecorder.convert import convert
from tfrecorder.result import ConversionResult


@pd.api.extensions.register_dataframe_accessor("tensorflow")
class TensorFlowAccessor:
    def __init__(self, frame: pd.DataFrame) -> None:
        self._frame = frame

    def to_tfrecord(self, output_dir: str, **options: Any) -> ConversionResult:
        """Convert this DataFrame to sharded TFRecords; options as for `tfrecorder.convert`."""
        return convert(self._frame, output_dir, **options)

    def to_tfr(self, output_dir: str, *args: Any, **options: Any) -> ConversionResult:
        """TFRecorder 2.0's name for `to_tfrecord`; its positional order after output_dir works too."""
        return self.to_tfrecord(output_dir, **legacy_positional(args, options))
