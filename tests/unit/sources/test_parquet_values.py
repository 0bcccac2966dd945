"""tfrecorder.sources.parquet_values: a Parquet file's Arrow columns conformed to the types a staged DataFrame
has, so that both give the encoders the same values."""
from __future__ import annotations

import datetime as dt
import io

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from tfrecorder.sources import dataframe_staging
from tfrecorder.core import types
from tfrecorder.sources.parquet_values import conform_batch, conform_column
from tfrecorder.errors import RowError
from tfrecorder.rows.value_coercion import to_epoch_ns
from tfrecorder.core.schema import infer_schema


def staged_rows(frame: pd.DataFrame, schema) -> list[dict]:
    stream = io.BytesIO()
    dataframe_staging.write_staged(frame, schema, stream)
    return pa.ipc.open_file(io.BytesIO(stream.getvalue())).read_all().to_pylist()


def conformed_rows(frame: pd.DataFrame, schema, arrow: pa.Table = None) -> list[dict]:
    table = arrow if arrow is not None else pa.Table.from_pandas(frame, preserve_index=False)
    return [row for batch in table.to_batches() for row in conform_batch(batch, schema).to_pylist()]


def test_a_frame_written_by_pyarrow_conforms_to_exactly_what_staging_writes():
    n = 12
    frame = pd.DataFrame({
        "split": ["TRAIN", "TEST", None] * 4,
        "i8": np.arange(n, dtype=np.int8), "nullable": pd.array([1, None] * 6, dtype="Int32"),
        "flag": [True, False] * 6, "f32": np.linspace(0, 1, n, dtype=np.float32),
        "aware": pd.date_range("2024-03-01", periods=n, freq="37min", tz="America/St_Johns"),
        "naive": pd.date_range("1999-12-31 23:00", periods=n, freq="h").as_unit("us"),
        "vector": [np.array([i, 2.5]) for i in range(n)], "ints": [[True, False][: i % 3] for i in range(n)],
        "words": [["x", "ü"][: i % 3] for i in range(n)], "colour": pd.Categorical(["a", "b", None] * 4),
        "label": pd.Categorical([1, 2, 3] * 4), "tags": [["p", "q"]] * n,
    })
    schema = infer_schema(frame)
    schema = type(schema)({**schema, "tags": types.MultiLabel, "ints": types.list_of(types.IntegerInput)})
    assert conformed_rows(frame, schema) == staged_rows(frame, schema)


@pytest.mark.parametrize("role, values, arrow_type, expected", [
    (types.IntegerInput, [1, None, 2**64 - 1], pa.uint64(), ["1", None, "18446744073709551615"]),
    (types.IntegerInput, [1.0, 2.5], pa.float32(), ["1.0", "2.5"]),  # as staging: text, discarded by the encoder
    (types.IntegerInput, [True, None], pa.bool_(), [1, None]),
    (types.FloatInput, [1, 2], pa.int16(), [1.0, 2.0]),
    (types.FloatInput, [float("nan"), float("inf"), None], pa.float64(), [None, float("inf"), None]),
    (types.IntegerInput, [1.0, float("nan")], pa.float64(), [1, None]),
    (types.StringInput, [float("nan"), 0.5], pa.float32(), [None, "0.5"]),
    (types.list_of(types.FloatInput), [[float("inf"), 1.5]], pa.list_(pa.float64()), [[float("inf"), 1.5]]),
    (types.DoubleInput, [0.1], pa.float32(), [float(np.float32(0.1))]),
    (types.StringInput, [True, False], pa.bool_(), ["True", "False"]),
    (types.StringInput, [b"\x00\xff"], pa.binary(), [b"\x00\xff"]),
    (types.StringInput, [None, None], pa.null(), [None, None]),
    (types.SplitKey, ["TRAIN"], pa.large_string(), ["TRAIN"]),
    (types.StringLabel, [7], pa.int64(), ["7"]),
    (types.DatetimeInput, [dt.date(1970, 1, 2)], pa.date32(), [86_400 * 10**9]),
    (types.DatetimeInput, [dt.datetime(3000, 1, 1)], pa.timestamp("us"), ["3000-01-01T00:00:00"]),
    (types.DatetimeInput, ["2024-01-01"], pa.string(), ["2024-01-01"]),
    (types.list_of(types.FloatInput, 2), [[1, 2], None], pa.list_(pa.int32(), 2), [[1.0, 2.0], None]),
    (types.list_of(types.StringInput), [[1, 2]], pa.list_(pa.int64()), [["1", "2"]]),
    (types.list_of(types.IntegerInput), [1], pa.int64(), ["1"]),  # not a list: text, discarded with its reason
    (None, [[1.5, None]], pa.list_(pa.float64()), ["[1.5, null]"]),
    (None, [{"a": 1}], pa.struct([("a", pa.int64())]), ["{'a': 1}"]),
])
def test_values_are_cast_to_their_roles_staged_type_or_become_text(role, values, arrow_type, expected):
    conformed = conform_column(pa.array(values, arrow_type), role)
    assert conformed.to_pylist() == expected
    assert conformed.type in (pa.int64(), pa.float64(), pa.string(), pa.binary(), pa.list_(pa.int64()),
                              pa.list_(pa.float64()), pa.list_(pa.string()))


@pytest.mark.parametrize("values, arrow_type, kept_type, expected", [
    ([1, None], pa.int8(), pa.int8(), [1, None]),
    ([True, None], pa.bool_(), pa.bool_(), [True, None]),
    ([0.5, float("nan")], pa.float32(), pa.float32(), [0.5, None]),
    ([dt.datetime(2020, 1, 1, 0, 0, 0, 5)], pa.timestamp("us", "UTC"), pa.timestamp("ns", "UTC"),
     [pd.Timestamp("2020-01-01 00:00:00.000005", tz="UTC")]),
    ([[1, 2]], pa.list_(pa.int32(), 2), pa.list_(pa.int32(), 2), [[1, 2]]),
    ([[float("nan")]], pa.large_list(pa.float64()), pa.large_list(pa.float64()), None),
    ([dt.datetime(3000, 1, 1)], pa.timestamp("us"), pa.string(), ["3000-01-01 00:00:00"]),  # beyond nanoseconds
    ([dt.date(2020, 1, 2)], pa.date32(), pa.string(), ["2020-01-02"]),
    ([1.5], pa.float16(), pa.string(), ["1.5"]),
    ([[True]], pa.list_(pa.bool_()), pa.string(), ["[true]"]),
])
def test_columns_outside_the_schema_keep_numbers_timestamps_and_numeric_lists(values, arrow_type, kept_type, expected):
    conformed = conform_column(pa.array(values, arrow_type), None)
    assert conformed.type == kept_type
    if expected is not None:
        assert conformed.to_pylist() == expected


def test_floats_in_integer_columns_are_never_truncated():
    """Whole floats are integers; a column with any other float is staged as text, as staging does with a
    DataFrame's column, and the encoder discards those rows (pyarrow itself would truncate 2.5 to 2)."""
    frame = pd.DataFrame({"n": [1.0] * 3 + [2.5], "v": [[1.0]] * 3 + [[2.5]]})
    schema = type(infer_schema(frame))({"n": types.IntegerInput, "v": types.list_of(types.IntegerInput)})
    assert staged_rows(frame, schema) == conformed_rows(frame, schema) == [
        {"n": "1.0", "v": "[1.0]"}] * 3 + [{"n": "2.5", "v": "[2.5]"}]


def test_timestamps_become_utc_nanoseconds_whatever_their_unit_and_zone():
    moment = pd.Timestamp("2024-05-06 07:08:09.123456789", tz="UTC")
    for arrow_type in (pa.timestamp("ns", "Asia/Kolkata"), pa.timestamp("ns"), pa.timestamp("ms", "UTC")):
        stored = pa.array([moment.tz_localize(None)], pa.timestamp("ns")).cast(arrow_type, safe=False)
        conformed = conform_column(stored, types.DatetimeInput)
        expected = moment.floor("ms") if arrow_type.unit == "ms" else moment
        assert conformed.to_pylist() == [expected.value]


def test_dictionaries_are_their_values():
    values = pa.array(["red", None, "blue"]).dictionary_encode()
    assert conform_column(values, types.StringInput).to_pylist() == ["red", None, "blue"]
    assert conform_column(pa.array([3, 4]).dictionary_encode(), types.IntegerInput).to_pylist() == [3, 4]


def test_timestamps_beyond_pythons_year_9999_become_text_for_a_reasoned_discard():
    beyond = 253402300800 * 10**6 + 5  # microseconds: 10000-01-01T00:00:00.000005
    batch = pa.RecordBatch.from_arrays([pa.array([0, beyond, None], pa.timestamp("us")),
                                        pa.array([0, beyond, None], pa.timestamp("us"))], names=["when", "other"])
    conformed = conform_batch(batch, {"when": types.DatetimeInput})
    assert conformed.column(0).to_pylist() == ["1970-01-01T00:00:00", "10000-01-01 00:00:00.000005", None]
    assert conformed.column(1).to_pylist()[1] == "10000-01-01 00:00:00.000005"
    with pytest.raises(RowError, match="when"):
        to_epoch_ns(conformed.column(0).to_pylist()[1], "when")
