"""Deprecated import path of InvalidImage (docs/cli.md): import it from tfrecorder.errors."""
from tfrecorder.core.moved_names import moved

__getattr__ = moved(__name__, {"InvalidImage": "tfrecorder.errors"})
__all__ = ["InvalidImage"]
