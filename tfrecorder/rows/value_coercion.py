"""Table values → feature values: what each role accepts, checked and coerced, testable without Beam.

Input values arrive as python values (DataFrames staged as Parquet) or as text (CSV); `input_values`
turns either into the values of the feature its role declares (tfrecorder.format.feature_spec
describes the result in metadata.json; tfrecorder.rows.row_encoding builds the Feature) or raises
`RowError(reason)`. `check_sample` applies the same rules to the first
values of each column before any work starts, so a wrong explicit schema is one ValueError.
"""
from __future__ import annotations

import json
import math
import struct
from typing import Any, Optional

import numpy as np
import pandas as pd

from tfrecorder.core import types
from tfrecorder.errors import RowError
from tfrecorder.core.schema import SAMPLE_VALUES, Schema


def is_missing(value: Any) -> bool:
    """None, NaN (any float type), NaT and pandas.NA count as missing; empty strings and lists do not."""
    if value is None:
        return True
    if isinstance(value, (str, bytes, list, tuple, dict, np.ndarray)):
        return False
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
_BOOLEAN_TEXT = {"true": 1, "false": 0}


def to_int(value: Any, column: str, what: str = "integer") -> int:
    """Python/numpy integers, booleans (0/1), integral floats and integer text (CSV) → int64."""
    result: Optional[int] = None
    if isinstance(value, (bool, np.bool_)):
        result = int(value)
    elif isinstance(value, (int, np.integer)):
        result = int(value)
    elif isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer():
        result = int(value)
    elif isinstance(value, str):
        text = value.strip()
        result = _BOOLEAN_TEXT.get(text.lower())
        if result is None:
            try:
                result = int(text)
            except ValueError:
                pass
    if result is None:
        raise RowError(f"invalid {what}: column {column!r} has {value!r}")
    if not INT64_MIN <= result <= INT64_MAX:
        raise RowError(f"integer out of int64 range: column {column!r} has {value!r}")
    return result


def multi_label_names(value: Any, column: str) -> list[str]:
    """A multi-label cell (list, array or JSON array text) as its distinct label names, in order."""
    names = [str(v).strip() for v in _to_values(value, column, None) if not is_missing(v)]
    if any(not name for name in names):
        raise RowError(f"empty label: column {column!r} has an empty name in {value!r}")
    return list(dict.fromkeys(names))


def _to_float(value: Any, column: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise RowError(f"invalid number: column {column!r} has {value!r}") from None


def float64_bits(value: float) -> int:
    """The IEEE-754 bit pattern of a float64 as a signed int64 (how DoubleInput is stored)."""
    return struct.unpack("<q", struct.pack("<d", value))[0]


def to_epoch_ns(value: Any, column: str) -> int:
    """Datetimes (naive = UTC; aware converted to UTC), ISO text, or int nanoseconds → ns since the epoch."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return to_int(value, column)
    try:
        timestamp = pd.Timestamp(value)
        if timestamp is not pd.NaT:
            return int(timestamp.value)
    except (TypeError, ValueError, OverflowError):
        pass
    raise RowError(f"invalid datetime: column {column!r} has {value!r}")


def _to_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    return (value if isinstance(value, str) else str(value)).encode("utf-8")


def _to_values(value: Any, column: str, length: Optional[int]) -> list:
    """A list cell as a python list: lists, tuples, numpy arrays, or JSON array text (CSV)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise RowError(f"invalid list: column {column!r} has {value!r} (expected a JSON array)") from None
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise RowError(f"invalid list: column {column!r} has {value!r}")
    if length is not None and len(value) != length:
        raise RowError(f"wrong list length: column {column!r} has {len(value)} values, expected {length}")
    return list(value)


def _scalar(role: types.ColumnType, value: Any, column: str) -> Any:
    if role.dtype == "string":
        return _to_bytes(value)
    if role == types.FloatInput:
        return _to_float(value, column)
    if role == types.DoubleInput:
        return float64_bits(_to_float(value, column))
    if role == types.DatetimeInput:
        return to_epoch_ns(value, column)
    return to_int(value, column)


def input_values(role: types.ColumnType, value: Any, column: str) -> list:
    """The feature values (of `role.feature_dtype`) of one present (not missing) input or integer-label
    value; RowError if it does not fit."""
    if role.element is not None:
        items = _to_values(value, column, role.length)
        if any(v is None for v in items):
            raise RowError(f"missing list element: column {column!r} has {value!r}")
        return [_scalar(role.element, v, column) for v in items]
    return [_scalar(role, value, column)]


def first_present(values: pd.Series, count: int) -> list:
    """The first `count` present values of a column as python objects, boxing only as many cells as it
    takes to find them (a whole 10,000-row sample's datetimes boxed as Timestamps cost 0.1 s)."""
    found: list = []
    for start in range(0, len(values), count):
        found.extend(v for v in values.iloc[start:start + count].astype(object).tolist() if not is_missing(v))
        if len(found) >= count:
            break
    return found[:count]


def check_sample(schema: Schema, sample: pd.DataFrame) -> None:
    """Table-level check of an explicit schema: the first values of each input column must fit its role.

    Raises ValueError naming the column, its declared role and the first value that does not fit.
    """
    for column, role in schema.items():
        if role in (types.SplitKey, types.ImageUri, types.StringLabel, types.MultiLabel):
            continue
        for value in first_present(sample[column], SAMPLE_VALUES):  # the first ones: not every sampled cell
            try:
                input_values(role, value, column)
            except RowError as exc:
                raise ValueError(f"column {column!r} is declared {role.name} but holds {value!r}: {exc}") from None
