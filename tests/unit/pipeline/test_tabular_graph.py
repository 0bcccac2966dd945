"""beam_pipelines.graphs.tabular_graph: image-free tables through the columnar graph give the row graph's job exactly.

Each case converts the same table twice, once through the columnar graph and once through the row
graph (`is_tabular` switched off), and compares everything a user sees: metadata.json, the parsed
records of each split, discarded.csv. Bundle replay (direct_runner_bundle_repeat=1) must not change
the columnar graph's output either.
"""
from __future__ import annotations

import csv
import json
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tfrecorder
from beam_pipelines.graphs import tabular_graph
from support.readers import read_job
from tfrecorder.format import file_names
from tfrecorder.format.metadata_file import JobMetadata
from tfrecorder.sources.csv_source import CsvRows
from tfrecorder.sources.parquet_source import ParquetRows

REPLAY = {"direct_runner_bundle_repeat": 1}
SCHEMA = {"price": "DoubleInput"}


def table(rows: int = 120) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    frame = pd.DataFrame({
        "split": rng.choice(["TRAIN", "VALIDATION", "TEST", "UNASSIGNED", ""], rows),
        "id": np.arange(rows, dtype=np.int64) - 60,
        "count": pd.array([None if i % 9 == 0 else i * 10**12 for i in range(rows)], dtype="Int64"),
        "score": np.where(np.arange(rows) % 11 == 0, np.nan, rng.normal(size=rows)),
        "price": rng.normal(size=rows) * 1e6,
        "flag": rng.random(rows) > 0.5,
        "name": [["", "ünïcødé ✓", "a,b", 'say "hi"', "line\nbreak"][i % 5] for i in range(rows)],
        "naive": pd.to_datetime(rng.integers(0, 2 * 10**18, rows)).where(rng.random(rows) > 0.1),
        "aware": pd.to_datetime(rng.integers(0, 2 * 10**18, rows), utc=True).tz_convert("Asia/Tokyo"),
        "vec": list(rng.normal(size=(rows, 3))),
        "tags": [list(range(i % 4)) for i in range(rows)],
        "kind": pd.Categorical(rng.choice(["x", "y"], rows)),
        "label": rng.choice(["cat", "dog", "fox"], rows),
    })
    frame.loc[5, "split"] = "HOLDOUT"  # discarded: unknown split
    frame.loc[8, "label"] = " "  # discarded: empty label
    frame.loc[frame["split"].isin(["VALIDATION", "TEST"]) & (frame["label"] == "fox"), "label"] = "owl"  # unknown
    return frame


def convert(source, out: Path, row_graph: bool, monkeypatch, **options) -> str:
    with monkeypatch.context() as patch:
        if row_graph:
            patch.setattr(tabular_graph, "is_tabular", lambda config: False)
        result = tfrecorder.convert(source, str(out), schema=_schema(source), progress=False, **options)
    return result["tfrecord_dir"]


def _schema(source):
    frame = source if isinstance(source, pd.DataFrame) else None
    if frame is None:
        return None
    from tfrecorder.core.schema import infer_schema

    return {**infer_schema(frame).to_json(), **SCHEMA}


def job_view(job: str) -> dict:
    """What a user sees of a job, independent of record order within a split."""
    metadata = JobMetadata.read(job).document
    metadata = {k: v for k, v in metadata.items() if k not in ("job_name", "created_utc", "elapsed_seconds")}
    metadata["splits"] = {split: {k: v for k, v in info.items() if k != "shards"}  # pieces may cut differently
                          for split, info in metadata["splits"].items()}
    records = {split: Counter(json.dumps(r, sort_keys=True, default=repr) for r in found)
               for split, found in read_job(job).items()}
    with open(os.path.join(job, file_names.DISCARD_FILE), newline="") as stream:
        discarded = Counter(tuple(row) for row in csv.reader(stream))
    return {"metadata": metadata, "records": records, "discarded": discarded}


def test_dataframe_columnar_graph_equals_row_graph(tmp_path, monkeypatch):
    frame = table()
    columnar_job = convert(frame, tmp_path / "columnar", False, monkeypatch)
    row_job = convert(frame, tmp_path / "rows", True, monkeypatch)
    found, expected = job_view(columnar_job), job_view(row_job)
    assert found == expected
    assert expected["metadata"]["discard_reasons"]  # the table does discard rows
    assert sum(info["unknown_labels"] for info in expected["metadata"]["splits"].values())  # and has unknown labels


def test_csv_columnar_graph_equals_row_graph_with_malformed_lines(tmp_path, monkeypatch):
    frame = table(300)
    frame["vec"] = [json.dumps(v.tolist()) for v in frame["vec"]]
    frame["tags"] = [json.dumps(v) for v in frame["tags"]]
    path = tmp_path / "table.csv"
    text = frame.to_csv(index=False)
    lines = text.splitlines(keepends=True)
    path.write_text("".join(lines[:50]) + "TRAIN,1,2\n" + "".join(lines[50:]) + "\nTEST,only,three\n")
    columnar_job = convert(str(path), tmp_path / "columnar", False, monkeypatch)
    row_job = convert(str(path), tmp_path / "rows", True, monkeypatch)
    found, expected = job_view(columnar_job), job_view(row_job)
    assert found == expected
    malformed = [row[-1] for row in expected["discarded"] if row[-1].startswith("malformed CSV row: line ")]
    assert len(malformed) == 2, expected["discarded"]


@pytest.mark.parametrize("encoding, bad", [("utf-8", b"\xff"), ("cp1252", b"\x81"),
                                           ("utf-16", "\ud800".encode("utf-16-le", "surrogatepass"))])
def test_invalid_text_anywhere_is_discarded_alike_by_both_graphs(tmp_path, monkeypatch, encoding, bad):
    """Bytes invalid in the encoding inside the driver's head and far past it (in parallel slices where the
    encoding allows): both graphs discard those rows with their lines and convert every other one."""
    frame = table(600).drop(columns=["vec", "tags"])
    frame["name"] = frame["name"].str.replace("✓", "€")  # in cp1252 too
    frame["id"] = frame["id"].astype(object)
    chosen = [10, 300, 590]  # inside the driver's few-KB head, and past it
    frame.loc[chosen, "id"] = [f"~~{value}" for value in frame.loc[chosen, "id"]]
    marker = "~~".encode(encoding.replace("utf-16", "utf-16-le"))  # without a byte-order mark
    path = tmp_path / "table.csv"
    path.write_bytes(frame.to_csv(index=False).encode(encoding).replace(marker, bad))
    monkeypatch.setattr("tfrecorder.sources.csv_slicing.RANGE_BYTES", 4 * 1024)
    monkeypatch.setattr("tfrecorder.sources.csv_source.HEAD_STEP_BYTES", 4 * 1024)
    monkeypatch.setattr("tfrecorder.sources.csv_source.SAMPLE_ROWS", 20)
    columnar_job = convert(str(path), tmp_path / "columnar", False, monkeypatch, encoding=encoding)
    row_job = convert(str(path), tmp_path / "rows", True, monkeypatch, encoding=encoding)
    found, expected = job_view(columnar_job), job_view(row_job)
    assert found == expected
    invalid = sorted((row[-1] for row in expected["discarded"] if row[-1].startswith("invalid text: ")),
                     key=lambda reason: int(reason.split()[3].rstrip(":")))
    assert [reason.split(": ")[1] for reason in invalid] == [f"line {i + 2}" for i in chosen]
    assert all(reason.endswith(f"in column 'id' are not valid {encoding}") for reason in invalid), invalid
    assert expected["metadata"]["rows_in"] == 600


def csv_in_small_slices(tmp_path: Path, monkeypatch) -> Path:
    """`table(2000)` as a CSV (its lists as JSON text), read in slices of 16 KB."""
    frame = table(2000)
    frame["vec"] = [json.dumps(v.tolist()) for v in frame["vec"]]
    frame["tags"] = [json.dumps(v) for v in frame["tags"]]
    path = tmp_path / "table.csv"
    frame.to_csv(path, index=False)
    monkeypatch.setattr("tfrecorder.sources.csv_slicing.RANGE_BYTES", 16 * 1024)
    return path


def test_small_csv_slices_and_pieces_roll_over(tmp_path, monkeypatch):
    """Many CSV slices (parsed in parallel parts) and pieces capped at a few KB: same job as the row graph."""
    path = csv_in_small_slices(tmp_path, monkeypatch)
    columnar_job = convert(str(path), tmp_path / "columnar", False, monkeypatch, max_shard_bytes=20_000)
    row_job = convert(str(path), tmp_path / "rows", True, monkeypatch, max_shard_bytes=20_000)
    assert job_view(columnar_job) == job_view(row_job)
    metadata = JobMetadata.read(columnar_job).document
    assert len(metadata["splits"]["TRAIN"]["shards"]) > 3
    source = tfrecorder.data_source(columnar_job, "train")  # index files locate every record
    assert len(source) == metadata["splits"]["TRAIN"]["records"] and source[len(source) - 1]["id"] is not None


def test_the_count_pass_parse_of_each_csv_slice_serves_the_encode_pass(tmp_path, monkeypatch):
    """A local job keeps each slice's parsed table from the count pass for the encode pass (kept_tables):
    no slice is parsed twice, and the job is the one that parses every slice in both passes, also when
    bundles are replayed (a replayed encode finds its table taken and parses the slice)."""
    from tfrecorder.sources import csv_source, kept_tables

    path = csv_in_small_slices(tmp_path, monkeypatch)
    monkeypatch.setattr(kept_tables, "KEPT_MIN_BYTES", 1)
    parses = tmp_path / "parses.log"
    parse = csv_source.csv_bytes_batches

    def logged(data, *args, **kwargs):  # the job's processes are forked: each appends its own lines
        with open(parses, "a") as log:
            log.write(f"{len(data)} {hash(bytes(data[:64]))}\n")
        return parse(data, *args, **kwargs)

    monkeypatch.setattr(csv_source, "csv_bytes_batches", logged)

    def parsed(name: str, **options) -> tuple[dict, Counter]:
        parses.write_text("")
        job = convert(str(path), tmp_path / name, False, monkeypatch, **options)
        return job_view(job), Counter(parses.read_text().split("\n")[:-1])

    kept, once = parsed("kept")
    monkeypatch.setattr(kept_tables, "KEPT_BYTES", 0)
    reparsed, twice = parsed("reparsed")
    assert kept == reparsed
    assert set(once.values()) == {1} and set(once) == set(twice)  # (a count pass's wrong guess of a part: once)
    assert sum(twice.values()) - sum(once.values()) == sum(count == 2 for count in twice.values()) > 8  # encoded
    monkeypatch.setattr(kept_tables, "KEPT_BYTES", 1 << 30)
    replayed, _ = parsed("replayed", dataflow_options=REPLAY)
    assert replayed == kept


def test_bundle_replay_changes_nothing(tmp_path, monkeypatch):
    frame = table()
    once = convert(frame, tmp_path / "once", False, monkeypatch)
    replayed = convert(frame, tmp_path / "replayed", False, monkeypatch, dataflow_options=REPLAY)
    assert job_view(replayed) == job_view(once)
    assert sorted(os.listdir(replayed)) == sorted(os.listdir(once))
    assert not [name for name in os.listdir(tmp_path / "replayed") if name.startswith(".")]


def test_image_tables_keep_the_row_graph():
    from tfrecorder.options.job_config import JobConfig
    from tfrecorder.core.schema import Schema

    base = dict(columns=("image_uri", "label"), base_dir="", final_dir="f", temp_dir="t",
                job_name="j", runner="DirectRunner", split_ratios=(0.8, 0.1, 0.1), num_shards=0,
                max_shard_bytes=1, compression=None, image_size=None, validate="decode")
    assert not tabular_graph.is_tabular(JobConfig(source=CsvRows("x", 100, 10), schema=Schema({"image_uri": "ImageUri", "label": "StringLabel"}),
                                            **base))
    assert tabular_graph.is_tabular(JobConfig(source=ParquetRows(()), schema=Schema({"x": "IntegerInput", "label": "StringLabel"}),
                                        **base))
