"""Per split, per feature statistics from Arrow batches and from python rows with image facts."""
import numpy as np
import pyarrow as pa

from tfrecorder.core import types
from tfrecorder.core.schema import Schema
from tfrecorder.rows import dataset_statistics
from tfrecorder.rows.dataset_statistics import DatasetStatistics, feature_kind, merge_all

SCHEMA = Schema({"split": types.SplitKey, "label": types.StringLabel, "x": types.FloatInput,
                 "name": types.StringInput, "tags": types.list_of(types.IntegerInput)})


def test_feature_kinds_follow_roles():
    assert [feature_kind(SCHEMA[c]) for c in SCHEMA] == [None, "label", "numeric", "string", "numeric"]
    assert feature_kind(types.ImageUri) == "image"


def test_batches_per_split_merge_and_document():
    batch = pa.RecordBatch.from_pydict({"label": ["a", "b", "a"], "x": [1.0, None, 0.0],
                                        "name": ["ab", "c", "ab"], "tags": [[1, 2], [3], []]})
    one, two = DatasetStatistics(SCHEMA), DatasetStatistics(SCHEMA)
    one.add_batch("TRAIN", batch)
    two.add_batch("TEST", batch.slice(0, 1))
    document = merge_all([one, two], SCHEMA).to_json({"label": ["a", "b", "c"]})
    train = document["splits"]["TRAIN"]
    assert train["rows"] == 3 and list(document["splits"]) == ["TRAIN", "TEST"]
    assert train["features"]["x"]["missing"] == 1 and train["features"]["x"]["numeric"]["zeros"] == 1
    assert train["features"]["label"]["labels"]["counts"] == [{"value": "a", "count": 2}, {"value": "b", "count": 1}]
    assert train["features"]["label"]["labels"]["missing_classes"] == ["c"]
    assert train["features"]["name"]["string"]["unique_estimate"] == 2
    assert train["features"]["tags"]["list_lengths"]["max"] == 2 and train["features"]["tags"]["numeric"]["count"] == 3
    assert document["splits"]["TEST"]["features"]["label"]["labels"]["missing_classes"] == ["b", "c"]


def test_rows_with_images_and_text_lists():
    schema = Schema({"image_uri": types.ImageUri, "label": types.MultiLabel, "n": types.IntegerInput})
    stats = DatasetStatistics(schema)
    stats.add_rows("TRAIN", [{"image_uri": "a.jpg", "label": "[\"x\", \"y\"]", "n": 3}, {"image_uri": "b.png", "label": ["x"], "n": "oops"}],
                   {"image_uri": [("jpeg", 10, 20, 3, 500), ("png", 30, 40, 1, 900)]})
    features = stats.to_json()["splits"]["TRAIN"]["features"]
    image = features["image_uri"]["image"]
    assert image["width"]["max"] == 40 and image["bytes"]["mean"] == 700
    assert {f["value"] for f in image["formats"]} == {"jpeg", "png"}
    assert features["label"]["list_lengths"]["count"] == 2
    assert {c["value"]: c["count"] for c in features["label"]["labels"]["counts"]} == {"x": 2, "y": 1}
    assert features["n"]["count"] == 2


def test_text_columns_counted_column_wise_as_value_by_value(monkeypatch):
    """CSV text (numbers, datetimes, JSON number lists) is counted column-wise, with the statistics the
    value-by-value parse gives: the same as python rows where every list cell parses, the same as the
    value-by-value path of add_batch where one does not."""
    schema = Schema({"x": types.FloatInput, "when": types.DatetimeInput, "vec": types.list_of(types.FloatInput, 2),
                     "ids": types.list_of(types.IntegerInput)})
    texts = {"x": ["1", "-2.5e3", " 7", "nan", "2020-01-01 10:00:00", "abc", "1e400", None],
             "when": ["2020-01-01 10:00:00", "2021-05-06T01:02:03Z", None, "3", "x", "1.5", "7", "8"],
             "vec": ["[1.5, 2]", "[3,4e2]", "[-0.0, 1e-3]", None, "[5, 6]", "[7, 8]", "[9, 10]", "[11, 12]"],
             "ids": ["[1, 2, 3]", "[]", "[4]", "[5]", None, "[6]", "[7, 8]", "[9]"]}
    batch = pa.RecordBatch.from_pydict(texts)
    odd = pa.RecordBatch.from_pydict({**texts, "vec": ["[1, 2, 3]"] + texts["vec"][1:], "ids": ["[1, x]"] + texts["ids"][1:]})
    column_wise, by_row = DatasetStatistics(schema), DatasetStatistics(schema)
    column_wise.add_batch("TRAIN", batch)
    by_row.add_rows("TRAIN", batch.to_pylist())
    assert column_wise.to_json() == by_row.to_json()
    column_wise = DatasetStatistics(schema)
    column_wise.add_batch("TEST", batch)
    column_wise.add_batch("TEST", odd)
    monkeypatch.setattr(dataset_statistics, "number_lists", lambda values, role: None)
    monkeypatch.setattr(dataset_statistics, "_text_numbers",
                        lambda values: np.asarray([dataset_statistics._number(v) for v in values.to_pylist()]))
    by_value = DatasetStatistics(schema)
    by_value.add_batch("TEST", batch)
    by_value.add_batch("TEST", odd)
    assert column_wise.to_json() == by_value.to_json()


def test_datetime_text_has_the_statistics_of_the_datetimes_it_stores():
    """A CSV's datetime text gives the numeric statistics a DataFrame's datetimes give: the epoch
    nanoseconds the encoder stores (ISO text column-wise, other text such as a bare date value by value)."""
    import pandas as pd

    schema = Schema({"when": "DatetimeInput"})
    text = ["2021-04-07 15:07:02", "2022-01-01T01:00:00+01:00", None, "2020-01-02"]
    stamps = pd.to_datetime(["2021-04-07 15:07:02", "2022-01-01 00:00:00", None, "2020-01-02"], format="ISO8601").as_unit("ns")
    found = []
    for column in (pa.array(text), pa.array(stamps), pa.array(text[:3])):
        statistics = DatasetStatistics(schema)
        statistics.add_batch("TRAIN", pa.RecordBatch.from_arrays([column], names=["when"]))
        found.append(statistics.to_json()["splits"]["TRAIN"]["features"]["when"])
    assert found[0] == found[1]
    assert found[0]["numeric"]["count"] == 3 and found[0]["missing"] == 1
    assert found[0]["numeric"]["min"] == stamps[3].value and found[2]["numeric"]["max"] == stamps[1].value
