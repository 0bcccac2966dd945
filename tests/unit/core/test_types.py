"""Column roles and their stable names."""
from __future__ import annotations

import pytest

from tfrecorder import Schema
from tfrecorder.core import types


@pytest.mark.parametrize("name", ["IntegerInput", "FloatInput", "DoubleInput", "StringInput", "DatetimeInput",
                                  "IntegerInput[]", "FloatInput[4]", "DoubleInput[]", "StringInput[1]"])
def test_every_role_name_round_trips(name):
    role = types.from_name(name)
    assert role.name == name and types.from_name(role.name) == role
    assert Schema.from_json(Schema({"c": role}).to_json())["c"] == role


def test_list_roles_carry_element_length_and_metadata_dtype():
    fixed = types.list_of(types.FloatInput, 4)
    assert (fixed.is_list, fixed.element, fixed.length, fixed.dtype, fixed.feature_dtype) == (
        True, types.FloatInput, 4, "float32", "float")
    ragged = types.from_name("DoubleInput[]")
    assert (ragged.length, ragged.dtype, ragged.stored_as, ragged.feature_dtype) == (None, "float64", "float64_bits", "int64")
    assert repr(fixed) == "types.list_of(types.FloatInput, 4)" and not types.IntegerInput.is_list


@pytest.mark.parametrize("name", ["Nope", "ImageUri[]", "FloatInput[0]", "FloatInput[-1]", "FloatInput[x]", "StringLabel[2]"])
def test_bad_names_are_refused(name):
    with pytest.raises(ValueError):
        types.from_name(name)
