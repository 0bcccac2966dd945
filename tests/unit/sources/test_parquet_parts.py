"""tfrecorder.sources.parquet_parts: one row group of one Parquet file (local or gs://), or a slice of a large one,
read as Arrow record batches."""
from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tfrecorder.sources.parquet_parts import (BATCH_ROWS, SKIPPED_ROW_COST, SLICE_ROWS, ParquetPart, file_parts,
                                              read_row_group_batches, row_group_parts)


def parquet_bytes(rows: int, row_group_size: int) -> bytes:
    sink = pa.BufferOutputStream()
    table = pa.table({"id": pa.array(range(rows), pa.int64()), "name": [f"n{i}" for i in range(rows)]})
    pq.write_table(table, sink, row_group_size=row_group_size)
    return sink.getvalue().to_pybytes()


def test_file_parts_are_every_row_group_in_order_and_plain_values():
    parts = file_parts("gs://b/t.parquet", 3)
    assert parts == (ParquetPart("gs://b/t.parquet", 0), ParquetPart("gs://b/t.parquet", 1),
                     ParquetPart("gs://b/t.parquet", 2))
    assert file_parts("a.parquet", 0) == ()
    assert sorted([ParquetPart("b", 0), ParquetPart("a", 1), ParquetPart("a", 0)]) == [
        ParquetPart("a", 0), ParquetPart("a", 1), ParquetPart("b", 0)]
    assert len({ParquetPart("a", 0), ParquetPart("a", 0)}) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        parts[0].row_group = 5


def test_one_row_group_is_read_in_batches_with_the_columns_asked_for(tmp_path):
    path = tmp_path / "t.parquet"
    path.write_bytes(parquet_bytes(10, row_group_size=4))
    second = list(read_row_group_batches(ParquetPart(str(path), 1)))
    assert [b.num_rows for b in second] == [4] and second[0].column("id").to_pylist() == [4, 5, 6, 7]
    small = list(read_row_group_batches(ParquetPart(str(path), 2), columns=["name"], batch_size=1))
    assert [b.to_pydict() for b in small] == [{"name": ["n8"]}, {"name": ["n9"]}]
    path.write_bytes(parquet_bytes(BATCH_ROWS + 1, row_group_size=BATCH_ROWS + 1))
    assert [b.num_rows for b in read_row_group_batches(ParquetPart(str(path), 0))] == [BATCH_ROWS, 1]


def test_a_gs_row_group_is_read_through_the_storage_layer(gcs):
    gcs.bucket("tfr-parquet-parts")
    gcs.upload("gs://tfr-parquet-parts/t.parquet", parquet_bytes(5, row_group_size=3))
    parts = file_parts("gs://tfr-parquet-parts/t.parquet", 2)
    assert [b.column("id").to_pylist() for part in parts for b in read_row_group_batches(part)] == [[0, 1, 2], [3, 4]]


@pytest.mark.parametrize("rows", [SLICE_ROWS + 2, 2 * SLICE_ROWS, 4 * SLICE_ROWS, 4 * SLICE_ROWS + 1])
def test_a_row_group_of_more_than_slice_rows_is_slices_that_cost_alike(rows):
    """As many slices as SLICE_ROWS-row slices need, back to back over the row group; each costs the rows it
    reads plus SKIPPED_ROW_COST for each one it decodes to skip, the same for every slice (to a row)."""
    parts = row_group_parts("t.parquet", 3, rows)
    assert len(parts) == -(-rows // SLICE_ROWS) and {(p.path, p.row_group) for p in parts} == {("t.parquet", 3)}
    assert [p.first_row for p in parts] == [0, *(p.first_row + p.rows for p in parts[:-1])]
    assert parts[-1].first_row + parts[-1].rows == rows
    costs = [SKIPPED_ROW_COST * p.first_row + p.rows for p in parts]
    assert max(costs) - min(costs) <= 1 and parts[0].rows > parts[-1].rows


def test_a_row_group_of_slice_rows_or_fewer_is_one_part():
    assert row_group_parts("t.parquet", 2, SLICE_ROWS) == (ParquetPart("t.parquet", 2),)
    assert row_group_parts("t.parquet", 0, 1) == (ParquetPart("t.parquet", 0),)


@pytest.mark.parametrize("batch_size", [1, 3, 4, 7, 50])
def test_slices_read_together_are_their_row_group_whatever_the_batch_size(tmp_path, batch_size):
    path = tmp_path / "t.parquet"
    path.write_bytes(parquet_bytes(40, row_group_size=17))  # row groups of 17, 17 and 6 rows
    whole = [i for b in read_row_group_batches(ParquetPart(str(path), 1), batch_size=batch_size)
             for i in b.column("id").to_pylist()]
    slices = [ParquetPart(str(path), 1, 0, 5), ParquetPart(str(path), 1, 5, 6), ParquetPart(str(path), 1, 11, None)]
    read = [list(read_row_group_batches(part, batch_size=batch_size)) for part in slices]
    assert [[i for b in batches for i in b.column("id").to_pylist()] for batches in read] == [
        whole[:5], whole[5:11], whole[11:]]
    assert whole == list(range(17, 34)) and all(0 < b.num_rows <= batch_size for batches in read for b in batches)


def test_a_row_groups_footer_settles_which_plain_columns_hold_missing_values(tmp_path):
    """Null counts settle plain columns; a list column only when it has no null slot at all; a float
    column never (its NaN is a missing value once read); columns not in the file are left out."""
    from tfrecorder.sources.parquet_parts import row_group_nulls

    table = pa.table({
        "n": pa.array([1, None, 3, 4]), "m": pa.array([1, 2, 3, 4]), "s": pa.array(["a", "b", None, "d"]),
        "t": pa.array(["a", "b", "c", "d"]).dictionary_encode(), "x": pa.array([0.5, 1.0, 2.0, 3.0]),
        "full": pa.array([[1.0], [2.0, 3.0], [4.0], [5.0]]), "empty": pa.array([[1.0], [], [4.0], [5.0]]),
        "none": pa.array([[1.0], None, [4.0], [5.0]]), "all_null": pa.nulls(4),
        "full.list": pa.array([None, 1, 2, 3])})  # a plain column named like the list column's leaf path
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=2)
    columns = [*table.column_names, "nowhere"]
    assert row_group_nulls(ParquetPart(str(path), 0), columns) == {
        "n": True, "m": False, "s": False, "t": False, "full": False, "full.list": True}  # all_null: read
    assert row_group_nulls(ParquetPart(str(path), 1, 1, 1), columns) == {  # a slice: its row group's facts
        "n": False, "m": False, "s": True, "t": False, "full": False, "empty": False, "none": False, "full.list": False}
