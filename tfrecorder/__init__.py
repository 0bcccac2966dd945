"""tfrecorder: turn a DataFrame, CSV or image folder into sharded TFRecords with Apache Beam.

    import tfrecorder
    result = df.tensorflow.to_tfrecord(output_dir="out/")
    datasets = tfrecorder.load(result["tfrecord_dir"], batch_size=64, image_size=(224, 224))
"""
from tfrecorder.core.version import __version__
from tfrecorder.core import types
from tfrecorder.core.schema import Schema  # noqa: E402
from tfrecorder.convert import convert  # noqa: E402
from tfrecorder.round_trip import convert_and_load  # noqa: E402
from tfrecorder.load import load  # noqa: E402
from tfrecorder.data_source import data_source  # noqa: E402
from tfrecorder.inspection import inspect  # noqa: E402
from tfrecorder.verify import verify  # noqa: E402
from tfrecorder.upgrade import upgrade  # noqa: E402
from tfrecorder.job_status import clean_incomplete, incomplete_jobs  # noqa: E402  (issue 27)
from tfrecorder.append import append, versions  # noqa: E402  (issue 28)
from tfrecorder.job_report import report  # noqa: E402  (statistics, duplicates and leaks as HTML: issue 29)
from tfrecorder.legacy import input_schema  # noqa: E402  (TFRecorder 2.0's `from tfrecorder import input_schema`)
from tfrecorder import accessor as _accessor  # noqa: E402,F401  (registers df.tensorflow)

__all__ = ["Schema", "append", "clean_incomplete", "convert", "convert_and_load", "data_source", "incomplete_jobs",
           "inspect", "load", "report", "types", "upgrade", "verify", "versions", "__version__"]
