"""tf.train.Example wire bytes of whole columns at once (NumPy / Arrow): varints, value lists, map entries, records.

The column-wise twin of tfrecorder.format.example_encoder, sharing its tags and writing exactly its
bytes (features in sorted name order): tfrecorder.rows.columnar_encoder decides each row's values and
hands them here as `ValueLists`; `map_entries` frames each feature's entry per row and
`example_records` joins a row's entries into its record. No Python code runs per row.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tfrecorder.format.example_encoder import LIST_TAGS, TAG_1_LEN, TAG_2_LEN, varint

_EMPTY = pa.scalar(b"", pa.large_binary())


_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)  # from limit k on: k + 1 bytes
# per varint length, the continuation bits of its first (up to 8) bytes: all but its last byte
_CONTINUED = np.array([sum(0x80 << (8 * i) for i in range(min(n - 1, 8))) for n in range(11)], dtype=np.uint64)


def varint_matrix(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Protobuf varints of int64 values (negatives as 10-byte two's complement): a row of bytes per
    value (left-aligned, as wide as the longest) and each one's length.

    The first eight bytes are made at once: the value's first 56 bits spread from 7-bit groups to the
    bytes of a uint64 (three shift-and-mask steps), the continuation bits or-ed in by length, and its
    little-endian bytes are the row; the rare ninth and tenth bytes (values from 2**56, negatives) one
    column at a time."""
    unsigned = np.ascontiguousarray(values).astype(np.int64, copy=False).view(np.uint64)
    top = int(unsigned.max()) if len(unsigned) else 0
    width = 1 + int(np.count_nonzero(_VARINT_LIMITS <= top))
    lengths = np.ones(len(unsigned), dtype=np.int64)
    for limit in _VARINT_LIMITS[:width - 1]:
        lengths += unsigned >= limit
    if width == 1:
        return unsigned.astype(np.uint8).reshape(-1, 1), lengths
    spread = unsigned & np.uint64(0x00FFFFFFFFFFFFFF)
    spread = (spread & np.uint64(0x000000000FFFFFFF)) | ((spread & np.uint64(0x00FFFFFFF0000000)) << np.uint64(4))
    spread = (spread & np.uint64(0x00003FFF00003FFF)) | ((spread & np.uint64(0x0FFFC0000FFFC000)) << np.uint64(2))
    spread = (spread & np.uint64(0x007F007F007F007F)) | ((spread & np.uint64(0x3F803F803F803F80)) << np.uint64(1))
    spread |= _CONTINUED[lengths]
    first = spread.astype("<u8", copy=False).view(np.uint8).reshape(len(unsigned), 8)
    if width <= 8:
        return np.ascontiguousarray(first[:, :width]), lengths
    matrix = np.empty((len(unsigned), width), dtype=np.uint8)
    matrix[:, :8] = first
    for k in range(8, width):
        byte = ((unsigned >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        matrix[:, k] = byte | np.where(k < lengths - 1, 0x80, 0).astype(np.uint8)
    return matrix, lengths


def varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Protobuf varints of int64 values, back to back: (bytes, length of each)."""
    matrix, lengths = varint_matrix(values)
    return matrix[np.arange(matrix.shape[1]) < lengths[:, None]], lengths


def binary_rows(flat: np.ndarray, lengths: np.ndarray, present: Optional[np.ndarray] = None) -> pa.LargeBinaryArray:
    """Rows of `flat` bytes cut by `lengths`, as an Arrow array (null where not `present`)."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    validity = None
    nulls = 0
    if present is not None and not present.all():
        validity = pa.array(present, pa.bool_()).buffers()[1]
        nulls = int((~present).sum())
    return pa.Array.from_buffers(pa.large_binary(), len(lengths),
                                 [validity, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(flat))],
                                 null_count=nulls)


def concat_parts(parts: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[pa.LargeBinaryArray, np.ndarray]:
    """Row-wise concatenation of parts given as (matrix of left-aligned bytes per row, or one row for a
    constant; length per row): the rows as an Arrow array, and their lengths.

    When every part has one length in all rows, the parts' columns are the rows' bytes and are copied
    as one block. Otherwise (varints of several lengths, features some rows leave out) the parts are laid
    side by side in a matrix as wide as all of them and each row's used bytes are selected by a mask,
    which keeps rows in order (grouping rows by layout needed a sort and a take back to row order). The
    matrix and its mask are built a byte column at a time as contiguous rows of their transposes (a part
    of one length in every row masked by two fills), and read back row by row by the selection."""
    rows = len(parts[0][1])
    total = np.zeros(rows, dtype=np.int64)
    spans = []
    for _matrix, lengths in parts:
        total += lengths
        spans.append((int(lengths.min()), int(lengths.max())) if rows else (0, 0))
    if all(low == high for low, high in spans):
        widths = [low for low, _high in spans]
        columns = [np.broadcast_to(matrix[:, :width], (rows, width)) for (matrix, _lengths), width in zip(parts, widths)]
        flat = np.concatenate(columns, axis=1).reshape(-1) if columns else np.empty(0, dtype=np.uint8)
        return binary_rows(flat, total), total
    width = sum(matrix.shape[1] for matrix, _lengths in parts)
    laid, used = np.empty((width, rows), dtype=np.uint8), np.empty((width, rows), dtype=bool)
    at = 0
    for (matrix, lengths), (low, high) in zip(parts, spans):
        size = matrix.shape[1]
        laid[at:at + size] = matrix.T
        if low == high:
            used[at:at + low] = True
            used[at + low:at + size] = False
        else:
            for byte in range(size):
                np.greater(lengths, byte, out=used[at + byte])
        at += size
    return binary_rows(laid.T[used.T], total), total


def constant(data: bytes, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A `concat_parts` part: the same bytes in every `present` row, nothing elsewhere."""
    return np.frombuffer(data, dtype=np.uint8)[None, :], np.where(present, len(data), 0)


def bytes_list_entries(values: pa.Array) -> pa.LargeBinaryArray:
    """BytesList entries of bytes values: field 1, its length, the bytes (one entry per value)."""
    values = values.cast(pa.large_binary())
    lengths = pc.binary_length(values).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    matrix, prefix = varint_matrix(lengths)
    prefixes, _ = concat_parts([constant(TAG_1_LEN, np.ones(len(lengths), dtype=bool)), (matrix, prefix)])
    return pc.binary_join_element_wise(prefixes, values, _EMPTY)


def packed_numbers(values: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(packed bytes, length per value) of numbers written as `kind` ("float": float32, "int64": varints)."""
    if kind == "float":
        with np.errstate(over="ignore", invalid="ignore"):
            packed = values.astype("<f4").view(np.uint8)
        return packed, np.full(len(values), 4, dtype=np.int64)
    return varints(values)


@dataclasses.dataclass
class ValueLists:
    """One feature's value list per row (rows not `present` leave the feature out).

    `tail` is either a matrix of left-aligned bytes with `lengths` (fixed-layout numbers) or an Arrow
    array; `packed` says whether the tail is numbers packed into the list's field 1 (written after its
    tag and length, nothing for an empty list: `single` then says whether it is one bytes value that
    needs the same header), otherwise the tail is the whole value list.
    """

    present: np.ndarray
    lengths: np.ndarray
    tail: Any
    packed: bool = True
    single: bool = False

    @classmethod
    def of_values(cls, values: pa.Array, packed: bool = False, single: bool = False) -> "ValueLists":
        """Value lists whose tails are an Arrow array (null: the feature is left out)."""
        values = values.cast(pa.large_binary())
        present = values.is_valid().to_numpy(zero_copy_only=False)
        lengths = pc.binary_length(values).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        return cls(present, lengths, values, packed, single)

    @classmethod
    def one_number(cls, values: np.ndarray, present: np.ndarray, kind: str) -> "ValueLists":
        """One number per row (int64 values, or float64 written as float32), packed, as a byte matrix."""
        if kind == "float":
            with np.errstate(over="ignore", invalid="ignore"):
                matrix = values.astype("<f4").view(np.uint8).reshape(len(values), 4)
            return cls(present, np.full(len(values), 4, dtype=np.int64), matrix)
        matrix, lengths = varint_matrix(values)
        return cls(present, lengths, matrix)


def entry_key(name: str) -> bytes:
    """The start of a features-map entry of `name`, up to its value's tag: key field, length, name, value tag."""
    data = name.encode("utf-8")
    return TAG_1_LEN + varint(len(data)) + data + TAG_2_LEN


def map_entries(key: bytes, kind: str, found: ValueLists) -> tuple[pa.LargeBinaryArray, np.ndarray]:
    """Map entries `name → Feature{<list kind>: values}` (empty where the feature is left out) and their
    lengths; `key` is the feature's `entry_key`, `kind` its "bytes", "int64" or "float".

    When every row holds the feature with a tail of one length (a float, a vector of a fixed length, a
    batch of ids whose varints are all as long), everything before the tail is the same bytes in every
    row: they are made once, from the first row."""
    present, tail_sizes = found.present, found.lengths * found.present
    header = present & ((tail_sizes > 0) | found.single) if found.packed else None
    rows = len(present)
    if rows > 1 and present.all() and int(tail_sizes.min()) == int(tail_sizes.max()):
        first, _ = concat_parts(_entry_heads(key, kind, present[:1], tail_sizes[:1], None if header is None else header[:1]))
        parts = [constant(first[0].as_py(), present)]
    else:
        parts = _entry_heads(key, kind, present, tail_sizes, header)
    if isinstance(found.tail, np.ndarray):  # numbers of a fixed layout: the whole entry in one copy
        return concat_parts(parts + [(found.tail, tail_sizes)])
    prefixes, lengths = concat_parts(parts)
    entries = pc.binary_join_element_wise(prefixes, found.tail, _EMPTY, null_handling="replace", null_replacement="")
    return entries, lengths + tail_sizes


def _entry_heads(key: bytes, kind: str, present: np.ndarray, tail_sizes: np.ndarray,
                 header: Optional[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The `concat_parts` parts of each row's map entry before its tail (its key, the Feature's and the
    value list's tags and lengths; with `header`, field 1's tag and length around packed numbers)."""
    value_sizes = tail_sizes
    parts = []
    if header is not None:  # field 1 of the value list, holding the packed numbers (or the one value)
        tail_matrix, tail_prefix = varint_matrix(tail_sizes)
        value_sizes = np.where(header, 1 + tail_prefix + tail_sizes, 0)
        parts = [constant(TAG_1_LEN, header), (tail_matrix, tail_prefix * header)]
    value_matrix, value_prefix = varint_matrix(value_sizes)
    feature_sizes = 1 + value_prefix + value_sizes
    feature_matrix, feature_prefix = varint_matrix(feature_sizes)
    entry_matrix, entry_prefix = varint_matrix(len(key) + feature_prefix + feature_sizes)
    return [constant(TAG_1_LEN, present), (entry_matrix, entry_prefix * present),
            constant(key, present), (feature_matrix, feature_prefix * present),
            constant(LIST_TAGS[kind], present), (value_matrix, value_prefix * present)] + parts


def example_records(entries: Sequence[pa.Array], sizes: np.ndarray) -> pa.LargeBinaryArray:
    """Each row's Example: the Features message around its map entries (given in sorted feature name
    order, `sizes` their total length per row)."""
    matrix, prefix = varint_matrix(sizes)
    head, _ = concat_parts([constant(TAG_1_LEN, np.ones(len(sizes), dtype=bool)), (matrix, prefix)])
    return pc.binary_join_element_wise(head, *entries, _EMPTY)
