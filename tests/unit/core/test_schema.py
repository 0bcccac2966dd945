from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tfrecorder import Schema
from tfrecorder.core import types
from tfrecorder.core.schema import check_column_names, infer_schema


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


def test_column_names_are_checked_up_to_a_limit():
    from tfrecorder.core.schema import MAX_COLUMNS

    names = [f"c{i}" for i in range(MAX_COLUMNS)]
    assert check_column_names(names) == names
    with pytest.raises(ValueError, match=r"duplicate column name\(s\) \['c1', 'c7'\]"):
        check_column_names(names[:-3] + ["c7", "c1", "c7"])
    with pytest.raises(ValueError, match=f"the table has {MAX_COLUMNS + 1:,} columns: at most {MAX_COLUMNS:,} "
                                         "are supported"):
        check_column_names(names + ["one more"])


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


def _arrow_table_of_every_kind():
    import datetime as dt
    import decimal

    import pyarrow as pa

    n = 4
    stamps = [dt.datetime(2024, 1, 1) + dt.timedelta(hours=i) for i in range(n)]
    return pa.table({
        "split": ["TRAIN"] * n, "image_uri": [f"{i}.png" for i in range(n)], "photo_uri": [f"p{i}.JPG" for i in range(n)],
        "page_uri": [f"https://x/{i}" for i in range(n)],
        "i8": pa.array(range(n), pa.int8()), "u64": pa.array(range(n), pa.uint64()),
        "i64_nulls": pa.array([1, None, 3, 4], pa.int64()), "flag": pa.array([True, False, None, True]),
        "f16": pa.array(np.arange(n, dtype=np.float16)), "f32": pa.array(range(n), pa.float32()),
        "f64": pa.array([0.5, None, 1.5, 2.0]), "text": pa.array(["a", None, "c", "d"], pa.large_string()),
        "blob": pa.array([b"x"] * n, pa.binary()), "nothing": pa.nulls(n),
        "naive": pa.array(stamps, pa.timestamp("us")), "aware": pa.array(stamps, pa.timestamp("ns", "Asia/Kolkata")),
        "seconds": pa.array(stamps, pa.timestamp("s", "UTC")),
        "day": pa.array([dt.date(2024, 1, i + 1) for i in range(n)], pa.date32()),
        "money": pa.array([decimal.Decimal("1.25")] * n, pa.decimal128(5, 2)),
        "colour": pa.array(["red", "blue", None, "red"]).dictionary_encode(),
        "level": pa.array([1, 2, 1, 2]).dictionary_encode(),
        "vector": pa.array([[1.0, 2.0, 3.0]] * n, pa.list_(pa.float32(), 3)),
        "ints": pa.array([[1], [1, 2], [], None], pa.list_(pa.int64())),
        "bools": pa.array([[True], [False, True], [True], [False]], pa.large_list(pa.bool_())),
        "words": pa.array([["a"], ["b", "c"], ["d"], ["e"]], pa.list_(pa.string())),
        "struct": pa.array([{"a": i} for i in range(n)]),
    })


def test_arrow_types_map_to_the_roles_pandas_infers_for_the_same_parquet_file(tmp_path):
    """Each Arrow type takes the role the equivalent pandas dtype gets (the file read by pd.read_parquet,
    nullable dtypes so that integers with nulls stay integers), except that list lengths come from the
    type: fixed only for a fixed_size_list."""
    import pyarrow.parquet as pq

    from tfrecorder.core.schema import infer_arrow_schema

    table = _arrow_table_of_every_kind()
    pq.write_table(table, tmp_path / "t.parquet")
    read_back = pq.read_schema(tmp_path / "t.parquet")
    sample = pd.read_parquet(tmp_path / "t.parquet", dtype_backend="numpy_nullable")
    from_arrow = infer_arrow_schema(read_back, sample)
    assert dict(from_arrow) == dict(infer_schema(sample))
    assert from_arrow["vector"] == types.list_of(types.FloatInput, 3) and from_arrow["ints"] == types.list_of(types.IntegerInput)
    assert from_arrow["aware"] == from_arrow["naive"] == from_arrow["seconds"] == types.DatetimeInput
    assert from_arrow["photo_uri"] == types.ImageUri and from_arrow["page_uri"] == types.StringInput
    # No sampling for list lengths: a variable Arrow list whose values happen to share a length stays variable.
    assert infer_arrow_schema(table.select(["words"]).schema)["words"] == types.list_of(types.StringInput)


@pytest.mark.parametrize("label_type, role", [
    ("int64", types.IntegerLabel), ("string", types.StringLabel), ("bool", types.StringLabel),
    ("dictionary", types.StringLabel), ("list", types.MultiLabel)])
def test_arrow_label_roles(label_type, role):
    import pyarrow as pa

    from tfrecorder.core.schema import infer_arrow_schema

    arrow_type = {"int64": pa.int64(), "string": pa.string(), "bool": pa.bool_(),
                  "dictionary": pa.dictionary(pa.int32(), pa.int64()), "list": pa.list_(pa.string())}[label_type]
    assert infer_arrow_schema(pa.schema([("label", arrow_type)]))["label"] == role
