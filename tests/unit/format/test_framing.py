"""Our TFRecord framing is read by TensorFlow, and our reader catches damage."""
from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pytest

from hypothesis import given
from hypothesis import strategies as st

from tfrecorder.errors import CorruptRecordError
from tfrecorder.format.framing import (WRITTEN_AS_IS, frame_records, read_records, write_record, write_record_crc,
                                        write_record_pieces)

RECORDS = [b"", b"a", b"x" * 70_000, bytes(range(256))]


def framed(records) -> bytes:
    stream = io.BytesIO()
    for record in records:
        write_record(stream, record)
    return stream.getvalue()


def test_tensorflow_reads_our_records(tf, tmp_path):
    path = tmp_path / "r.tfrecord"
    path.write_bytes(framed(RECORDS))
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(path))] == RECORDS


def test_we_read_tensorflow_records(tf, tmp_path):
    path = tmp_path / "tf.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in RECORDS:
            writer.write(record)
    assert list(read_records(io.BytesIO(path.read_bytes()))) == RECORDS


@given(st.lists(st.binary(max_size=300) | st.binary(min_size=WRITTEN_AS_IS, max_size=WRITTEN_AS_IS + 9), max_size=8))
def test_pieces_frame_as_their_concatenation(pieces):
    joined, separate = io.BytesIO(), io.BytesIO()
    assert write_record_pieces(separate, pieces) == write_record_crc(joined, b"".join(pieces))
    assert separate.getvalue() == joined.getvalue()


class _Writes(io.BytesIO):
    def __init__(self) -> None:
        super().__init__()
        self.written: list = []

    def write(self, data) -> int:
        self.written.append(data)
        return super().write(data)


def test_large_pieces_are_written_uncopied_and_small_runs_joined():
    image = bytes(range(256)) * 400
    pieces = [b"\x0a", b"\x80\x01", b"image", image, b"\x12", b"label", b"\x08\x03"]
    stream = _Writes()
    write_record_pieces(stream, pieces)
    assert any(data is image for data in stream.written)  # the image's own bytes object
    assert len(stream.written) == 5  # length + its CRC, the run before the image, the image, the rest, the CRC


def test_write_record_returns_framed_size():
    assert write_record(io.BytesIO(), b"12345") == 5 + 16


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda b: b[:-3], "truncated record"),
        (lambda b: b[:5], "truncated record header"),
        (lambda b: b[:20] + bytes([b[20] ^ 0xFF]) + b[21:], "data checksum mismatch"),
        (lambda b: bytes([b[0] ^ 0x01]) + b[1:], "length checksum mismatch"),
    ],
)
def test_damage_is_detected(damage, message):
    data = damage(framed([b"hello world" * 3, b"second"]))
    with pytest.raises(CorruptRecordError, match=message):
        list(read_records(io.BytesIO(data)))


@given(st.lists(st.binary(max_size=300), max_size=30), st.integers(0, 3), st.integers(0, 3))
def test_frame_records_frames_as_write_record(records, skip, leave):
    """Whole arrays and slices of them (a batch's run of one split) frame as write_record does."""
    chosen = records[min(skip, len(records)):max(len(records) - leave, min(skip, len(records)))]
    array = pa.array(records, pa.large_binary()).slice(min(skip, len(records)), len(chosen))
    framed, ends = frame_records(array)
    expected = io.BytesIO()
    for record in chosen:
        write_record(expected, record)
    assert bytes(framed) == expected.getvalue()
    assert list(ends) == list(np.cumsum([len(r) + 16 for r in chosen]))
    assert list(read_records(io.BytesIO(bytes(framed)))) == chosen
