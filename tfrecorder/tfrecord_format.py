"""Old import location of CorruptRecordError (docs/cli.md); TFRecord framing lives in tfrecorder.format.framing."""
from tfrecorder.errors import CorruptRecordError

__all__ = ["CorruptRecordError"]
