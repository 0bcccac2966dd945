"""Table values → feature values: each role's checks and coercions (the encoder's cases are in test_row_encoding)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tfrecorder import Schema
from tfrecorder.core import types
from tfrecorder.errors import RowError
from tfrecorder.rows.row_encoding import input_feature
from tfrecorder.rows.value_coercion import check_sample, first_present, is_missing, multi_label_names, to_int


def test_naive_datetimes_are_utc_and_aware_ones_are_converted():
    naive = input_feature(types.DatetimeInput, pd.Timestamp("2020-01-01 00:00"), "t")
    aware = input_feature(types.DatetimeInput, pd.Timestamp("2020-01-01 09:00", tz="Asia/Tokyo"), "t")
    text = input_feature(types.DatetimeInput, "2020-01-01T00:00:00Z", "t")
    assert list(naive.values) == list(aware.values) == list(text.values) == [1577836800 * 10**9]
    assert list(input_feature(types.DatetimeInput, np.datetime64("1969-12-31T23:59:59", "s"), "t").values) == [-10**9]


def test_check_sample_names_the_column_and_value():
    sample = pd.DataFrame({"n": ["1", "2", "x"], "box": [[1, 2, 3, 4]] * 3})
    with pytest.raises(ValueError, match=r"column 'n' is declared IntegerInput but holds 'x'"):
        check_sample(Schema({"n": "IntegerInput", "box": "FloatInput[4]"}), sample)
    with pytest.raises(ValueError, match=r"column 'box' is declared FloatInput\[3\]"):
        check_sample(Schema({"box": "FloatInput[3]"}), sample)
    check_sample(Schema({"n": "StringInput", "box": "FloatInput[4]"}), sample)


def test_the_first_present_values_are_found_past_missing_ones():
    """Chunk by chunk: missing cells (NaT, None, NaN) are skipped, and a bad value after the first
    SAMPLE_VALUES present ones is not looked at."""
    when = pd.Series(pd.to_datetime(["2020-01-01", None, "2020-01-03", None, None, "2020-01-06", "2020-01-07"]))
    assert first_present(when, 2) == [pd.Timestamp("2020-01-01"), pd.Timestamp("2020-01-03")]
    assert first_present(when, 3) == [pd.Timestamp("2020-01-01"), pd.Timestamp("2020-01-03"), pd.Timestamp("2020-01-06")]
    assert first_present(pd.Series([None, float("nan"), 4, "x"], dtype=object), 1) == [4]
    assert first_present(pd.Series([None, None], dtype=object), 5) == [] == first_present(pd.Series([], dtype=object), 5)


def test_missing_means_none_nan_nat_and_na_but_not_empty_values():
    assert all(is_missing(v) for v in (None, float("nan"), np.float32("nan"), pd.NaT, pd.NA))
    assert not any(is_missing(v) for v in ("", b"", [], np.array([]), 0))


def test_integers_accept_exact_values_only():
    assert [to_int(v, "n") for v in (True, np.int8(-3), 4.0, " 12 ", "false")] == [1, -3, 4, 12, 0]
    with pytest.raises(RowError, match="invalid integer: column 'n'"):
        to_int(4.5, "n")


def test_multi_label_names_are_distinct_and_in_order():
    assert multi_label_names('["b", "a", "b"]', "tags") == ["b", "a"]
    with pytest.raises(RowError, match="empty label"):
        multi_label_names(["a", " "], "tags")
