"""DataFrame → Arrow file staging: values read back (as workers read them: staged_rows) are exact."""
from __future__ import annotations

import datetime as dt
import io
import math

import numpy as np
import pandas as pd
import pyarrow as pa

from tfrecorder import Schema
from tfrecorder.sources.dataframe_staging import write_staged


def read_staged(source) -> pa.Table:
    return pa.ipc.open_file(source).read_all()


def staged(frame: pd.DataFrame, schema: Schema) -> dict[str, list]:
    buffer = io.BytesIO()
    write_staged(frame, schema, buffer)
    buffer.seek(0)
    return read_staged(buffer).to_pydict()


def test_every_dtype_reads_back_as_exact_python_values():
    frame = pd.DataFrame({
        "n": [2**63 - 1, -2**63], "b": [True, False], "nb": pd.array([None, True], dtype="boolean"),
        "ni": pd.array([None, 7], dtype="Int64"), "x": [np.nan, 0.1], "f32": np.array([0.1, 2], dtype=np.float32),
        "s": ["a,\"b\"\n\t", ""], "c": pd.Categorical(["u", None]),
        "t": pd.to_datetime(["2020-01-01 00:00:00.000000001", None], format="ISO8601"),
        "tz": pd.to_datetime(["2020-01-01", "1960-01-01"]).tz_localize("America/New_York"),
        "v": [np.array([np.nan, np.inf], dtype=np.float32), []], "w": [("a", ""), None], "k": [[1, 2], [3, 4]],
        "extra": [{"a": 1}, None],
    })
    rows = staged(frame, Schema.infer(frame.drop(columns="extra")))
    assert rows["n"] == [2**63 - 1, -2**63] and rows["b"] == [1, 0] and rows["nb"] == [None, 1] and rows["ni"] == [None, 7]
    assert rows["x"] == [None, 0.1] and rows["f32"] == [float(np.float32(0.1)), 2.0]
    assert rows["s"] == ["a,\"b\"\n\t", ""] and rows["c"] == ["u", None]
    assert rows["t"] == [1577836800_000000001, None]  # datetime64 columns: int64 nanoseconds, UTC
    assert rows["tz"] == [v.value for v in frame["tz"]]
    assert math.isnan(rows["v"][0][0]) and rows["v"][0][1] == math.inf and rows["v"][1] == []
    assert rows["w"] == [["a", ""], None] and rows["k"] == [[1, 2], [3, 4]] and rows["extra"] == ["{'a': 1}", None]


def test_string_dtype_columns_are_staged_from_their_own_buffers():
    frame = pd.DataFrame({"py": pd.array(["a", None, ""], dtype="string[python]"),
                          "arrow": pd.array(["é", "b", None], dtype="string[pyarrow]"),
                          "obj": pd.Series(["x", None, "z"], dtype=object), "nan": pd.Series(["x", np.nan, pd.NA], dtype=object),
                          "mixed": pd.Series(["x", 2, b"\xff"], dtype=object)})
    rows = staged(frame, Schema({name: "StringInput" for name in frame.columns}))
    assert rows == {"py": ["a", None, ""], "arrow": ["é", "b", None], "obj": ["x", None, "z"], "nan": ["x", None, None],
                    "mixed": [b"x", b"2", b"\xff"]}


def test_datetimes_beyond_nanoseconds_and_python_datetimes_are_staged_as_iso_text():
    frame = pd.DataFrame({"far": pd.Series(np.array(["2500-01-01", "1970-01-01"], dtype="datetime64[s]")),
                          "py": pd.Series([dt.datetime(2020, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=-3))), None], dtype=object)})
    rows = staged(frame, Schema({"far": "DatetimeInput", "py": "DatetimeInput"}))
    assert rows == {"far": ["2500-01-01T00:00:00", "1970-01-01T00:00:00"], "py": ["2020-01-01T00:00:00-03:00", None]}


def test_values_that_do_not_fit_the_declared_type_are_staged_as_text():
    frame = pd.DataFrame({"n": [1, "seven"], "v": [["a", 1.5], "oops"], "big": [np.uint64(2**64 - 1), np.uint64(1)]})
    rows = staged(frame, Schema({"n": "IntegerInput", "v": "FloatInput[]", "big": "IntegerInput"}))
    assert rows == {"n": ["1", "seven"], "v": ['["a", 1.5]', "oops"], "big": ["18446744073709551615", "1"]}


def test_columns_outside_the_schema_keep_numbers_datetimes_and_numeric_lists():
    """discarded.csv shows them by str(): kept in their type, they read back as values whose str() is the
    frame's own; other columns are staged as text."""
    frame = pd.DataFrame({
        "split": ["TRAIN", "TEST", "TRAIN"],
        "i8": np.array([1, -2, 3], dtype=np.int8), "u64": np.array([2**64 - 1, 0, 1], dtype=np.uint64),
        "ni": pd.array([None, 7, 8], dtype="Int64"), "flag": [True, False, True],
        "f32": np.array([0.1, np.nan, 2], dtype=np.float32),
        "when": pd.to_datetime(["2020-01-01 00:00:00.000000001", None, "1999-12-31"], format="ISO8601").tz_localize("Asia/Kolkata"),
        "vec": [np.array([np.nan, 1.5]), np.array([2.0]), np.array([], dtype=float)], "py": [[1, 2], [3], []],
        "far": pd.Series(np.array(["2500-01-01", "1970-01-01", "1970-01-02"], dtype="datetime64[s]")),
        "words": [["a"], ["b"], []], "mixed": [1, "x", None], "half": np.array([1, 2, 3], dtype=np.float16),
        "bools": [[True], [False], []],
    })
    buffer = io.BytesIO()
    write_staged(frame, Schema({"split": "SplitKey"}), buffer)
    table = read_staged(io.BytesIO(buffer.getvalue()))
    assert {name: str(table.schema.field(name).type) for name in table.column_names} == {
        "split": "string", "i8": "int8", "u64": "uint64", "ni": "int64", "flag": "bool", "f32": "float",
        "when": "timestamp[ns, tz=Asia/Kolkata]", "vec": "list<item: double>", "py": "list<item: int64>",
        "far": "string", "words": "string", "mixed": "string", "half": "string", "bools": "string"}
    rows = table.to_pydict()
    for name in ("i8", "u64", "ni", "flag", "f32", "when", "vec", "py"):
        values = [v.tolist() if isinstance(v, np.ndarray) else v for v in frame[name].astype(object)]
        assert [None if v is None else str(v) for v in rows[name]] == [
            None if not isinstance(v, list) and pd.isna(v) else str(v) for v in values], name
    assert rows["far"][0] == "2500-01-01 00:00:00" and rows["words"][0] == '["a"]' and rows["bools"][0] == "[true]"


def test_chunks_become_row_groups_and_a_late_misfit_restages_its_column_as_text(monkeypatch):
    from tfrecorder.sources import dataframe_staging

    monkeypatch.setattr(dataframe_staging, "MAX_ROW_GROUP_ROWS", 4)
    n = [*range(9), "seven", 11]  # the bad value only shows up in the last chunk
    frame = pd.DataFrame({"n": pd.Series(n, dtype=object), "s": ["a"] * 6 + [b"\xff"] * 5, "x": np.arange(11.0)})
    buffer = io.BytesIO()  # three chunks of at most 4 rows → four equal ones (balanced_count): 3, 3, 3 and 2 rows
    assert write_staged(frame, Schema({"n": "IntegerInput", "s": "StringInput", "x": "FloatInput"}), buffer) == 4
    buffer.seek(0)
    arrow = pa.ipc.open_file(buffer)
    assert [arrow.get_batch(i).num_rows for i in range(arrow.num_record_batches)] == [3, 3, 3, 2]
    rows = arrow.read_all().to_pydict()
    assert rows["n"] == [str(v) for v in n] and rows["x"] == list(np.arange(11.0))
    assert rows["s"] == [b"a"] * 6 + [b"\xff"] * 5  # text and bytes together: bytes throughout


def test_a_staged_file_is_hashed_as_written_even_when_a_late_misfit_restages_it(tmp_path, monkeypatch):
    """The digest naming a staged frame (its job's fingerprint) is the SHA-256 of the file's final bytes,
    also after a later chunk made a column text and the file was written again."""
    import hashlib

    from tfrecorder.sources import dataframe_staging

    monkeypatch.setattr(dataframe_staging, "MAX_ROW_GROUP_ROWS", 4)
    frame = pd.DataFrame({"n": pd.Series([*range(9), "seven", 11], dtype=object), "x": np.arange(11.0)})
    for schema in ({"n": "IntegerInput", "x": "FloatInput"}, {"n": "StringInput", "x": "FloatInput"}):
        staged = dataframe_staging.stage_scratch(frame, Schema(schema), str(tmp_path))
        data = open(staged.path, "rb").read()
        assert staged.row_groups == 4 and staged.digest() == hashlib.sha256(data).hexdigest()
        assert read_staged(staged.path).column("n").to_pylist() == [str(v) for v in frame["n"]]
        staged.discard()


def test_staging_a_frame_holds_two_chunks_at_most(tmp_path, monkeypatch):
    """Peak Arrow memory while staging stays near two row groups' worth (one written while the next is
    made), whatever the frame's size."""
    import pyarrow as pa

    from tfrecorder.sources import dataframe_staging

    monkeypatch.setattr(dataframe_staging, "ROW_GROUP_BYTES", 1024 * 1024)
    frame = pd.DataFrame({"i": np.arange(400_000), "s": [f"text {i}" for i in range(400_000)]})
    frame_bytes = int(frame.memory_usage(deep=True).sum())
    pool = pa.default_memory_pool()
    held = pool.bytes_allocated()  # pandas 3 keeps the frame's strings in Arrow memory itself
    peaks = []
    real = dataframe_staging._chunk_table

    def tracking(*args, **kwargs):
        table = real(*args, **kwargs)
        peaks.append(pool.bytes_allocated())
        return table

    monkeypatch.setattr(dataframe_staging, "_chunk_table", tracking)
    groups = dataframe_staging.stage_frame(frame, Schema.infer(frame), str(tmp_path / "rows.arrow"))
    assert groups > 5 and max(peaks) - held < frame_bytes * 0.7, (max(peaks) - held, frame_bytes)  # no full copy
    assert max(peaks) - peaks[1] < 2 * dataframe_staging.ROW_GROUP_BYTES, peaks  # flat from chunk to chunk
    assert read_staged(str(tmp_path / "rows.arrow")).num_rows == 400_000
