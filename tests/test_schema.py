from __future__ import annotations

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
