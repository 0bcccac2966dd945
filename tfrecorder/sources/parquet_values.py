"""A Parquet file's Arrow columns in the types the driver stages a DataFrame with (tfrecorder.sources.dataframe_staging).

A user's Parquet file holds whatever Arrow types its writer chose (int8, float32, timestamps with a
time zone, dictionaries, fixed_size_list, large_string, ...). Conformed, every column has the type a
DataFrame column in the same role is staged with: integers (and booleans, as 0/1) int64, floats
float64, datetimes int64 nanoseconds since the epoch (UTC), lists Arrow lists of those, text string
(or binary for bytes); a column outside the schema keeps its numbers, booleans, timestamps (as
nanoseconds) and lists of numbers (`kept_outside_schema`, as staging does), its other values become
text. A value that does not fit its role becomes its text, exactly as staging writes it, so the row
encoder discards that row with the same reason. Both encoders then read one set of types, and a
Parquet file gives the same records, split hashes and discarded.csv cells as the same data converted
as a DataFrame.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

import pyarrow as pa
import pyarrow.compute as pc

from tfrecorder.core import types
from tfrecorder.sources.dataframe_staging import cell_text, kept_outside_schema

_TEXT_ROLES = (types.SplitKey, types.ImageUri, types.StringLabel, types.MultiLabel)  # staged as text
_ELEMENTS = {"int64": pa.int64(), "float32": pa.float64(), "float64": pa.float64(), "string": pa.string()}


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or getattr(pa.types, "is_string_view", bool)(kind)


def _is_binary(kind: pa.DataType) -> bool:
    return pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind)


def _is_list(kind: pa.DataType) -> bool:
    return pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)


def _texts(values: pa.Array, text_of: Callable[[Any], str]) -> pa.Array:
    """`text_of` each value; dates Python cannot hold (beyond year 9999) as Arrow's own text, so that
    their rows are discarded with a reason instead of failing the job."""
    try:
        items = values.to_pylist()
    except OverflowError:  # value by value, then: only those beyond Python's range take Arrow's text
        return pa.array([_text_or_arrows(values[i], text_of) for i in range(len(values))], pa.string())
    return pa.array([None if v is None else text_of(v) for v in items], pa.string())


def _text_or_arrows(value: pa.Scalar, text_of: Callable[[Any], str]) -> Optional[str]:
    try:
        item = value.as_py()
    except OverflowError:
        return value.cast(pa.string()).as_py()
    return None if item is None else text_of(item)


def as_text(values: pa.Array) -> pa.Array:
    """Each value as staging writes a value its role cannot hold: lists as JSON arrays, others str()."""
    return _texts(values, cell_text)


def _iso_text(values: pa.Array) -> pa.Array:
    """Timestamps as ISO-8601 text (for those beyond what int64 nanoseconds hold: years 1677-2262)."""
    return _texts(values, lambda stamp: stamp.isoformat())


def _cast(values: pa.Array, kind: pa.DataType) -> Optional[pa.Array]:
    try:
        return values.cast(kind)  # a safe cast: overflow or truncation raises
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _cast_or_text(values: pa.Array, kind: pa.DataType) -> pa.Array:
    cast = _cast(values, kind)
    return as_text(values) if cast is None else cast


def _epoch_nanoseconds(values: pa.Array) -> pa.Array:
    kind = values.type
    stamps = _cast(values, pa.timestamp("ns", kind.tz if pa.types.is_timestamp(kind) else None))
    return _iso_text(values) if stamps is None else stamps.cast(pa.int64())


def conform_column(values: pa.Array, role: Optional[types.ColumnType]) -> pa.Array:
    """One column in its role's staged type (role None: a column outside the schema, as staging keeps it)."""
    kind = values.type
    if pa.types.is_dictionary(kind):  # categoricals are staged as their values
        values, kind = values.cast(kind.value_type), kind.value_type
    if pa.types.is_floating(kind):  # NaN is a missing value, as in pandas (inside lists it stays a value)
        values = pc.if_else(pc.is_nan(values), pa.scalar(None, kind), values)
    if _is_text(kind):
        return values.cast(pa.string())
    if _is_binary(kind):
        return values.cast(pa.binary())
    if pa.types.is_null(kind):
        return values.cast(pa.string())
    if role is None:
        if pa.types.is_timestamp(kind) and kind.unit != "ns":  # beyond what nanoseconds hold: text
            nanoseconds = _cast(values, pa.timestamp("ns", kind.tz))
            values = values if nanoseconds is None else nanoseconds
        if kept_outside_schema(values):
            return values
    if role is None or role in _TEXT_ROLES or (role.dtype == "string" and not role.is_list):
        return as_text(values)
    if role.is_list:
        return _cast_or_text(values, pa.list_(_ELEMENTS[role.dtype])) if _is_list(kind) else as_text(values)
    if role == types.DatetimeInput:
        if pa.types.is_timestamp(kind) or pa.types.is_date(kind):
            return _epoch_nanoseconds(values)
        return _cast_or_text(values, pa.int64()) if pa.types.is_integer(kind) else as_text(values)
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind) or pa.types.is_floating(kind):
        return _cast_or_text(values, _ELEMENTS[role.dtype])  # a float that is not a whole number: text
    return as_text(values)


def conform_batch(batch: pa.RecordBatch, schema: Mapping[str, types.ColumnType]) -> pa.RecordBatch:
    """Every column of `batch` conformed to the role `schema` (column → role, e.g. a Schema) gives it."""
    arrays = [conform_column(batch.column(i), schema.get(name)) for i, name in enumerate(batch.schema.names)]
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)
