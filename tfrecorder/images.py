"""Old import location of InvalidImage (docs/cli.md); image probing lives in tfrecorder.io.images."""
from tfrecorder.errors import InvalidImage

__all__ = ["InvalidImage"]
