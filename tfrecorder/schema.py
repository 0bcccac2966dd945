"""Schemas: which role each column plays, inferred from names and dtypes or given explicitly.

Inference rules (schema=None): a column named `split` is the SplitKey, `image_uri` the ImageUri,
`label` a StringLabel (text) or IntegerLabel (integers); other columns follow their dtype
(integers → IntegerInput, floats → FloatInput, anything else → StringInput). An explicit Schema is
checked against the table before any pipeline starts.
"""
from __future__ import annotations

from typing import Iterable, Iterator, Mapping, Optional

import pandas as pd

from tfrecorder import types
from tfrecorder.types import ColumnType

SPLIT_COLUMN, IMAGE_COLUMN, LABEL_COLUMN = "split", "image_uri", "label"


class Schema(Mapping[str, ColumnType]):
    """An ordered mapping column name → column role (`tfrecorder.types`)."""

    def __init__(self, columns: Mapping[str, ColumnType | str]) -> None:
        resolved = {}
        for name, role in columns.items():
            resolved[str(name)] = types.from_name(role) if isinstance(role, str) else role
            if not isinstance(resolved[str(name)], ColumnType):
                raise ValueError(f"column {name!r}: {role!r} is not a tfrecorder.types role")
        for role in (types.SplitKey,):
            named = [n for n, r in resolved.items() if r == role]
            if len(named) > 1:
                raise ValueError(f"schema has more than one {role.name} column: {named}")
        self._columns = resolved

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
        return [name for name, r in self._columns.items() if r == role]

    @property
    def split_column(self) -> Optional[str]:
        found = self.columns_of(types.SplitKey)
        return found[0] if found else None

    @property
    def image_columns(self) -> list[str]:
        return self.columns_of(types.ImageUri)

    @property
    def label_columns(self) -> list[str]:
        return [name for name, r in self._columns.items() if r.is_label]

    def to_json(self) -> dict[str, str]:
        return {name: role.name for name, role in self._columns.items()}

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
    if lowered == IMAGE_COLUMN:
        return types.ImageUri
    if lowered == LABEL_COLUMN:
        return types.IntegerLabel if _is_integer(series) else types.StringLabel
    if _is_integer(series) or pd.api.types.is_bool_dtype(series):
        return types.IntegerInput
    if pd.api.types.is_float_dtype(series):
        return types.FloatInput
    return types.StringInput


def _is_integer(series: pd.Series) -> bool:
    return pd.api.types.is_integer_dtype(series) and not pd.api.types.is_bool_dtype(series)


def infer_schema(frame: pd.DataFrame) -> Schema:
    """Infer a Schema from a DataFrame (or a sample of a CSV read with pandas' dtype inference)."""
    return Schema({str(name): _infer_role(str(name), frame[name]) for name in frame.columns})


def check_column_names(columns: Iterable[object]) -> list[str]:
    """Table-level check: column names must be unique strings; returns them as str."""
    names = [str(c) for c in columns]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"duplicate column name(s) {duplicates}: every column must have a unique name")
    return names
