"""convert() of Parquet sources end to end (DirectRunner, TensorFlow reading the records back): a file
with several row groups, a directory and a glob of files give the same records, metadata and discards
as converting the same data as a DataFrame; gs:// through the emulator; the CLI; bundle replay."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tfrecorder
from support import imagegen
from support.readers import read_job

N = 90
ROW_GROUP_ROWS = 8
SAME_METADATA = ("schema", "features", "vocabularies", "rows_in", "records_written", "discarded", "discard_reasons",
                 "compression", "validate", "images")


def mixed_frame(n: int = N) -> pd.DataFrame:
    """Every structured kind, with nulls, a bad split, missing labels and a fixed and a variable list."""
    when = pd.Series(pd.to_datetime(np.arange(n) * 3_600_123_456_789 + 10**18, unit="ns"))
    return pd.DataFrame({
        "id": np.arange(n, dtype=np.int64),
        "split": [("TRAIN", "VALIDATION", "TEST", "UNASSIGNED", "TRAIN", "train", "bogus")[i % 7] for i in range(n)],
        "count": pd.array([i * 3 if i % 5 else None for i in range(n)], dtype="Int64"),
        "price": np.linspace(-2, 7, n).astype(np.float32),
        "flag": [bool(i % 3) for i in range(n)],
        "local_time": when.dt.tz_localize("UTC").dt.tz_convert("Asia/Kolkata").where(np.arange(n) % 11 != 0),
        "naive_time": when,
        "vector": [[float(i), i / 3, -1.0] for i in range(n)],
        "tags": [None if i % 9 == 0 else ["a", "b, c", "ü"][: i % 4] for i in range(n)],
        "colour": pd.Categorical([("red", "green", None)[i % 3] for i in range(n)]),
        "note": [None if i % 4 == 0 else f"note {i}" for i in range(n)],
        "label": [None if i % 13 == 0 else ("cat", "dog", "fox")[i % 3] for i in range(n)],
    })


def as_arrow(frame: pd.DataFrame) -> pa.Table:
    """The frame as pyarrow writes it, with the fixed-length list as Arrow's fixed_size_list."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    index = table.schema.get_field_index("vector")
    return table.set_column(index, "vector", table.column("vector").cast(pa.list_(pa.float64(), 3)))


def write_files(directory, table: pa.Table, pieces: int = 3) -> list[str]:
    os.makedirs(directory, exist_ok=True)
    paths, step = [], -(-table.num_rows // pieces)
    for i in range(pieces):
        path = os.path.join(directory, f"part-{i:05d}.parquet")
        pq.write_table(table.slice(i * step, step), path, row_group_size=ROW_GROUP_ROWS)
        paths.append(path)
    return paths


def by_id(job: dict[str, list[dict]]) -> dict[str, list[dict]]:
    return {split: sorted(records, key=lambda r: r["id"]) for split, records in job.items()}


def discarded_rows(tfrecord_dir: str) -> list[list[str]]:
    with open(os.path.join(tfrecord_dir, "discarded.csv"), newline="", encoding="utf-8") as stream:
        return sorted(csv.reader(stream))


def outcome(result) -> tuple[dict, dict, list]:
    directory = result["tfrecord_dir"]
    metadata = json.load(open(os.path.join(directory, "metadata.json")))
    kept = {key: metadata.get(key) for key in SAME_METADATA}
    kept["splits"] = {split: info["records"] for split, info in metadata["splits"].items()}
    return kept, by_id(read_job(directory)), discarded_rows(directory)


@pytest.fixture(scope="module")
def frame_result(tmp_path_factory):
    return outcome(tfrecorder.convert(mixed_frame(), tmp_path_factory.mktemp("frame"), progress=False))


@pytest.fixture(scope="module")
def parquet_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("parquet") / "table"
    write_files(directory, as_arrow(mixed_frame()))
    (directory / "_SUCCESS").write_text("")
    return directory


def test_a_parquet_file_converts_like_the_same_dataframe(frame_result, tmp_path):
    path = str(tmp_path / "table.parquet")
    pq.write_table(as_arrow(mixed_frame()), path, row_group_size=ROW_GROUP_ROWS)
    assert pq.ParquetFile(path).num_row_groups == 12
    result = tfrecorder.convert(path, tmp_path / "out", progress=False)
    metadata, records, discards = outcome(result)
    assert metadata == frame_result[0]
    assert records == frame_result[1]
    assert discards == frame_result[2]
    # The contract the comparison relies on, spelled out once.
    assert metadata["schema"] == {
        "id": "IntegerInput", "split": "SplitKey", "count": "IntegerInput", "price": "FloatInput",
        "flag": "IntegerInput", "local_time": "DatetimeInput", "naive_time": "DatetimeInput",
        "vector": "FloatInput[3]", "tags": "StringInput[]", "colour": "StringInput", "note": "StringInput",
        "label": "StringLabel"}
    assert metadata["discard_reasons"] == {"unknown split": 12, "empty label": 6}
    assert {name for name, spec in metadata["features"].items() if spec["allow_missing"]} == {
        "count", "local_time", "tags", "colour", "note"}
    train = {record["id"]: record for record in records["TRAIN"]}
    assert train[11]["local_time_missing"] and train[11]["vector"] == pytest.approx([11.0, 11 / 3, -1.0])
    assert train[4]["naive_time"] == train[4]["local_time"] == 10**18 + 4 * 3_600_123_456_789
    assert train[4]["tags"] == [] and train[4]["count"] == 12 and train[4]["colour"] == b"green"


def test_a_directory_and_a_glob_of_files_convert_like_the_same_dataframe(frame_result, parquet_dir, tmp_path):
    for source in (parquet_dir, str(parquet_dir / "part-*.parquet")):
        assert outcome(tfrecorder.convert(source, tmp_path / "out", progress=False)) == frame_result


def test_explicit_schema_overrides_arrow_types_like_for_a_dataframe(parquet_dir, tmp_path):
    schema = {"id": "IntegerInput", "split": "SplitKey", "price": "DoubleInput", "naive_time": "StringInput",
              "vector": "DoubleInput[]", "flag": "StringInput", "colour": "StringLabel", "label": "StringLabel"}
    from_frame = tfrecorder.convert(mixed_frame(), tmp_path / "a", schema=schema, progress=False)
    from_files = tfrecorder.convert(parquet_dir, tmp_path / "b", schema=schema, progress=False)
    assert outcome(from_files) == outcome(from_frame)
    metadata = outcome(from_files)[0]
    frame = mixed_frame()
    no_label = (frame["split"] != "bogus") & (frame["colour"].isna() | frame["label"].isna())
    assert metadata["discard_reasons"]["empty label"] == no_label.sum() > 6 and metadata["schema"] == schema
    assert metadata["vocabularies"]["colour"] == ["green", "red"]


def test_columns_outside_the_schema_show_in_discarded_csv_as_the_frame_holds_them(parquet_dir, tmp_path):
    """They keep their numbers, datetimes and lists through the pipeline (no text per row): discarded.csv
    shows str() of each value, the same from the frame and from its Parquet files."""
    schema = {"id": "IntegerInput", "split": "SplitKey", "label": "StringLabel"}
    from_frame = tfrecorder.convert(mixed_frame(), tmp_path / "a", schema=schema, progress=False)
    from_files = tfrecorder.convert(parquet_dir, tmp_path / "b", schema=schema, progress=False)
    assert outcome(from_files) == outcome(from_frame)
    with open(os.path.join(from_frame["tfrecord_dir"], "discarded.csv"), newline="", encoding="utf-8") as stream:
        shown = {int(row["id"]): row for row in csv.DictReader(stream)}
    frame = mixed_frame().astype(object)
    assert len(shown) == outcome(from_frame)[0]["discarded"] > 10
    for column in ("count", "price", "flag", "local_time", "naive_time", "vector", "colour", "note"):
        expected = ["" if value is None or not isinstance(value, list) and pd.isna(value) else str(value)
                    for value in frame.loc[sorted(shown), column]]
        assert [shown[i][column] for i in sorted(shown)] == expected, column


def test_an_explicit_schema_that_does_not_fit_is_refused_before_work(parquet_dir, tmp_path):
    with pytest.raises(ValueError, match="column 'colour' is declared IntegerInput but holds 'red'"):
        tfrecorder.convert(parquet_dir, tmp_path / "out", schema={"split": "SplitKey", "colour": "IntegerInput"})
    assert not os.path.exists(tmp_path / "out") or os.listdir(tmp_path / "out") == []


def test_bundle_replay_gives_the_same_records_and_accounting(frame_result, parquet_dir, tmp_path):
    result = tfrecorder.convert(parquet_dir, tmp_path / "out", progress=False,
                                dataflow_options={"direct_runner_bundle_repeat": 1})
    assert outcome(result) == frame_result


def test_image_uris_are_resolved_against_the_files_directory(tmp_path):
    images = imagegen.write_files(tmp_path / "table" / "img", {
        "a.jpg": imagegen.odd_images()["rgb.jpg"][0], "b.png": imagegen.odd_images()["gray.png"][0]})
    table = pa.table({"split": ["TRAIN", "TRAIN", "TEST", "TRAIN"],
                      "image_uri": ["img/a.jpg", str(images["b.png"]), "img/b.png", "img/missing.jpg"],
                      "label": pa.array(["cat", "dog", "cat", "dog"]).dictionary_encode()})
    write_files(tmp_path / "table", table, pieces=2)
    result = tfrecorder.convert(str(tmp_path / "table" / "*.parquet"), tmp_path / "out", progress=False)
    assert result["discard_reasons"] == {"missing file": 1}
    records = read_job(result["tfrecord_dir"])
    assert sorted(r["image_uri"] for r in records["TRAIN"]) == [str(images["b.png"]).encode(), b"img/a.jpg"]
    assert {r["image_format"] for r in records["TRAIN"] + records["TEST"]} == {b"jpeg", b"png"}


def test_timestamps_beyond_nanoseconds_and_huge_unsigned_ints_are_row_discards(tmp_path):
    import datetime as dt

    table = pa.table({"split": ["TRAIN"] * 3,
                      "when": pa.array([dt.datetime(2020, 1, 1), dt.datetime(3000, 1, 1), None], pa.timestamp("us")),
                      "big": pa.array([1, 2, 2**64 - 1], pa.uint64())})
    pq.write_table(table, tmp_path / "t.parquet")
    result = tfrecorder.convert(str(tmp_path / "t.parquet"), tmp_path / "out", progress=False)
    assert result["discard_reasons"] == {"invalid datetime": 1, "integer out of int64 range": 1}
    (record,) = read_job(result["tfrecord_dir"])["TRAIN"]
    assert record["when"] == pd.Timestamp("2020-01-01").value and record["big"] == 1


def test_gcs_directory_converts_like_the_local_one(gcs, frame_result, parquet_dir, tmp_path):
    gcs.bucket("tfr-parquet-convert")
    for name in sorted(os.listdir(parquet_dir)):
        gcs.upload(f"gs://tfr-parquet-convert/table/{name}", (parquet_dir / name).read_bytes())
    result = tfrecorder.convert("gs://tfr-parquet-convert/table/", tmp_path / "out", progress=False)
    assert outcome(result) == frame_result


def test_cli_converts_a_parquet_directory_and_refuses_disagreeing_files_in_one_line(parquet_dir, tmp_path):
    run = lambda *args: subprocess.run([sys.executable, "-m", "tfrecorder", "convert", *args], capture_output=True,
                                       text=True, timeout=300)
    done = run("--source", str(parquet_dir), "--output_dir", str(tmp_path / "out"), "--validate", "header")
    assert done.returncode == 0, done.stderr
    assert "rows in: 90" in done.stdout and "discarded: 18" in done.stdout
    bad = tmp_path / "bad"
    write_files(bad, pa.table({"id": [1, 2]}), pieces=1)
    pq.write_table(pa.table({"id": ["x"]}), bad / "other.parquet")
    done = run("--source", str(bad), "--output_dir", str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "disagree on column 'id'" in done.stderr
