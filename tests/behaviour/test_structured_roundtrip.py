"""Property test: random DataFrames over every supported dtype → convert (DirectRunner) → read back → equal.

Rows are matched by an `id` column; columns come in random order and random subsets. Floats are
compared after rounding the input to float32 (DoubleInput columns exactly); missing values must come
back flagged `<name>_missing` with the spec's default. Each example runs one real pipeline, so the
example count is kept small.
"""
from __future__ import annotations

import math
import tempfile

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings, strategies as st

import tfrecorder
from support.readers import read_job

INT64 = st.integers(-2**63, 2**63 - 1)
FLOATS = st.floats(allow_nan=True, allow_infinity=True)
TEXT = st.one_of(st.text(max_size=12), st.text(alphabet=" \t\n\r,;\"'\\ü✓\x00", max_size=6),
                 st.sampled_from(["", " ", "a, b", '"quoted"', "line\nbreak", "tab\t", "NaN", "None", "ünïcødé ✓"]))
NS = st.integers(pd.Timestamp.min.value + 86_400 * 10**9, pd.Timestamp.max.value - 86_400 * 10**9)  # room for any time zone
ZONES = ["UTC", "Asia/Kolkata", "America/St_Johns", "Pacific/Chatham"]


def maybe(strategy):
    return st.one_of(st.none(), strategy)


def column(kind: str, n: int):
    """A strategy for n values of one column kind, as the DataFrame column to build."""
    cells = {
        "int": INT64, "nullable_int": maybe(INT64), "float": FLOATS, "double": FLOATS, "bool": st.booleans(),
        "nullable_bool": maybe(st.booleans()), "text": maybe(TEXT), "category": maybe(st.sampled_from(["a", "b, c", "ü", ""])),
        "datetime": maybe(NS), "datetime_tz": maybe(NS), "float_list": maybe(st.lists(FLOATS, max_size=4)),
        "string_list": maybe(st.lists(TEXT, max_size=3)),
    }
    if kind == "int_vector":
        return st.integers(1, 3).flatmap(lambda k: st.lists(st.lists(INT64, min_size=k, max_size=k), min_size=n, max_size=n))
    return st.lists(cells[kind], min_size=n, max_size=n)


def as_series(kind: str, values: list) -> pd.Series:
    if kind == "nullable_int":
        return pd.Series(pd.array(values, dtype="Int64"))
    if kind == "nullable_bool":
        return pd.Series(pd.array(values, dtype="boolean"))
    if kind == "category":
        return pd.Series(pd.Categorical(values))
    if kind in ("datetime", "datetime_tz"):
        series = pd.Series(pd.to_datetime(values, unit="ns"))
        return series.dt.tz_localize("UTC").dt.tz_convert(ZONES[len(values) % len(ZONES)]) if kind == "datetime_tz" else series
    if kind in ("float_list", "string_list", "int_vector", "text"):
        return pd.Series(values, dtype=object)
    return pd.Series(values)


def kind_of(name: str) -> str:
    return name.split("__")[0]


KINDS = ["int", "nullable_int", "float", "double", "bool", "nullable_bool", "text", "category", "datetime",
         "datetime_tz", "float_list", "string_list", "int_vector"]


@st.composite
def frames(draw) -> pd.DataFrame:
    """Up to three columns of each kind (named kind__i), so one conversion checks many random columns."""
    n = draw(st.integers(1, 10))
    names = draw(st.lists(st.sampled_from([f"{kind}__{i}" for kind in KINDS for i in range(3)]), min_size=1, unique=True))
    data = {name: as_series(kind_of(name), draw(column(kind_of(name), n))) for name in names}
    data["id"] = pd.Series(range(n))
    order = draw(st.permutations(list(data)))
    return pd.DataFrame({name: data[name] for name in order})


def expected_value(kind: str, value):
    if kind in ("float", "float_list"):
        with np.errstate(over="ignore"):  # beyond float32's range → ±inf, as stored
            return np.asarray(value, dtype=np.float32).tolist()
    if kind in ("bool", "nullable_bool"):
        return int(value)
    if kind in ("text", "category"):
        return value.encode("utf-8")
    if kind == "string_list":
        return [v.encode("utf-8") for v in value]
    if kind in ("datetime", "datetime_tz"):
        return value.value
    return list(value) if kind == "int_vector" else value


def same(got, want) -> bool:
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(same(g, w) for g, w in zip(got, want))
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    return got == want and type(got) is type(want)


def is_missing(value) -> bool:
    return value is None or not isinstance(value, (list, tuple, np.ndarray)) and bool(pd.isna(value))


@settings(max_examples=8, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(frames())
def test_random_frames_round_trip(frame):
    schema = dict(tfrecorder.Schema.infer(frame))
    schema.update({name: "DoubleInput" for name in frame.columns if kind_of(name) == "double"})
    with tempfile.TemporaryDirectory() as out:
        result = tfrecorder.convert(frame, out, schema=schema, split_ratios=(1.0, 0.0, 0.0))
        examples = {ex["id"]: ex for ex in read_job(result["tfrecord_dir"])["TRAIN"]}
    assert result["discarded"] == 0 and sorted(examples) == list(frame["id"])
    features = result.metadata["features"]
    for name in frame.columns.drop("id"):
        for row_id, value in zip(frame["id"], frame[name].astype(object)):
            got = examples[row_id]
            if is_missing(value):
                assert got[f"{name}_missing"] is True, (name, row_id)
                continue
            assert got.get(f"{name}_missing", False) is False and features[name]["allow_missing"] == (f"{name}_missing" in got)
            want = expected_value(kind_of(name), value)
            assert same(got[name], want), (name, row_id, value, got[name], want)
