"""tfrecorder.sources.parquet_source: schema from Arrow types, row groups read as conformed rows and batches."""
from __future__ import annotations

import pickle

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tfrecorder.core.schema import Schema
from tfrecorder.sources import parquet_source

DAY = 86_400 * 10**9


@pytest.fixture
def parquet(tmp_path) -> str:
    table = pa.table({
        "id": pa.array([1, None, 3], pa.int64()),
        "score": pa.array([1.5, float("nan"), None]),
        "when": pa.array([0, DAY, None], pa.timestamp("ns")),
        "label": pa.array([1, 2, 1], pa.int64()),
        "tags": pa.array([[1, 2], [], None], pa.list_(pa.int64())),
        "kind": pa.array(["x", "y", "x"]).dictionary_encode(),
        "image_uri": ["a.jpg", "b.jpg", "c.jpg"],
    })
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=2)
    return str(tmp_path / "t.parquet")


def test_the_schema_comes_from_the_arrow_types_not_from_pandas(parquet):
    table = parquet_source.open_parquet(parquet)
    assert table.infer_schema().to_json() == {
        "id": "IntegerInput",  # pandas' sample holds it as float64 (it has a null)
        "score": "FloatInput", "when": "DatetimeInput", "label": "IntegerLabel", "tags": "IntegerInput[]",
        "kind": "StringInput", "image_uri": "ImageUri"}
    assert str(table.sample["id"].dtype) == "float64"


def test_the_table_is_its_footers_and_first_rows(parquet, tmp_path, monkeypatch):
    monkeypatch.setattr(parquet_source, "SAMPLE_ROWS", 2)
    table = parquet_source.open_parquet(parquet)
    assert (table.rows_estimate, table.rows_estimated, len(table.sample), table.base_dir) == (3, False, 2, str(tmp_path))
    assert table.worker_files() == [parquet] and table.default_schema() is None
    assert table.rows_for_driver_check() is None  # the pipeline checks the table


def test_each_row_group_is_a_part_read_as_conformed_rows(parquet):
    table = parquet_source.open_parquet(parquet)
    schema = table.infer_schema()
    rows = pickle.loads(pickle.dumps(table.row_source(schema, "/unused")))
    parts = rows.known_parts()
    assert [(part.path, part.row_group) for part in parts] == [(parquet, 0), (parquet, 1)] == [
        (part.path, part.row_group) for part in rows.plan_parts([])]
    assert rows.scan_units() == [] and rows.reads_batches
    assert [row for part in parts for row in rows.read_part(part, table.columns, schema)] == [
        {"id": 1, "score": 1.5, "when": 0, "label": 1, "tags": [1, 2], "kind": "x", "image_uri": "a.jpg"},
        {"id": None, "score": None, "when": DAY, "label": 2, "tags": [], "kind": "y", "image_uri": "b.jpg"},  # NaN: missing
        {"id": 3, "score": None, "when": None, "label": 1, "tags": None, "kind": "x", "image_uri": "c.jpg"}]


def test_values_follow_the_callers_roles_and_only_the_asked_columns_are_read(parquet):
    rows = parquet_source.open_parquet(parquet).row_source(Schema({}), "")
    first = rows.known_parts()[0]
    given = Schema({"id": "IntegerInput", "label": "StringLabel"})
    assert list(rows.read_part(first, ["id", "label"], given)) == [{"id": 1, "label": "1"}, {"id": None, "label": "2"}]
    batches = list(rows.read_batches(first, ["id", "score"], Schema({"id": "IntegerInput", "score": "FloatInput"}), 1))
    assert [batch.to_pylist() for batch in batches] == [[{"id": 1, "score": 1.5}], [{"id": None, "score": None}]]
    assert batches[0].schema == pa.schema([("id", pa.int64()), ("score", pa.float64())])


def test_rows_of_batch_conforms_a_batch_as_a_staged_frame_holds_it():
    batch = pa.RecordBatch.from_pydict({"n": pa.array([1.0, float("nan")]), "tag": pa.array([7, 8])})
    assert parquet_source.rows_of_batch(batch, Schema({"n": "IntegerInput"})) == [{"n": 1, "tag": 7}, {"n": None, "tag": 8}]
    with pytest.raises(NotImplementedError):
        parquet_source.ParquetRows(()).scan(0)
