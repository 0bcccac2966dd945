"""tfrecorder.sources.parquet_files: which files a Parquet source names, what the driver reads of them (footers
and a sample), and the table-level errors raised before any work starts."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tfrecorder.sources import parquet_files
from tfrecorder.sources import parquet_source, source_registry
from tfrecorder.sources.parquet_parts import ParquetPart


def write(path, table: pa.Table, row_group_size: int = 3) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(table, path, row_group_size=row_group_size)
    return str(path)


def numbers(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "name": [f"n{i}" for i in range(n)]})


@pytest.fixture
def spark_export(tmp_path):
    """A directory like Spark writes: part files, a _SUCCESS marker, .crc checksums, a nested part."""
    root = tmp_path / "export"
    write(root / "part-00000.snappy.parquet", numbers(0, 7))
    write(root / "part-00001.snappy.parquet", numbers(7, 5))
    write(root / "more" / "part-00002.parquet", numbers(12, 1))
    (root / "_SUCCESS").write_text("")
    (root / ".part-00000.snappy.parquet.crc").write_bytes(b"crc")
    write(root / "_temporary" / "0" / "part-x.parquet", numbers(0, 1))
    (root / "README.txt").write_text("not data")
    return root


def test_a_directory_is_its_parquet_files_by_row_group(spark_export):
    source = parquet_files.open_parquet_files(str(spark_export))
    names = [os.path.relpath(f, spark_export) for f in source.files]
    assert names == ["more/part-00002.parquet", "part-00000.snappy.parquet", "part-00001.snappy.parquet"]
    assert source.rows == 13 and source.base_dir == str(spark_export)
    assert [(os.path.basename(p.path), p.row_group) for p in source.parts] == [
        ("part-00002.parquet", 0), ("part-00000.snappy.parquet", 0), ("part-00000.snappy.parquet", 1),
        ("part-00000.snappy.parquet", 2), ("part-00001.snappy.parquet", 0), ("part-00001.snappy.parquet", 1)]
    assert source.schema.names == ["id", "name"]


@pytest.mark.parametrize("pattern, expected", [
    ("export/*.parquet", ["part-00000.snappy.parquet", "part-00001.snappy.parquet"]),
    ("export/part-0000[01].snappy.parquet", ["part-00000.snappy.parquet", "part-00001.snappy.parquet"]),
    ("export/part-0000[!0]*", ["part-00001.snappy.parquet"]),
    ("export/part-?????.snappy.parquet", ["part-00000.snappy.parquet", "part-00001.snappy.parquet"]),
    ("export/**/*.parquet", ["more/part-00002.parquet", "part-00000.snappy.parquet", "part-00001.snappy.parquet"]),
    ("export/*/*.parquet", ["more/part-00002.parquet"]),
])
def test_globs_match_within_path_segments(spark_export, monkeypatch, pattern, expected):
    monkeypatch.chdir(spark_export.parent)
    files, base_dir = parquet_files.find_files(pattern)
    assert [os.path.relpath(f, spark_export) for f in files] == expected
    assert base_dir == str(spark_export)


def test_glob_regex_is_anchored_and_escapes_other_characters():
    regex = parquet_files.glob_regex("/d/a+b (1)/*.parquet")
    assert regex.match("/d/a+b (1)/x.parquet")
    assert not regex.match("/d/a+b (1)/x.parquet.crc") and not regex.match("/d/ab (1)/x.parquet")


def test_glob_root_stops_before_the_first_wildcard():
    assert parquet_files.glob_root("gs://b/data/*/x.parquet") == "gs://b/data"
    assert parquet_files.glob_root("gs://b/*.parquet") == "gs://b"
    assert parquet_files.glob_root("/data/x-*.parquet") == "/data"


def test_open_table_recognises_a_file_a_directory_and_a_glob(spark_export, monkeypatch):
    single = source_registry.open_table(str(spark_export / "part-00000.snappy.parquet"))
    assert isinstance(single, parquet_source.ParquetTable) and single.rows_estimate == 7 and single.base_dir == str(spark_export)
    assert list(single.sample["id"]) == list(range(7)) and single.columns == ["id", "name"]
    assert source_registry.open_table(str(spark_export)).rows_estimate == 13
    monkeypatch.chdir(spark_export)
    assert source_registry.open_table("part-*.parquet").rows_estimate == 12
    relative = source_registry.open_table("more")  # relative sources name absolute files (workers have another cwd)
    assert relative.files.files == (str(spark_export / "more" / "part-00002.parquet"),)
    assert relative.base_dir == str(spark_export / "more")


def test_sample_reads_only_the_first_rows(spark_export, monkeypatch):
    monkeypatch.setattr(parquet_source, "SAMPLE_ROWS", 4)
    table = source_registry.open_table(str(spark_export))
    assert list(table.sample["id"]) == [12, 0, 1, 2]


def _bytes_read() -> int:
    """Bytes this process has read through read(2) and the like (Linux: /proc/self/io's rchar)."""
    with open("/proc/self/io") as io_counts:
        return next(int(line.split()[1]) for line in io_counts if line.startswith("rchar:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="reads are counted by Linux's /proc/self/io")
def test_the_sample_reads_the_first_pages_of_a_large_row_group_not_all_of_it(tmp_path):
    rows = 2_000_000  # one row group of two columns of incompressible numbers, ≈32 MB (1 MB pages)
    numbers = pa.array(np.random.default_rng(0).random(rows))
    pq.write_table(pa.table({"x": numbers, "y": numbers}), tmp_path / "one-group.parquet", row_group_size=rows)
    source = parquet_files.open_parquet_files(str(tmp_path / "one-group.parquet"))
    size = os.path.getsize(tmp_path / "one-group.parquet")
    before = _bytes_read()
    sample = parquet_files.read_sample(source, 100)
    read = _bytes_read() - before
    assert list(sample["x"]) == numbers.to_pylist()[:100]
    assert read < size / 4, f"{read:,} bytes read of a {size:,}-byte file for a 100-row sample"


def test_files_that_disagree_on_a_type_are_one_clear_error(tmp_path):
    write(tmp_path / "d" / "a.parquet", numbers(0, 3))
    write(tmp_path / "d" / "b.parquet", pa.table({"id": pa.array([1.5]), "name": ["x"]}))
    with pytest.raises(ValueError) as error:
        source_registry.open_table(str(tmp_path / "d"))
    message = str(error.value)
    assert "disagree on column 'id'" in message and "int64" in message and "double" in message
    assert "b.parquet" in message and "\n" not in message


def test_files_that_disagree_on_columns_are_one_clear_error(tmp_path):
    write(tmp_path / "d" / "a.parquet", numbers(0, 3))
    write(tmp_path / "d" / "b.parquet", numbers(0, 3).rename_columns(["id", "title"]))
    with pytest.raises(ValueError, match=r"disagree on their columns: .*a.parquet has \['id', 'name'\], "
                                         r".*b.parquet has \['id', 'title'\]"):
        source_registry.open_table(str(tmp_path / "d"))


def test_duplicate_column_names_are_one_clear_error_naming_the_column(tmp_path):
    duplicated = pa.Table.from_arrays([pa.array(["TRAIN"]), pa.array([1]), pa.array([2])], names=["split", "x", "x"])
    path = write(tmp_path / "dup.parquet", duplicated)
    with pytest.raises(ValueError, match=r"duplicate column name\(s\) \['x'\]"):
        source_registry.open_table(path)


@pytest.mark.parametrize("kind", [pa.list_(pa.float32(), 0), pa.list_(pa.list_(pa.int64(), 0))],
                         ids=["fixed_size_list-0", "nested"])
def test_a_column_arrow_cannot_read_is_one_clear_error_naming_it(tmp_path, kind):
    """Arrow writes a fixed-size list of 0 elements but cannot read it back."""
    values = pa.array([[]] * 3 if pa.types.is_fixed_size_list(kind) else [[[]]] * 3, kind)
    path = write(tmp_path / "zero.parquet", pa.table({"split": ["TRAIN"] * 3, "id": [1, 2, 3], "vector": values}))
    with pytest.raises(ValueError, match=r"Parquet column 'vector' \(.*\) cannot be read"):
        source_registry.open_table(path)


def test_pandas_index_columns_large_offsets_and_timestamp_units_are_no_disagreement(tmp_path):
    write(tmp_path / "d" / "a.parquet", numbers(0, 3).append_column("when", pa.array([0, 1, 2], pa.timestamp("ns"))))
    pd.DataFrame({"id": [5, 7], "name": pd.array(["x", "y"], dtype=pd.ArrowDtype(pa.large_string())),
                  "when": pd.to_datetime(["2024-01-01", "2024-01-02"]).as_unit("us")},
                 index=[4, 9]).to_parquet(tmp_path / "d" / "b.parquet")
    table = source_registry.open_table(str(tmp_path / "d"))
    assert table.columns == ["id", "name", "when"] and table.rows_estimate == 5
    assert list(table.sample["name"]) == ["n0", "n1", "n2", "x", "y"]
    assert list(table.sample["when"])[-1] == pd.Timestamp("2024-01-02")


def test_nullability_and_file_metadata_may_differ(tmp_path):
    write(tmp_path / "d" / "a.parquet", numbers(0, 3).replace_schema_metadata({"writer": "a"}))
    required = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
    write(tmp_path / "d" / "b.parquet", numbers(3, 2).cast(required))
    assert source_registry.open_table(str(tmp_path / "d")).rows_estimate == 5


def test_empty_directory_unmatched_glob_and_unreadable_file_are_refused(tmp_path):
    os.makedirs(tmp_path / "empty")
    with pytest.raises(ValueError, match="holds no Parquet files and no images"):
        source_registry.open_table(str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="no files match"):
        source_registry.open_table(str(tmp_path / "nothing-*.parquet"))
    write(tmp_path / "x" / "a.parquet", numbers(0, 1))
    (tmp_path / "x" / "b.parquet").write_text("csv,text")
    with pytest.raises(ValueError, match="b.parquet is not a readable Parquet file"):
        source_registry.open_table(str(tmp_path / "x" / "*.parquet"))
    footer = bytearray((tmp_path / "x" / "a.parquet").read_bytes())
    footer[-60:-8] = b"A" * 52  # a damaged footer (pyarrow raises an OSError without errno for it)
    (tmp_path / "x" / "b.parquet").write_bytes(bytes(footer))
    with pytest.raises(ValueError, match="b.parquet is not a readable Parquet file: Couldn't deserialize"):
        source_registry.open_table(str(tmp_path / "x"))


def test_a_directory_of_parquet_files_only_in_hidden_folders_is_not_a_parquet_source(tmp_path):
    write(tmp_path / "d" / "_temporary" / "a.parquet", numbers(0, 1))
    with pytest.raises(ValueError, match="holds no Parquet files"):
        source_registry.open_table(str(tmp_path / "d"))


def test_empty_files_are_no_parts_and_all_null_columns_take_the_other_files_type(tmp_path):
    write(tmp_path / "d" / "a.parquet", numbers(0, 0))  # no rows: its "name" column has Arrow type null
    write(tmp_path / "d" / "b.parquet", numbers(0, 2))
    write(tmp_path / "d" / "c.parquet", pa.table({"id": [5], "name": pa.nulls(1)}))
    source = parquet_files.open_parquet_files(str(tmp_path / "d"))
    assert source.parts == (ParquetPart(str(tmp_path / "d" / "b.parquet"), 0),
                            ParquetPart(str(tmp_path / "d" / "c.parquet"), 0)) and source.rows == 3
    assert source.schema.field("name").type == pa.string()
    assert list(parquet_files.read_sample(source, 10)["name"].fillna("-")) == ["n0", "n1", "-"]


def test_an_unnamed_pandas_index_is_not_a_column(tmp_path):
    frame = pd.DataFrame({"id": range(6)}).query("id % 3 != 1")  # an irregular index: stored as a column
    frame.to_parquet(tmp_path / "t.parquet")
    assert "__index_level_0__" in pq.read_schema(tmp_path / "t.parquet").names
    table = source_registry.open_table(str(tmp_path / "t.parquet"))
    assert table.columns == ["id"] and list(table.sample.columns) == ["id"]


def test_gcs_directory_and_glob(gcs):
    gcs.bucket("tfr-parquet-source")
    for name, table in (("a.parquet", numbers(0, 4)), ("b.parquet", numbers(4, 2))):
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, row_group_size=3)
        gcs.upload(f"gs://tfr-parquet-source/t/{name}", sink.getvalue().to_pybytes())
    gcs.upload("gs://tfr-parquet-source/t/_SUCCESS", b"")
    for source in ("gs://tfr-parquet-source/t", "gs://tfr-parquet-source/t/", "gs://tfr-parquet-source/t/*.parquet"):
        table = source_registry.open_table(source)
        assert isinstance(table, parquet_source.ParquetTable) and table.rows_estimate == 6 and table.base_dir == "gs://tfr-parquet-source/t"
        assert [(p.path.rsplit("/", 1)[1], p.row_group) for p in table.files.parts] == [
            ("a.parquet", 0), ("a.parquet", 1), ("b.parquet", 0)]
    single = source_registry.open_table("gs://tfr-parquet-source/t/b.parquet")
    assert list(single.sample["id"]) == [4, 5]
    with pytest.raises(ValueError, match="no files match"):
        source_registry.open_table("gs://tfr-parquet-source/t/*.parq")
