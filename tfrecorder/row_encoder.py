"""Deprecated import path of RowError (docs/cli.md): import it from tfrecorder.errors."""
from tfrecorder.core.moved_names import moved

__getattr__ = moved(__name__, {"RowError": "tfrecorder.errors"})
__all__ = ["RowError"]
