"""Column roles: what each table column means to the converter.

A `Schema` maps column names to one of these roles. The role decides how a value becomes
`tf.train.Example` features (see `tfrecorder.example_encoder`) and whether a bad value discards the row.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ColumnType:
    """A column role. `feature_dtype` is the tf.train.Feature kind it produces ("" = no feature)."""

    name: str
    feature_dtype: str
    is_label: bool = False

    def __repr__(self) -> str:
        return f"types.{self.name}"


SplitKey = ColumnType("SplitKey", "")
ImageUri = ColumnType("ImageUri", "bytes")
StringLabel = ColumnType("StringLabel", "int64", is_label=True)
IntegerLabel = ColumnType("IntegerLabel", "int64", is_label=True)
IntegerInput = ColumnType("IntegerInput", "int64")
FloatInput = ColumnType("FloatInput", "float")
StringInput = ColumnType("StringInput", "bytes")

ALL_TYPES = (SplitKey, ImageUri, StringLabel, IntegerLabel, IntegerInput, FloatInput, StringInput)
BY_NAME = {t.name: t for t in ALL_TYPES}


def from_name(name: str) -> ColumnType:
    """Look a role up by its name (as stored in metadata.json or given on the CLI)."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown column type {name!r}; expected one of {sorted(BY_NAME)}") from None
