"""Stage a DataFrame as Parquet for the pipeline without losing or changing any value.

Beam's ReadFromParquet hands each row to the workers as python values (`pyarrow.Table.to_pydict`),
so every column is written with an Arrow type that reads back as something `RowEncoder` encodes to
exactly the input: integers (and booleans, as 0/1) as int64, floats as float64, list cells as Arrow
lists (NaN and inf inside stay values: Arrow's pandas conversion would turn NaN into null),
datetimes as ISO-8601 text with their UTC offset and full nanosecond precision, categoricals as
their values, everything else as text (or bytes, if the column holds bytes). Missing values
(None/NaN/NaT/pd.NA) become nulls. A column whose values do not fit its declared type is staged as
text, so each bad value becomes a row-level discard in the pipeline, not a driver crash.
"""
from __future__ import annotations

import json
from typing import Any, BinaryIO, Optional

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tfrecorder import types
from tfrecorder.row_encoder import is_missing
from tfrecorder.schema import Schema

_ARROW_TYPES = {"int64": pa.int64(), "float32": pa.float64(), "float64": pa.float64(), "string": pa.string()}
_CONVERSION_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError)


def _cell_text(value: Any) -> str:
    """Text the encoder parses back: lists as JSON arrays (NaN/Infinity included), others as str()."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return json.dumps(_as_list(value), default=str)
    return value if isinstance(value, str) else str(value)


def _text(cells: list) -> pa.Array:
    if any(isinstance(v, bytes) for v in cells):
        return pa.array([v if v is None or isinstance(v, bytes) else _cell_text(v).encode("utf-8") for v in cells],
                        pa.binary())
    return pa.array([None if v is None else _cell_text(v) for v in cells], pa.string())


def _iso(value: Any) -> Any:
    try:
        return pd.Timestamp(value).isoformat()
    except (TypeError, ValueError, OverflowError):
        return str(value)


def _as_int(value: Any) -> Any:
    return int(value) if isinstance(value, (bool, np.bool_)) else value


def _as_list(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    return list(value) if isinstance(value, tuple) else value


def stage_column(series: pd.Series, role: Optional[types.ColumnType]) -> pa.Array:
    """One column as an Arrow array that reads back as exact python values (role None: not converted)."""
    cells = [None if is_missing(v) else v for v in series.astype(object).tolist()]
    try:
        if role is None or not role.dtype or role.dtype == "string" and not role.is_list:
            return _text(cells)
        if role.is_list:
            element = _ARROW_TYPES[role.dtype]
            return pa.array([None if v is None else [_as_int(e) for e in _as_list(v)] for v in cells],
                            pa.list_(element), from_pandas=False)
        if role == types.DatetimeInput:
            return pa.array([None if v is None else _iso(v) for v in cells], pa.string())
        return pa.array([None if v is None else _as_int(v) for v in cells], _ARROW_TYPES[role.dtype],
                        from_pandas=False)
    except _CONVERSION_ERRORS:
        return _text(cells)


def write_parquet(frame: pd.DataFrame, schema: Schema, stream: BinaryIO) -> None:
    """Write every column of `frame` (schema columns typed by role, others as text) as Parquet."""
    columns = [str(c) for c in frame.columns]
    arrays = [stage_column(frame.iloc[:, i], schema.get(name)) for i, name in enumerate(columns)]
    pq.write_table(pa.Table.from_arrays(arrays, names=columns), stream)
