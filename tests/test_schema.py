from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tfrecorder import Schema, types
from tfrecorder.schema import check_column_names, infer_schema


def test_inference_by_name_and_dtype():
    frame = pd.DataFrame({"split": ["TRAIN"], "image_uri": ["a.jpg"], "label": ["cat"], "age": [3],
                          "score": [0.5], "note": ["x"], "flag": [True]})
    schema = infer_schema(frame)
    assert dict(schema) == {"split": types.SplitKey, "image_uri": types.ImageUri, "label": types.StringLabel,
                            "age": types.IntegerInput, "score": types.FloatInput, "note": types.StringInput,
                            "flag": types.IntegerInput}


def test_integer_label_is_inferred():
    assert infer_schema(pd.DataFrame({"label": [1, 2]}))["label"] == types.IntegerLabel


def test_explicit_schema_accepts_role_names_and_round_trips_json():
    schema = Schema({"path": "ImageUri", "y": types.IntegerLabel})
    assert Schema.from_json(schema.to_json()) == schema
    assert schema.image_columns == ["path"] and schema.label_columns == ["y"]


def test_missing_schema_column_is_named():
    with pytest.raises(ValueError, match=r"\['image_uri'\]"):
        Schema({"image_uri": types.ImageUri}).validate_columns(["split", "label"])


def test_bad_roles_and_duplicates_are_refused():
    with pytest.raises(ValueError, match="unknown column type"):
        Schema({"x": "Nope"})
    with pytest.raises(ValueError, match="more than one SplitKey"):
        Schema({"a": types.SplitKey, "b": types.SplitKey})
    with pytest.raises(ValueError, match=r"duplicate column name\(s\) \['a'\]"):
        check_column_names(["a", "b", "a"])


def test_inference_for_structured_dtypes():
    frame = pd.DataFrame({
        "nullable_int": pd.array([1, None], dtype="Int64"),
        "nullable_bool": pd.array([True, None], dtype="boolean"),
        "naive_time": pd.to_datetime(["2020-01-01", None]),
        "aware_time": pd.to_datetime(["2020-01-01", "2021-06-01"]).tz_localize("Asia/Tokyo"),
        "text_category": pd.Categorical(["a", None]),
        "int_category": pd.Categorical([3, 4]),
        "box": [[1.0, 2.0, 3.0, 4.0], np.array([0.5, 0.5, 1.0, 1.0])],
        "tags": [["x"], ["y", "z"]],
        "ids": [np.array([1, 2], dtype=np.int32), None],
        "empty_arrays": [np.array([], dtype=np.int64), np.array([], dtype=np.int64)],
        "object_ints": pd.Series([1, None], dtype=object),
        "mixed": pd.Series([1, "a"], dtype=object),
        "mask_uri": ["m/1.png", "m/2.PNG"],
        "doc_uri": ["gs://b/1.pdf", "gs://b/2.pdf"],
    })
    assert Schema.infer(frame).to_json() == {
        "nullable_int": "IntegerInput", "nullable_bool": "IntegerInput", "naive_time": "DatetimeInput",
        "aware_time": "DatetimeInput", "text_category": "StringInput", "int_category": "IntegerInput",
        "box": "FloatInput[4]", "tags": "StringInput[]", "ids": "IntegerInput[2]", "empty_arrays": "IntegerInput[]",
        "object_ints": "IntegerInput", "mixed": "StringInput", "mask_uri": "ImageUri", "doc_uri": "StringInput",
    }


def test_list_length_is_judged_on_every_row():
    frame = pd.DataFrame({"v": [[1, 2]] * 20_000 + [[1]]})
    assert infer_schema(frame)["v"] == types.list_of(types.IntegerInput)
    assert infer_schema(frame.iloc[:-1])["v"] == types.list_of(types.IntegerInput, 2)
