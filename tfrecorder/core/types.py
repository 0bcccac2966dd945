"""Column roles: what each table column means to the converter.

A `Schema` maps column names to one of these roles. The role decides how a value becomes
`tf.train.Example` features (see `tfrecorder.rows.row_encoding`), what `metadata.json` says about the
feature, and whether a bad value discards the row.

Every role has a stable name used in metadata.json and on the command line. List roles are
parameterised by their element role and length: `list_of(FloatInput, 4)` is named "FloatInput[4]"
(every value has exactly 4 elements) and `list_of(StringInput)` "StringInput[]" (any length).
"""
from __future__ import annotations

import dataclasses
import re
from typing import Optional


def _fields(role: "ColumnType") -> tuple:
    return tuple(getattr(role, name) for name in _FIELD_NAMES)


@dataclasses.dataclass(frozen=True)
class ColumnType:
    """A column role.

    `feature_dtype` is the tf.train.Feature list kind it writes ("bytes", "int64", "float"; "" = no
    feature); `dtype` the value type declared in metadata ("string", "int64", "float32", "float64");
    `stored_as` how a dtype the Example format lacks is stored ("float64_bits"). List roles carry
    their `element` role and `length` (None = variable length).
    """

    name: str
    feature_dtype: str
    is_label: bool = False
    dtype: str = ""
    stored_as: Optional[str] = None
    element: Optional["ColumnType"] = None
    length: Optional[int] = None

    @property
    def is_list(self) -> bool:
        return self.element is not None

    def __eq__(self, other: object) -> bool:
        """Field-wise, as the dataclass would; roles are compared per row, so identity first."""
        if self is other:
            return True
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self.name == other.name and _fields(self) == _fields(other)

    def __reduce__(self):
        """Roles known by name unpickle as the module's own objects (workers and forked encoders
        receive the schema pickled), so that comparing them with a role constant is an identity check."""
        try:
            if from_name(self.name) == self:
                return from_name, (self.name,)
        except ValueError:  # a role made by hand, not by name
            pass
        return self.__class__, _fields(self)

    def __repr__(self) -> str:
        if self.element is not None:
            length = "" if self.length is None else f", {self.length}"
            return f"types.list_of({self.element!r}{length})"
        return f"types.{self.name}"


_FIELD_NAMES = tuple(field.name for field in dataclasses.fields(ColumnType))

SplitKey = ColumnType("SplitKey", "")
ImageUri = ColumnType("ImageUri", "bytes", dtype="string")
StringLabel = ColumnType("StringLabel", "int64", is_label=True, dtype="int64")
IntegerLabel = ColumnType("IntegerLabel", "int64", is_label=True, dtype="int64")
MultiLabel = ColumnType("MultiLabel", "int64", is_label=True, dtype="int64")  # a list of names → vocabulary indices
IntegerInput = ColumnType("IntegerInput", "int64", dtype="int64")  # also booleans, as 0/1
FloatInput = ColumnType("FloatInput", "float", dtype="float32")
DoubleInput = ColumnType("DoubleInput", "int64", dtype="float64", stored_as="float64_bits")
StringInput = ColumnType("StringInput", "bytes", dtype="string")
DatetimeInput = ColumnType("DatetimeInput", "int64", dtype="int64")  # nanoseconds since 1970-01-01 UTC

ALL_TYPES = (SplitKey, ImageUri, StringLabel, IntegerLabel, MultiLabel, IntegerInput, FloatInput, DoubleInput, StringInput,
             DatetimeInput)
BY_NAME = {t.name: t for t in ALL_TYPES}
LIST_ELEMENTS = (IntegerInput, FloatInput, DoubleInput, StringInput)

_LIST_NAME = re.compile(r"^(\w+)\[(\d*)\]$")


def list_of(element: ColumnType, length: Optional[int] = None) -> ColumnType:
    """A list column of `element` values: fixed `length`, or any length (None)."""
    if element not in LIST_ELEMENTS:
        raise ValueError(f"list elements must be one of {[t.name for t in LIST_ELEMENTS]}, not {element.name}")
    if length is not None and (not isinstance(length, int) or length < 1):
        raise ValueError(f"a fixed list length must be a positive integer, got {length!r}")
    name = f"{element.name}[{'' if length is None else length}]"
    return ColumnType(name, element.feature_dtype, dtype=element.dtype, stored_as=element.stored_as,
                      element=element, length=length)


def from_name(name: str) -> ColumnType:
    """Look a role up by its name (as stored in metadata.json or given on the CLI): "FloatInput", "IntegerInput[3]"."""
    text = name.strip()
    if text in BY_NAME:
        return BY_NAME[text]
    match = _LIST_NAME.match(text)
    if match and match.group(1) in BY_NAME:
        return list_of(BY_NAME[match.group(1)], int(match.group(2)) if match.group(2) else None)
    raise ValueError(
        f"unknown column type {name!r}; expected one of {sorted(BY_NAME)}, or a list such as "
        f"'FloatInput[]' (any length) or 'IntegerInput[4]' (fixed length)"
    )
SupportedType = ColumnType  # TFRecorder 2.0 code annotates schema maps with it
