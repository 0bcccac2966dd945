"""Deprecated import path of CorruptRecordError (docs/cli.md): import it from tfrecorder.errors."""
from tfrecorder.core.moved_names import moved

__getattr__ = moved(__name__, {"CorruptRecordError": "tfrecorder.errors"})
__all__ = ["CorruptRecordError"]
