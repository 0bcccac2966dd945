"""Schemas: which role each column plays, inferred from names and dtypes or given explicitly.

Inference rules (schema=None): a column named `split` is the SplitKey, `image_uri` (or any `*_uri`
column whose values all end in an image suffix) an ImageUri, `label` a StringLabel (text),
IntegerLabel (integers) or MultiLabel (lists of names); other columns follow their dtype: integers
and booleans → IntegerInput, floats → FloatInput (float32), datetimes → DatetimeInput, categoricals → the role of their
categories (stored as values), object columns of lists/arrays → a list role (fixed length when every
row has the same length), other object columns → the kind their values share, else StringInput.
float64 is never inferred: ask for DoubleInput explicitly. An explicit Schema is checked against the
table before any pipeline starts.

Parquet sources follow the same rules from their Arrow types (`infer_arrow_schema`), without looking
at values except for `*_uri` image paths: integer and bool types → IntegerInput, floating → FloatInput,
timestamp (any unit, with or without time zone) → DatetimeInput, dictionary → the role of its value
type, lists → a list role of their element type, fixed length only for Arrow's fixed_size_list, and
anything else (string, binary, date, decimal, struct, ...) → StringInput.
"""
from __future__ import annotations

import collections
import datetime as dt
from typing import Iterable, Iterator, Mapping, Optional

import numpy as np
import pandas as pd

from tfrecorder.core import types
from tfrecorder.core.types import ColumnType

SPLIT_COLUMN, IMAGE_COLUMN, LABEL_COLUMN = "split", "image_uri", "label"
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp")  # file names that make a *_uri column an ImageUri
SAMPLE_VALUES = 1000  # values per column looked at to infer element types and validate explicit schemas
MAX_COLUMNS = 20_000  # wider tables are refused before any sample is read (docs/reliability.md, "Limits")


class Schema(Mapping[str, ColumnType]):
    """An ordered mapping column name → column role (`tfrecorder.core.types`)."""

    def __init__(self, columns: Mapping[str, ColumnType | str]) -> None:
        resolved = {}
        for name, role in columns.items():
            resolved[str(name)] = types.from_name(role) if isinstance(role, str) else role
            if not isinstance(resolved[str(name)], ColumnType):
                raise ValueError(f"column {name!r}: {role!r} is not a tfrecorder.core.types role")
        for role in (types.SplitKey,):
            named = [n for n, r in resolved.items() if r == role]
            if len(named) > 1:
                raise ValueError(f"schema has more than one {role.name} column: {named}")
        self._columns = resolved
        # asked per row by the pipeline: computed once
        self._by_role: dict[ColumnType, tuple[str, ...]] = {}
        self._labels = tuple(name for name, r in resolved.items() if r.is_label)
        self._split = next((name for name, r in resolved.items() if r == types.SplitKey), None)
        self._images = self.columns_of(types.ImageUri)

    def __getitem__(self, name: str) -> ColumnType:
        return self._columns[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns)

    def __len__(self) -> int:
        return len(self._columns)

    def __repr__(self) -> str:
        inner = ", ".join(f"{n!r}: {r!r}" for n, r in self._columns.items())
        return f"Schema({{{inner}}})"

    def columns_of(self, role: ColumnType) -> list[str]:
        found = self._by_role.get(role)
        if found is None:
            found = self._by_role[role] = tuple(name for name, r in self._columns.items() if r == role)
        return list(found)

    @property
    def split_column(self) -> Optional[str]:
        return self._split

    @property
    def image_columns(self) -> list[str]:
        return list(self._images)

    @property
    def label_columns(self) -> list[str]:
        return list(self._labels)

    def to_json(self) -> dict[str, str]:
        return {name: role.name for name, role in self._columns.items()}

    @classmethod
    def infer(cls, frame: pd.DataFrame) -> "Schema":
        """The schema `convert(schema=None)` would use; edit a copy to override single columns:
        `Schema({**Schema.infer(df), "price": "DoubleInput"})`."""
        return infer_schema(frame)

    @classmethod
    def from_json(cls, data: Mapping[str, str]) -> "Schema":
        return cls(dict(data))

    def validate_columns(self, columns: Iterable[str]) -> None:
        """Raise ValueError naming any schema column the table lacks."""
        present = set(columns)
        missing = [name for name in self._columns if name not in present]
        if missing:
            raise ValueError(
                f"column(s) {missing} named in the schema are missing from the table "
                f"(table columns: {sorted(present)})"
            )


def _infer_role(name: str, series: pd.Series) -> ColumnType:
    lowered = name.lower()
    if lowered == SPLIT_COLUMN:
        return types.SplitKey
    if lowered == IMAGE_COLUMN or lowered.endswith("_uri") and _looks_like_image_paths(series):
        return types.ImageUri
    if lowered == LABEL_COLUMN and _holds_lists(series):
        return types.MultiLabel
    if lowered == LABEL_COLUMN:
        return types.IntegerLabel if _is_integer(series) else types.StringLabel
    if isinstance(series.dtype, pd.CategoricalDtype):  # stored as its values (text), not as an index
        return _infer_role(name, pd.Series(series.cat.categories))
    if _is_integer(series) or pd.api.types.is_bool_dtype(series):
        return types.IntegerInput
    if pd.api.types.is_float_dtype(series):
        return types.FloatInput
    if pd.api.types.is_datetime64_any_dtype(series):
        return types.DatetimeInput
    if pd.api.types.is_object_dtype(series):
        return _infer_object_role(series.dropna())
    return types.StringInput


def _holds_lists(series: pd.Series) -> bool:
    """A column of lists (multi-label names), judged on its first present values."""
    values = series.dropna().head(SAMPLE_VALUES)
    return len(values) > 0 and all(isinstance(v, (list, tuple, np.ndarray)) for v in values)


def _is_integer(series: pd.Series) -> bool:
    return pd.api.types.is_integer_dtype(series) and not pd.api.types.is_bool_dtype(series)


def _looks_like_image_paths(series: pd.Series) -> bool:
    values = series.dropna().head(SAMPLE_VALUES)
    return len(values) > 0 and all(isinstance(v, str) and v.lower().endswith(IMAGE_SUFFIXES) for v in values)


def _scalar_kind(values: list) -> ColumnType:
    """The role python values share: ints/bools → IntegerInput, numbers → FloatInput, datetimes, else text."""
    if values and all(isinstance(v, (bool, int, np.bool_, np.integer)) for v in values):
        return types.IntegerInput
    if values and all(isinstance(v, (bool, int, float, np.bool_, np.number)) for v in values):
        return types.FloatInput
    if values and all(isinstance(v, (dt.datetime, np.datetime64)) for v in values):
        return types.DatetimeInput
    return types.StringInput


_SEQUENCES = (list, tuple, np.ndarray)  # cells of a list column


def _infer_object_role(values: pd.Series) -> ColumnType:
    """Object columns: all lists/arrays → a list role, else the kind the values share."""
    if len(values) == 0:
        return types.StringInput
    cells = values.to_numpy(dtype=object)
    if not all(issubclass(kind, _SEQUENCES) for kind in set(map(type, cells))):  # map in C: no python loop per cell
        return _scalar_kind(values.head(SAMPLE_VALUES).tolist())
    elements = [e for v in values.head(SAMPLE_VALUES) for e in (v.tolist() if isinstance(v, np.ndarray) else v)]
    arrays = [v for v in values.head(SAMPLE_VALUES) if isinstance(v, np.ndarray)]
    if not elements and arrays:
        element = _scalar_kind([arrays[0].dtype.type(0)]) if arrays[0].dtype.kind in "biuf" else types.StringInput
    else:
        element = _scalar_kind(elements) if elements else types.FloatInput
    if element == types.DatetimeInput:
        element = types.StringInput
    lengths = set(map(len, cells))
    return types.list_of(element, lengths.pop() if len(lengths) == 1 and 0 not in lengths else None)


def infer_schema(frame: pd.DataFrame) -> Schema:
    """Infer a Schema from a DataFrame (or a sample of a CSV read with pandas' dtype inference).

    Value types are judged on the first values of each column; list lengths on all of them, so a
    list column is fixed-length only if every row has the same length.
    """
    return Schema({str(name): _infer_role(str(name), frame[name]) for name in frame.columns})


def _arrow_element(arrow_type) -> ColumnType:
    """The element role of an Arrow list's value type (as pandas would infer it from its elements)."""
    import pyarrow as pa

    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    if pa.types.is_integer(arrow_type) or pa.types.is_boolean(arrow_type):
        return types.IntegerInput
    if pa.types.is_floating(arrow_type) or pa.types.is_null(arrow_type):
        return types.FloatInput
    return types.StringInput


def _arrow_role(name: str, arrow_type, sample: Optional[pd.Series]) -> ColumnType:
    import pyarrow as pa

    lowered = name.lower()
    listed = pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type)
    if lowered == SPLIT_COLUMN:
        return types.SplitKey
    if lowered == IMAGE_COLUMN or (lowered.endswith("_uri") and sample is not None and not listed
                                   and _looks_like_image_paths(sample)):
        return types.ImageUri
    if lowered == LABEL_COLUMN and listed:
        return types.MultiLabel
    if lowered == LABEL_COLUMN:  # a dictionary (categorical) label is text, as in pandas
        return types.IntegerLabel if pa.types.is_integer(arrow_type) else types.StringLabel
    if pa.types.is_dictionary(arrow_type):
        return _arrow_role(name, arrow_type.value_type, None)
    if pa.types.is_integer(arrow_type) or pa.types.is_boolean(arrow_type):
        return types.IntegerInput
    if pa.types.is_floating(arrow_type):
        return types.FloatInput
    if pa.types.is_timestamp(arrow_type):
        return types.DatetimeInput
    if listed:
        length = arrow_type.list_size if pa.types.is_fixed_size_list(arrow_type) else None
        return types.list_of(_arrow_element(arrow_type.value_type), length or None)
    return types.StringInput


def infer_arrow_schema(arrow_schema, sample: Optional[pd.DataFrame] = None) -> Schema:
    """Infer a Schema from a Parquet source's Arrow schema (see the module docstring); `sample` (its
    first rows) only tells `*_uri` columns of image paths from other text."""
    return Schema({field.name: _arrow_role(field.name, field.type,
                                           sample[field.name] if sample is not None and field.name in sample else None)
                   for field in arrow_schema})


def check_column_names(columns: Iterable[object]) -> list[str]:
    """Table-level check: at most MAX_COLUMNS column names, unique strings; returns them as str. Linear in
    the number of columns (sources call it on a header before reading any sample)."""
    names = [str(c) for c in columns]
    if len(names) > MAX_COLUMNS:
        raise ValueError(f"the table has {len(names):,} columns: at most {MAX_COLUMNS:,} are supported (every "
                         "column is a feature of every Example); store wide vectors as one list column, e.g. a "
                         "JSON array per row")
    duplicates = sorted(name for name, count in collections.Counter(names).items() if count > 1)
    if duplicates:
        raise ValueError(f"duplicate column name(s) {duplicates}: every column must have a unique name")
    return names
