"""TFRecorder 2.0's `convert_and_load()`: convert, then load the job's datasets in one call."""
from __future__ import annotations

from typing import Any

from tfrecorder.convert import convert
from tfrecorder.load import load


def convert_and_load(*args: Any, **kwargs: Any):
    """`convert(*args, **kwargs)`, then `load()` its job directory: the `TRAIN`/`VALIDATION`/`TEST` datasets.

    A Dataflow conversion is waited for first.
    """
    result = convert(*args, **kwargs)
    if hasattr(result, "wait"):
        result.wait()
    return load(result["tfrecord_dir"])
