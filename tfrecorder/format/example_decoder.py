"""Parse serialised tf.train.Example bytes into {name: [values]} without TensorFlow.

Used where a few records are looked at (inspect, the notebook view of a result): importing
TensorFlow only to read a handful of protos would cost seconds.
"""
from __future__ import annotations

import struct
from typing import Union

Value = Union[bytes, int, float]


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """A protobuf varint at `pos`: (its value, the position after it). One byte for tags and short lengths."""
    byte = data[pos]
    if byte < 0x80:
        return byte, pos + 1
    result, shift = 0, 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes):
    """Yield (field number, wire type, value) of a message; length-delimited values as bytes."""
    pos = 0
    while pos < len(data):
        key, pos = read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(data, pos)
        elif wire == 2:
            length, pos = read_varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield number, wire, value


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _feature_values(feature: bytes) -> list[Value]:
    for kind, _wire, body in _fields(feature):
        values: list[Value] = []
        for _number, wire, item in _fields(body):
            if kind == 1:
                values.append(item)
            elif kind == 2:  # packed (wire 2) or single (wire 5) float32
                values.extend(struct.unpack(f"<{len(item) // 4}f", item) if wire == 2 else struct.unpack("<f", item))
            elif wire == 2:  # packed int64 varints
                pos = 0
                while pos < len(item):
                    number, pos = read_varint(item, pos)
                    values.append(_signed(number))
            else:
                values.append(_signed(item))
        return values
    return []


def parse_example(record: bytes) -> dict[str, list[Value]]:
    """A serialised tf.train.Example as feature name → list of values (bytes, int or float)."""
    parsed: dict[str, list[Value]] = {}
    for number, _wire, features in _fields(record):
        if number != 1:
            continue
        for _entry_number, _w, entry in _fields(features):
            name, values = "", []
            for field, _ww, value in _fields(entry):
                if field == 1:
                    name = value.decode("utf-8")
                elif field == 2:
                    values = _feature_values(value)
            parsed[name] = values
    return parsed
