"""tfrecorder.errors: one hierarchy for every exception raised on purpose, and pipeline-failure translation."""
from __future__ import annotations

import errno
import pickle

import pytest

from tfrecorder import errors


def test_the_hierarchy_separates_bad_input_infrastructure_and_corrupt_data():
    for bad_input in (errors.TableError, errors.RowError, errors.InvalidImage):
        assert issubclass(bad_input, errors.BadInputError) and issubclass(bad_input, ValueError)
    for failure in (errors.OutputWriteError, errors.StorageReadError):
        assert issubclass(failure, errors.InfrastructureError) and issubclass(failure, OSError)
        assert not issubclass(failure, ValueError)
    assert issubclass(errors.CorruptRecordError, errors.CorruptDataError)
    assert not issubclass(errors.CorruptDataError, ValueError)  # a damaged shard is not bad input
    assert issubclass(errors.DataflowJobError, RuntimeError)
    for name in ("BadInputError", "TableError", "RowError", "InvalidImage", "InfrastructureError", "OutputWriteError",
                 "StorageReadError", "CorruptDataError", "CorruptRecordError", "DataflowJobError"):
        assert issubclass(getattr(errors, name), errors.TFRecorderError), name


def test_old_import_locations_name_the_same_classes():
    from tfrecorder import images, result
    from tfrecorder.rows import row_encoding

    assert row_encoding.RowError is errors.RowError
    assert images.InvalidImage is errors.InvalidImage
    assert result.DataflowJobError is errors.DataflowJobError


def test_errors_survive_pickling_between_processes():
    corrupt = pickle.loads(pickle.dumps(errors.CorruptRecordError("data checksum mismatch", 42)))
    assert str(corrupt) == "data checksum mismatch at byte offset 42" and corrupt.offset == 42
    outage = pickle.loads(pickle.dumps(errors.StorageReadError(errno.EIO, "could not read gs://b/x.jpg")))
    assert (outage.errno, outage.strerror) == (errno.EIO, "could not read gs://b/x.jpg")


def test_translate_pipeline_error_finds_each_kind_in_the_chain():
    try:
        try:
            raise errors.TableError("no rows are assigned to TRAIN")
        except errors.TableError as inner:
            raise RuntimeError("pipeline failed") from inner
    except RuntimeError as outer:
        table = errors.translate_pipeline_error(outer, "out/")
    assert isinstance(table, errors.TableError) and str(table) == "no rows are assigned to TRAIN"
    beam_text = RuntimeError("StorageReadError: [Errno 5] could not read gs://b/x.jpg: gave up [while running 'Encode']")
    outage = errors.translate_pipeline_error(beam_text, "out/")
    assert isinstance(outage, errors.StorageReadError) and outage.errno == errno.EIO
    assert outage.strerror == "could not read gs://b/x.jpg: gave up; the conversion stopped and nothing was published"
    full = errors.translate_pipeline_error(OSError(errno.ENOSPC, "No space left on device"), "out/")
    assert isinstance(full, errors.OutputWriteError) and "no space left on device" in full.strerror
    other = KeyError("x")
    assert errors.translate_pipeline_error(other, "out/") is other


def test_record_and_index_damage_is_corrupt_data(tmp_path):
    import io

    from tfrecorder.format.record_index import index_array, scan_index
    from tfrecorder.format.framing import read_records, write_record

    stream = io.BytesIO()
    write_record(stream, b"payload")
    with pytest.raises(errors.CorruptRecordError, match="truncated record at byte offset 0"):
        list(read_records(io.BytesIO(stream.getvalue()[:-1])))
    with pytest.raises(errors.CorruptRecordError, match="truncated record header at byte offset 23"):
        list(scan_index(io.BytesIO(stream.getvalue() + b"\0\0")))
    with pytest.raises(errors.CorruptDataError, match="index line 1"):
        index_array(b"0 x\n")
