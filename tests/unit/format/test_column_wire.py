"""tfrecorder.format.column_wire: whole columns serialise to exactly example_encoder's bytes."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tfrecorder.format import column_wire
from tfrecorder.format.example_encoder import Feature, encode_example, int64_feature, value_list_bytes

INT64 = st.integers(-(2**63), 2**63 - 1)


@given(st.lists(INT64, max_size=50))
def test_varints_match_the_row_encoder(values):
    flat, lengths = column_wire.varints(np.array(values, dtype=np.int64))
    expected = [encode_example({"x": int64_feature(v)}) for v in values]  # the varint is the record's tail
    assert [len(e) for e in expected] == [len(encode_example({"x": int64_feature(0)})) - 1 + n for n in lengths]
    ends = np.cumsum(lengths)
    for value, end, length, record in zip(values, ends, lengths, expected):
        assert bytes(flat[end - length:end]) == record[-length:], value


@pytest.mark.parametrize("bits", range(0, 64, 7))
def test_varints_of_every_length_match_the_row_encoder(bits):
    """Each length's first and last values (and negatives, ten bytes): the matrix is as wide as the longest."""
    edges = [max(2**bits - 1, 0), 2**bits, 2**bits + 1, 2**(bits + 7) - 1 if bits < 63 else 2**63 - 1, -(2**bits)]
    values = np.array([v for v in edges if -(2**63) <= v < 2**63], dtype=np.int64)
    matrix, lengths = column_wire.varint_matrix(values)
    assert matrix.shape == (len(values), int(lengths.max()))
    for row, value in enumerate(values.tolist()):
        assert bytes(matrix[row, :lengths[row]]) == encode_example({"x": int64_feature(value)})[-lengths[row]:], value
    small, widths = column_wire.varint_matrix(np.array([0, 5, 127], dtype=np.int64))
    assert small.shape[1] == 1 and widths.tolist() == [1, 1, 1] and small[:, 0].tolist() == [0, 5, 127]


@given(st.lists(st.tuples(st.binary(max_size=3), INT64, st.binary(max_size=12)), min_size=1, max_size=40))
def test_concat_parts_joins_each_row(rows):
    heads = np.zeros((len(rows), 3), dtype=np.uint8)
    for row, (head, _, _) in enumerate(rows):
        heads[row, :len(head)] = np.frombuffer(head, dtype=np.uint8)
    matrix, lengths = column_wire.varint_matrix(np.array([number for _, number, _ in rows], dtype=np.int64))
    joined, sizes = column_wire.concat_parts([(heads, np.array([len(head) for head, _, _ in rows])),
                                              column_wire.constant(b"\x0a\x0b", np.array([bool(tail) for *_, tail in rows])),
                                              (matrix, lengths)])
    expected = [head + (b"\x0a\x0b" if tail else b"") + bytes(matrix[row, :lengths[row]])
                for row, (head, _, tail) in enumerate(rows)]
    assert joined.to_pylist() == expected
    assert sizes.tolist() == [len(e) for e in expected]


def features(rows: list) -> dict:
    return {"a_bytes": Feature("bytes", rows[0]), "b_ints": Feature("int64", rows[1]), "c_floats": Feature("float", rows[2])}


ROWS = st.lists(st.tuples(st.lists(st.binary(max_size=20), max_size=3), st.lists(INT64, max_size=3),
                          st.lists(st.floats(width=32), max_size=3)), min_size=1, max_size=20)


@given(ROWS)
def test_records_of_value_lists_equal_encode_example(rows):
    entries, sizes = [], np.zeros(len(rows), dtype=np.int64)
    for column, (name, kind) in enumerate([("a_bytes", "bytes"), ("b_ints", "int64"), ("c_floats", "float")]):
        lists = pa.array([value_list_bytes(Feature(kind, row[column])) for row in rows], pa.large_binary())
        found, lengths = column_wire.map_entries(column_wire.entry_key(name), kind, column_wire.ValueLists.of_values(lists))
        entries.append(found)
        sizes += lengths
    assert column_wire.example_records(entries, sizes).to_pylist() == [encode_example(features(row)) for row in rows]


@given(st.lists(st.one_of(st.none(), INT64), min_size=1, max_size=30), st.sampled_from(["int64", "float"]))
def test_one_number_per_row_leaves_missing_rows_out(values, kind):
    present = np.array([v is not None for v in values])
    numbers = np.array([v or 0 for v in values], dtype=np.int64 if kind == "int64" else np.float64)
    found, sizes = column_wire.map_entries(column_wire.entry_key("n"), kind,
                                           column_wire.ValueLists.one_number(numbers, present, kind))
    records = column_wire.example_records([found], sizes).to_pylist()
    stored = [v if kind == "int64" or v is None else float(v) for v in values]
    assert records == [encode_example({} if v is None else {"n": Feature(kind, [v])}) for v in stored]


def test_a_single_empty_bytes_value_keeps_its_header():
    lists = column_wire.ValueLists.of_values(pa.array([b"", b"x", None], pa.large_binary()), packed=True, single=True)
    found, sizes = column_wire.map_entries(column_wire.entry_key("s"), "bytes", lists)
    assert column_wire.example_records([found], sizes).to_pylist() == [
        encode_example({"s": Feature("bytes", [b""])}), encode_example({"s": Feature("bytes", [b"x"])}), encode_example({})]


@given(st.lists(st.binary(max_size=200), max_size=20))
def test_bytes_list_entries_frame_each_value(values):
    entries = column_wire.bytes_list_entries(pa.array(values, pa.binary()))
    assert entries.to_pylist() == [value_list_bytes(Feature("bytes", [value])) for value in values]


@pytest.mark.parametrize("kind, rows", [
    ("float", [[1.5], [-2.0], [0.0]]),                     # one number: the same layout in every row
    ("float", [[1.0, 2.0, 3.0, 4.0]] * 2 + [[5.0, 6.0, 7.0, 8.0]]),  # a vector of a fixed length
    ("int64", [[300], [301], [16383]]),                    # varints all two bytes long
    ("int64", [[], [], []]),                               # empty lists: no packed field at all
    ("bytes", [[b"ab"], [b"cd"], [b"ef"]]),                # one value each, as long
    ("bytes", [[b""], [b""]]),                              # one empty value each: its header kept
])
def test_rows_of_one_layout_equal_encode_example(kind, rows):
    """Every row present with a tail of one length: the entry's head is made once (from the first row) and
    each row's record is still exactly the row encoder's."""
    if kind == "bytes":
        lists = column_wire.ValueLists.of_values(pa.array([row[0] for row in rows], pa.large_binary()), packed=True,
                                                 single=True)
    elif kind == "float":
        values = np.array(rows, dtype="<f4")
        lists = column_wire.ValueLists(np.ones(len(rows), dtype=bool), np.full(len(rows), 4 * values.shape[1]),
                                       values.view(np.uint8).reshape(len(rows), -1))
    else:
        lists = column_wire.ValueLists.of_values(
            pa.array([value_list_bytes(Feature("int64", row))[2:] if row else b"" for row in rows], pa.large_binary()),
            packed=True)
    found, sizes = column_wire.map_entries(column_wire.entry_key("v"), kind, lists)
    assert column_wire.example_records([found], sizes).to_pylist() == [
        encode_example({"v": Feature(kind, row)}) for row in rows]
