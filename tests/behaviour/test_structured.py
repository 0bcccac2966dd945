"""Structured (non-image) tables end to end on the DirectRunner: inference, explicit schemas, CSV + CLI."""
from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import tfrecorder
from support.readers import read_job

TEXTS = ["plain", "comma, \"quoted\"", "new\nline\ttab", "ünïcødé ✓", ""]


@pytest.fixture(scope="module")
def mixed() -> pd.DataFrame:
    n = len(TEXTS)
    return pd.DataFrame({
        "id": range(n),
        "count": [0, 2**63 - 1, -2**63, 7, -1],
        "visits": pd.array([1, None, 3, None, 5], dtype="Int64"),
        "score": [0.5, np.nan, -1e30, 3.25, np.inf],
        "active": [True, False, True, True, False],
        "note": TEXTS,
        "colour": pd.Categorical(["red", None, "blue", "red", "blue"]),
        "seen": pd.to_datetime(["2020-01-01 12:00:00.123456789", None, "1970-01-01", "1677-09-22", "2262-04-10"], format="ISO8601"),
        "seen_tz": pd.to_datetime(["2021-03-28 01:59:59"] * n).tz_localize("Europe/Berlin"),
        "box": [np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32)] * n,
        "embedding": [[np.nan, np.inf], [], [-np.inf], [1.5, 2.5, 3.5], None],
        "tags": [["a", ""], ["b, c"], [], ["ü"], ["x", "y", "z"]],
    })


@pytest.fixture(scope="module")
def mixed_converted(mixed, tmp_path_factory):
    return tfrecorder.convert(mixed, tmp_path_factory.mktemp("mixed"), split_ratios=(0.5, 0.5, 0.0))


def by_id(tfrecord_dir: str) -> dict[int, dict]:
    return {ex["id"]: ex for examples in read_job(tfrecord_dir).values() for ex in examples}


def test_mixed_frame_without_images_has_exact_feature_spec(mixed_converted):
    metadata = mixed_converted.metadata
    assert metadata["schema"] == {
        "id": "IntegerInput", "count": "IntegerInput", "visits": "IntegerInput", "score": "FloatInput",
        "active": "IntegerInput", "note": "StringInput", "colour": "StringInput", "seen": "DatetimeInput",
        "seen_tz": "DatetimeInput", "box": "FloatInput[4]", "embedding": "FloatInput[]", "tags": "StringInput[]"}
    features = metadata["features"]
    assert features["visits"] == {"dtype": "int64", "shape": [], "allow_missing": True, "default": 0}
    assert features["count"] == {"dtype": "int64", "shape": [], "allow_missing": False}
    assert features["score"] == {"dtype": "float32", "shape": [], "allow_missing": True, "default": 0.0}
    assert features["note"] == {"dtype": "string", "shape": [], "allow_missing": False}
    assert features["colour"] == {"dtype": "string", "shape": [], "allow_missing": True, "default": ""}
    assert features["seen"] == {"dtype": "int64", "shape": [], "allow_missing": True, "default": 0}
    assert features["box"] == {"dtype": "float32", "shape": [4], "allow_missing": False}
    assert features["embedding"] == {"dtype": "float32", "shape": None, "allow_missing": True, "default": []}
    assert features["tags"] == {"dtype": "string", "shape": None, "allow_missing": False}
    assert metadata["vocabularies"] == {} and mixed_converted["discarded"] == 0


def test_mixed_frame_reads_back_with_the_values_it_went_in_with(mixed, mixed_converted):
    examples = by_id(mixed_converted["tfrecord_dir"])
    assert sorted(examples) == list(mixed["id"])
    for row in mixed.itertuples():
        ex = examples[row.id]
        assert ex["count"] == row.count and ex["active"] == int(row.active)
        assert (ex["visits"], ex["visits_missing"]) == ((0, True) if row.visits is pd.NA else (row.visits, False))
        if np.isnan(row.score):
            assert ex["score_missing"] and ex["score"] == 0.0
        else:
            assert ex["score"] == float(np.float32(row.score)) and not ex["score_missing"]
        assert ex["note"].decode("utf-8") == row.note
        assert ex["colour"] == (b"" if pd.isna(row.colour) else row.colour.encode()) and ex["colour_missing"] == pd.isna(row.colour)
        assert ex["seen"] == (0 if row.seen is pd.NaT else row.seen.value) and ex["seen_missing"] == (row.seen is pd.NaT)
        assert pd.Timestamp(ex["seen_tz"], tz="UTC") == row.seen_tz
        assert ex["box"] == [float(v) for v in row.box]
        if row.embedding is None:
            assert ex["embedding"] == [] and ex["embedding_missing"]
        else:
            assert not ex["embedding_missing"]
            np.testing.assert_array_equal(np.array(ex["embedding"], dtype=np.float32), np.array(row.embedding, dtype=np.float32))
        assert [t.decode() for t in ex["tags"]] == row.tags


def test_explicit_schema_any_column_order_extra_columns_and_float64(mixed, tmp_path):
    frame = mixed[list(reversed(mixed.columns))].assign(unused=object())
    schema = {"score": "DoubleInput", "note": "StringInput", "id": "IntegerInput", "embedding": "DoubleInput[]"}
    result = tfrecorder.convert(frame, tmp_path / "out", schema=schema, split_ratios=(1.0, 0.0, 0.0))
    assert set(result.metadata["features"]) == set(schema)
    assert result.metadata["features"]["score"]["stored_as"] == "float64_bits"
    examples = by_id(result["tfrecord_dir"])
    for row in mixed.itertuples():
        assert examples[row.id]["note"].decode() == row.note
        assert examples[row.id]["score"] == (0.0 if np.isnan(row.score) else row.score)  # float64: exact
    assert examples[3]["embedding"] == [1.5, 2.5, 3.5] and math.isnan(examples[0]["embedding"][0])


@pytest.mark.parametrize("schema, message", [
    ({"id": "IntegerInput", "nope": "FloatInput"}, r"\['nope'\].*missing from the table"),
    ({"note": "IntegerInput"}, r"column 'note' is declared IntegerInput but holds 'plain'"),
    ({"tags": "StringInput[2]"}, r"column 'tags' is declared StringInput\[2\]"),
    ({"note": "DatetimeInput"}, r"column 'note' is declared DatetimeInput"),
    ({"id": "Float64"}, r"unknown column type 'Float64'"),
])
def test_explicit_schema_mismatch_is_refused_before_any_pipeline(mixed, tmp_path, schema, message):
    with pytest.raises(ValueError, match=message):
        tfrecorder.convert(mixed, tmp_path / "out", schema=schema)
    assert not (tmp_path / "out").exists()


def write_csv(path, frame: pd.DataFrame) -> None:
    frame.to_csv(path, index=False, quoting=csv.QUOTE_MINIMAL)


@pytest.fixture(scope="module")
def csv_table(tmp_path_factory):
    directory = tmp_path_factory.mktemp("csv")
    frame = pd.DataFrame({
        "id": [1, 2, 3, 4], "n": pd.array([5, None, 2**63 - 1, -3], dtype="Int64"), "flag": ["True", "", "false", "TRUE"],
        "x": [1.5, None, float("inf"), -0.25], "note": TEXTS[:3] + ["ok"],
        "when": ["2020-01-01T00:00:00Z", "", "2021-06-01T12:30:00+02:00", "2500-01-01T00:00:00Z"],
        "vec": ["[1.5, NaN]", "[]", "[Infinity]", "[2]"],
    })
    path = directory / "table.csv"
    write_csv(path, frame)
    return path


def test_csv_infers_like_a_dataframe(csv_table, tmp_path):
    result = tfrecorder.convert(str(csv_table), tmp_path / "out", split_ratios=(1.0, 0.0, 0.0))
    assert result.metadata["schema"] == {"id": "IntegerInput", "n": "IntegerInput", "flag": "IntegerInput",
                                         "x": "FloatInput", "note": "StringInput", "when": "DatetimeInput",
                                         "vec": "FloatInput[]"}
    assert result.metadata["features"]["n"]["allow_missing"] and not result.metadata["features"]["id"]["allow_missing"]
    examples = by_id(result["tfrecord_dir"])
    assert sorted(examples) == [1, 2, 3]  # year 2500 does not fit int64 nanoseconds: a row-level discard
    assert [examples[i]["n"] for i in (1, 2, 3)] == [5, 0, 2**63 - 1] and examples[2]["n_missing"]
    assert [examples[i]["flag"] for i in (1, 3)] == [1, 0] and examples[2]["flag_missing"]
    assert [examples[i]["note"].decode() for i in (1, 2, 3)] == TEXTS[:3]
    assert examples[3]["when"] == pd.Timestamp("2021-06-01T10:30:00Z").value and examples[2]["when_missing"]
    assert examples[1]["vec"][0] == 1.5 and math.isnan(examples[1]["vec"][1]) and examples[3]["vec"] == [math.inf]
    with open(os.path.join(result["tfrecord_dir"], "discarded.csv"), newline="") as stream:
        assert [row["reason"].split(":")[0] for row in csv.DictReader(stream)] == ["invalid datetime"]


@pytest.mark.parametrize("suffix", ["json", "yaml"])
def test_cli_schema_option(csv_table, tmp_path, suffix):
    mapping = {"id": "IntegerInput", "x": "DoubleInput", "note": "StringInput", "vec": "DoubleInput[]"}
    schema_file = tmp_path / f"schema.{suffix}"
    schema_file.write_text(json.dumps(mapping) if suffix == "json" else "".join(f"{k}: {v}\n" for k, v in mapping.items()))
    done = subprocess.run([sys.executable, "-m", "tfrecorder", "convert", "--source", str(csv_table), "--output_dir",
                           str(tmp_path / "out"), "--schema", str(schema_file), "--split_ratios", "1,0,0"],
                          capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=300)
    assert done.returncode == 0, done.stderr
    (job,) = os.listdir(tmp_path / "out")
    metadata = json.load(open(tmp_path / "out" / job / "metadata.json"))
    assert metadata["schema"] == mapping and metadata["features"]["x"]["stored_as"] == "float64_bits"
    examples = by_id(str(tmp_path / "out" / job))
    assert examples[4]["x"] == -0.25 and examples[4]["vec"] == [2.0] and len(examples) == 4


def test_cli_schema_errors_are_one_line(csv_table, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"id": "IntegerInput", "note": "IntegerInput"}')
    done = subprocess.run([sys.executable, "-m", "tfrecorder", "convert", "--source", str(csv_table), "--output_dir",
                           str(tmp_path / "out"), "--schema", str(bad)], capture_output=True, text=True,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=300)
    assert done.returncode == 2 and "column 'note' is declared IntegerInput" in done.stderr
    assert done.stderr.strip().count("\n") == 0


def test_images_and_structured_columns_together_with_inferred_uri_roles(tmp_path):
    from support import imagegen

    odd = imagegen.odd_images()
    files = imagegen.write_files(tmp_path / "img", {"a.jpg": odd["rgb.jpg"][0], "b.png": odd["rgba.png"][0]})
    frame = pd.DataFrame({"weight": [1.5, None], "thumb_uri": [str(files["b.png"]), str(files["a.jpg"])],
                          "label": ["cat", "dog"], "image_uri": [str(files["a.jpg"]), str(files["b.png"])],
                          "tags": [["x"], []], "split": ["TRAIN", "TRAIN"], "source_uri": ["gs://b/1.csv", "gs://b/2.csv"]})
    result = tfrecorder.convert(frame, tmp_path / "out")
    assert result.metadata["schema"] == {"weight": "FloatInput", "thumb_uri": "ImageUri", "label": "StringLabel",
                                         "image_uri": "ImageUri", "tags": "StringInput[]", "split": "SplitKey",
                                         "source_uri": "StringInput"}
    examples = {ex["image_uri"]: ex for ex in read_job(result["tfrecord_dir"])["TRAIN"]}
    first, second = examples[str(files["a.jpg"]).encode()], examples[str(files["b.png"]).encode()]
    assert first["thumb"] == files["b.png"].read_bytes() and first["thumb_format"] == b"png"
    assert (first["weight"], first["weight_missing"], second["weight_missing"]) == (1.5, False, True)
    assert (first["tags"], second["tags"], first["label"], second["label"]) == ([b"x"], [], 0, 1)
    assert second["source_uri"] == b"gs://b/2.csv"


def test_load_returns_every_column_of_a_mixed_dataframe_as_it_went_in(tmp_path):
    """The issue's acceptance test: a mixed DataFrame → convert → tfrecorder.load → equal values."""
    frame = pd.DataFrame({
        "id": np.arange(6, dtype=np.int64),
        "big": np.array([2**63 - 1, -(2**63), 0, 1, -1, 42], dtype=np.int64),
        "count": pd.array([1, None, 3, 4, None, 6], dtype="Int64"),
        "ratio": np.array([0.5, np.nan, -1.25, np.inf, 3.0, 1e-3], dtype=np.float32),
        "price": np.array([0.1, 2.2, 1e300, -5.5, 7.0, 0.3], dtype=np.float64),
        "flag": [True, False, True, True, False, True],
        "text": ["a,b", 'quote "q"', "line\nbreak\ttab", "ünïcødé", "", None],
        "kind": pd.Categorical(["x", "y", "x", "z", "y", "x"]),
        "when": pd.to_datetime(["2024-01-01T00:00:00Z", None, "1999-12-31T23:59:59.123456789Z",
                                "2030-06-01T12:00:00Z", "1970-01-01T00:00:00Z", "2024-02-29T10:00:00Z"], format="ISO8601"),
        "vec": [np.array([1.0, 2.0], np.float32), np.array([np.nan, np.inf], np.float32), np.zeros(2, np.float32),
                np.ones(2, np.float32), np.array([-1.0, 0.5], np.float32), np.array([3.0, 4.0], np.float32)],
        "tags": [["a"], [], ["b", "c"], None, ["d,e", "f"], ["g"]],
    })
    schema = tfrecorder.Schema({**tfrecorder.Schema.infer(frame), "price": "DoubleInput"})
    result = tfrecorder.convert(frame, tmp_path / "out", schema=schema, split_ratios=(1.0, 0.0, 0.0))
    back = {int(ex["id"]): ex for ex in tfrecorder.load(result["tfrecord_dir"], "train", deterministic=True)}
    assert sorted(back) == list(range(6))
    for row in frame.itertuples():
        ex = back[row.id]
        assert ex["big"].numpy() == row.big
        assert bool(ex["count_missing"]) == (row.count is pd.NA)
        assert row.count is pd.NA or ex["count"].numpy() == row.count
        assert bool(ex["ratio_missing"]) == bool(np.isnan(row.ratio))
        assert np.isnan(row.ratio) or ex["ratio"].numpy() == row.ratio
        assert ex["price"].numpy() == row.price  # float64, bit-exact
        assert ex["flag"].numpy() == int(row.flag)
        assert bool(ex["text_missing"]) == pd.isna(row.text)  # None, or NaN in pandas 3's str dtype
        assert pd.isna(row.text) or ex["text"].numpy().decode() == row.text
        assert ex["kind"].numpy().decode() == row.kind
        assert bool(ex["when_missing"]) == pd.isna(row.when)
        assert pd.isna(row.when) or ex["when"].numpy() == row.when.value
        np.testing.assert_array_equal(ex["vec"].numpy(), row.vec)
        assert bool(ex["tags_missing"]) == (row.tags is None)
        assert [t.decode() for t in ex["tags"].numpy().tolist()] == (row.tags or [])
