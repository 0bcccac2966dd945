"""The pandas accessor: `df.tensorflow.to_tfrecord(output_dir, **options)` (TFRecorder 2.0's name: `to_tfr`), and
`df.tensorflow.append_to(base_job_dir, **options)`: this DataFrame's rows as a new version of a job."""
from __future__ import annotations

from typing import Any

import pandas as pd

from tfrecorder.legacy.v2_compat import legacy_positional
from tfrecorder.append import append
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

    def append_to(self, base_job_dir: str, **options: Any) -> ConversionResult:
        """Append this DataFrame's rows to a finished job as a new version; options as for `tfrecorder.append`."""
        return append(base_job_dir, self._frame, **options)
