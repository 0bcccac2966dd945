"""tfrecorder.tfrecord_format: the old import location of CorruptRecordError (docs/cli.md) still works."""
from __future__ import annotations

from tfrecorder import errors


def test_the_old_location_names_the_same_class():
    from tfrecorder import tfrecord_format

    assert tfrecord_format.CorruptRecordError is errors.CorruptRecordError
    assert tfrecord_format.__all__ == ["CorruptRecordError"]
