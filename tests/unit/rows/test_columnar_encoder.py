"""tfrecorder.rows.columnar_encoder: the columnar path decides and writes exactly what the row path does.

Hypothesis builds frames over every supported dtype (staged as the driver stages a DataFrame) and
CSV text with well- and ill-formed values; for each, every row goes through the row path
(prepare_row + RowEncoder.encode) and the whole batch through prepare_batch + TableEncoder.encode:
same discards with the same reasons, same splits, same unknown-label counts, records that parse
to the same tf.train.Example, same table stats.
"""
from __future__ import annotations

import csv
import io
import struct

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfrecorder.rows import columnar_encoder
from tfrecorder.sources import dataframe_staging
from tfrecorder.sources.csv_columns import csv_bytes_batches
from tfrecorder.errors import RowError
from tfrecorder.rows.row_encoding import RowEncoder, prepare_row
from tfrecorder.core.schema import Schema, infer_schema
from tfrecorder.rows.table_stats import StatsCounter, TableStats
from tfrecorder.sources.csv_source import CsvRecords

RATIOS = (0.8, 0.1, 0.1)
VOCABULARY = {"label": ["cat", "dog", "ému"]}  # "owl" is a label outside the vocabulary
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def row_path(rows: list[dict], schema: Schema, vocabularies) -> tuple[list, list]:
    encoder, written, discards = RowEncoder(schema, vocabularies), [], []
    for index, row in enumerate(rows):
        try:
            split = prepare_row(row, schema, RATIOS)
            data, unknown = encoder.encode(row, None)
        except RowError as exc:
            discards.append((index, str(exc)))
            continue
        written.append((split, data, unknown))
    return written, discards


def columnar_path(batches: list[pa.RecordBatch], schema: Schema, vocabularies) -> tuple[list, list]:
    encoder, written, discards, offset = columnar_encoder.TableEncoder(schema, vocabularies), [], [], 0
    for batch in batches:
        encoded = encoder.encode(batch, columnar_encoder.prepare_batch(batch, schema, RATIOS))
        written += [(columnar_encoder.SPLITS[code], record, int(unknown))
                    for code, record, unknown in zip(encoded.codes, encoded.records.to_pylist(), encoded.unknown_labels)]
        discards += [(offset + row, reason) for row, reason in encoded.discards]
        offset += batch.num_rows
    return written, discards


def assert_same(batches: list[pa.RecordBatch], rows: list[dict], schema: Schema) -> None:
    import tensorflow as tf

    expected, expected_discards = row_path(rows, schema, VOCABULARY)
    found, found_discards = columnar_path(batches, schema, VOCABULARY)
    assert found_discards == expected_discards
    assert [(s, u) for s, _, u in found] == [(s, u) for s, _, u in expected]
    for (_, record, _), (_, reference, _) in zip(found, expected):
        assert tf.train.Example.FromString(record) == tf.train.Example.FromString(reference)
    by_rows, by_batches = TableStats(), TableStats()
    StatsCounter(schema, RATIOS).count(rows, by_rows)
    for batch in batches:
        columnar_encoder.count_batch(batch, schema, RATIOS, by_batches)
    assert by_batches == by_rows


# ------------------------------------------------------------------ DataFrames, staged as the driver does

SPLIT_CELLS = ["TRAIN", "validation", " Test ", "UNASSIGNED", "", None, "holdout"]
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6)
FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64)
NANOS = st.integers(-(2**62), 2**62)


@st.composite
def frames(draw) -> tuple[pd.DataFrame, Schema]:
    rows = draw(st.integers(1, 20))

    def cells(strategy, missing=True):
        cell = st.one_of(st.none(), strategy) if missing else strategy
        return draw(st.lists(cell, min_size=rows, max_size=rows))

    ints = cells(st.integers(-(2**63), 2**63 - 1))
    frame = pd.DataFrame({
        "split": cells(st.sampled_from(SPLIT_CELLS), missing=False),
        "int": pd.array(ints, dtype="Int64") if draw(st.booleans()) else
        pd.Series([0 if v is None else v for v in ints], dtype="int64"),
        "small": pd.Series(cells(st.integers(-100, 100), missing=False), dtype="int8"),
        "float": pd.Series(cells(FLOATS), dtype="float64"),
        "float32": pd.Series(cells(st.floats(width=32)), dtype="float32"),
        "double": pd.Series(cells(FLOATS), dtype="float64"),
        "flag": cells(st.booleans(), missing=False),
        "text": pd.Series(cells(TEXT), dtype=object),
        "naive": pd.to_datetime(pd.Series(cells(NANOS), dtype="Int64").astype("float64"), unit="ns"),
        "aware": pd.to_datetime(pd.Series(cells(NANOS), dtype="Int64").astype("float64"), unit="ns", utc=True)
        .dt.tz_convert("America/New_York"),
        "fixed": [np.array(v) for v in cells(st.lists(FLOATS, min_size=3, max_size=3), missing=False)],
        "ragged": cells(st.lists(st.one_of(st.integers(-5, 2**40), st.none()), max_size=4)),
        "words": cells(st.lists(TEXT, max_size=3)),
        "kind": pd.Categorical(cells(st.sampled_from(["a", "bb", "ç"])), categories=["a", "bb", "ç"]),
        "label": cells(st.sampled_from(["cat", "dog", "ému", "owl", " ", ""])),
    })
    overrides = {"double": "DoubleInput", "ragged": "IntegerInput[]", "words": "StringInput[]",
                 "fixed": draw(st.sampled_from(["FloatInput[3]", "DoubleInput[3]", "FloatInput[2]"]))}
    return frame, Schema({**infer_schema(frame), **overrides})


def staged_batches(frame: pd.DataFrame, schema: Schema, batch_rows: int) -> list[pa.RecordBatch]:
    stream = io.BytesIO()
    dataframe_staging.write_staged(frame, schema, stream)
    stream.seek(0)
    return pa.ipc.open_file(stream).read_all().to_batches(max_chunksize=batch_rows)


@SETTINGS
@given(frames())
def test_split_keys_are_built_column_wise_as_split_key_builds_them(found):
    from tfrecorder.rows.row_encoding import split_key

    frame, schema = found
    for table in (frame, frame.drop(columns="split")):
        table_schema = Schema({c: schema[c] for c in table.columns})
        for batch in staged_batches(table, table_schema, 7):
            assert columnar_encoder.split_keys(batch, table_schema) == [split_key(row, table_schema) for row in batch.to_pylist()]


@SETTINGS
@given(frames(), st.integers(1, 9))
def test_staged_frames_encode_as_the_row_path_does(found, batch_rows):
    frame, schema = found
    batches = staged_batches(frame, schema, batch_rows)
    rows = [row for batch in batches for row in batch.to_pylist()]
    assert_same(batches, rows, schema)


@settings(max_examples=1, deadline=None)
@given(frames())
def test_inferred_roles_of_the_generated_frames_cover_every_dtype(found):
    frame, schema = found
    roles = {name: role.name for name, role in schema.items()}
    assert roles["int"] == roles["small"] == roles["flag"] == "IntegerInput"
    assert roles["float"] == roles["float32"] == "FloatInput"
    assert roles["naive"] == roles["aware"] == "DatetimeInput"
    assert roles["text"] == roles["kind"] == "StringInput" and roles["label"] == "StringLabel"


# ------------------------------------------------------------------ CSV text

CSV_CELLS = {
    "split": ["TRAIN", "test", "UNASSIGNED", "", "nope"],
    "int": ["5", "-0", "007", " 5", "5.0", "true", "x", "", "99999999999999999999", "9223372036854775807", "1_000",
            "0x1F", "+5", "1e3", "-"],  # hex: Arrow's integer cast takes it, int() does not
    "float": ["1.5", "-0.25", "1e300", "1e400", "nan", "-inf", ".5", "x", "", "3", "+1.5", "01.5", "5.", "1E5",
              "0x1p3", "-nan", "1e", "--1"],
    "double": ["0.1", "-2", "2.5e-310", "NaN", "", "y", "-0", "+.5", "1.e5"],
    "when": ["2020-01-02 03:04:05", "2020-01-02T03:04:05.123456789+02:00", "2020-01-02 03:04:05Z", "2020-01-02",
             "3000-01-01 00:00:00", "soon", "", "1600000000000000000", "2020-01-02T03:04:05.5", "2021-02-29 00:00:00"],
    "vec": ["[1.0, 2.5, -3]", "[1,2,3]", "[1.0, 2.0]", "[]", "[null, 1, 2]", "[1e400, 1, 2]", "x", "",
            "[NaN, 1, 2]"],
    "ids": ["[1, 2, 3]", "[]", "[-5]", "[1.5]", "[true]", "", "[1, null]"],
    "name": ["a", "", "ünï", "with, comma", 'say "hi"', "two\nlines"],
    "label": ["cat", "dog", "owl", " ", ""],
}
CSV_SCHEMA = Schema({"split": "SplitKey", "int": "IntegerInput", "float": "FloatInput", "double": "DoubleInput",
                     "when": "DatetimeInput", "vec": "FloatInput[3]", "ids": "IntegerInput[]", "name": "StringInput",
                     "label": "StringLabel"})


@st.composite
def csv_texts(draw) -> str:
    rows = draw(st.integers(1, 25))
    out = io.StringIO()
    writer = csv.writer(out)
    for _ in range(rows):
        writer.writerow([draw(st.sampled_from(values)) for values in CSV_CELLS.values()])
    return out.getvalue()


def csv_both_ways(text: str, batch_rows: int) -> tuple[list, list, list, list]:
    header = list(CSV_CELLS)
    rows, malformed = [], []
    for item in CsvRecords(io.StringIO(text, newline=""), header):
        (malformed if isinstance(item, tuple) else rows).append(item)
    batches, found_malformed = [], []
    for item in csv_bytes_batches(text.encode(), header, batch_rows):
        (found_malformed if isinstance(item, tuple) else batches).append(item)
    return rows, malformed, batches, found_malformed


@SETTINGS
@given(csv_texts(), st.integers(1, 9))
def test_csv_text_encodes_as_the_row_path_does(text, batch_rows):
    rows, malformed, batches, found_malformed = csv_both_ways(text, batch_rows)
    assert found_malformed == malformed
    assert_same(batches, rows, CSV_SCHEMA)


def _kept_statistics(batch: pa.RecordBatch, schema: Schema) -> tuple[dict, str, str]:
    """The encoder's parsed text columns of a batch, and the statistics of its kept rows as JSON: from the
    text, and from the batch with those columns as parsed (what the encode step hands the statistics)."""
    import json

    from tfrecorder.rows.dataset_statistics import DatasetStatistics

    encoder = columnar_encoder.TableEncoder(schema, {"label": ["cat", "dog", "owl"]})
    prepared = columnar_encoder.prepare_batch(batch, schema, (0.8, 0.1, 0.1))
    encoded = encoder.encode(batch, prepared)
    kept = pa.array(np.flatnonzero(prepared.codes != columnar_encoder.DISCARDED), pa.int64())
    found = []
    for described in (batch, encoded.parsed_batch(batch)):
        statistics = DatasetStatistics(schema)
        statistics.add_batch("TRAIN", described.take(kept))
        found.append(json.dumps(statistics.to_json(), sort_keys=True).replace("-0.0,", "0.0,").replace("-0.0}", "0.0}"))
    return encoded.parsed, found[0], found[1]  # an integer's "-0" is the int 0 parsed (as in a DataFrame's
    # statistics), -0.0 as float text: the one difference, and left out


@SETTINGS
@given(csv_texts(), st.integers(1, 9))
def test_number_columns_parsed_from_text_give_the_texts_statistics(text, batch_rows):
    """The encoder hands the statistics the number columns it parsed from CSV text, so that they are not
    parsed twice: the kept rows' statistics are exactly those of the text."""
    for batch in csv_both_ways(text, batch_rows)[2]:
        _parsed, from_text, from_parsed = _kept_statistics(batch, CSV_SCHEMA)
        assert from_parsed == from_text


def test_clean_number_text_is_parsed_once_for_encoding_and_statistics():
    rows = ["TRAIN,5,1.5,0.1,2020-01-02 03:04:05,\"[1.0, 2.5, -3]\",\"[1, 2]\",a,cat",
            "TEST,-7,,2.5e-3,,\"[1,2,3]\",[3],b,dog", "TRAIN,12,1e10,-2,,,[-5],c,owl"]
    [batch] = [item for item in csv_bytes_batches("\n".join(rows).encode(), list(CSV_CELLS), 100)
               if isinstance(item, pa.RecordBatch)]
    parsed, from_text, from_parsed = _kept_statistics(batch, CSV_SCHEMA)
    assert sorted(parsed) == ["double", "float", "ids", "int", "vec", "when"]
    assert parsed["when"].to_pylist() == [1577934245_000_000_000, None, None]  # as stored: epoch nanoseconds
    assert parsed["int"].to_pylist() == [5, -7, 12] and parsed["float"].to_pylist() == [1.5, None, 1e10]
    assert parsed["vec"].to_pylist()[1] == [1.0, 2.0, 3.0] and parsed["vec"].to_pylist()[2] is None
    assert from_parsed == from_text and '"mean": 3.33' in from_text


IMAGE_CELLS = {
    "split": ["TRAIN", "validation", "UNASSIGNED", "UNASSIGNED", "", "nope"],
    "image_uri": ["a.jpg", "dir/b.png", "c d.jpg", " ", ""],
    "mask_uri": ["m.png", "", "n.png"],
    "label": ["cat", "dog", "owl", " ", ""],
}
IMAGE_SCHEMA = Schema({"split": "SplitKey", "image_uri": "ImageUri", "mask_uri": "ImageUri", "label": "StringLabel"})


@SETTINGS
@given(st.lists(st.tuples(*(st.sampled_from(values) for values in IMAGE_CELLS.values())), min_size=1, max_size=25),
       st.integers(1, 9))
def test_image_tables_prepare_and_count_as_the_row_path_does(lines, batch_rows):
    """Image columns: the same empty-URI discards (after split and label reasons), the same splits
    (UNASSIGNED rows hash their first image URI) and the same table stats, column-wise."""
    out = io.StringIO()
    csv.writer(out).writerows(lines)
    header = list(IMAGE_CELLS)
    rows = [item for item in CsvRecords(io.StringIO(out.getvalue(), newline=""), header)]
    batches = list(csv_bytes_batches(out.getvalue().encode(), header, batch_rows))
    expected = []
    for row in rows:
        try:
            expected.append(prepare_row(row, IMAGE_SCHEMA, RATIOS))
        except RowError as exc:
            expected.append(str(exc))
    found = []
    for batch in batches:
        prepared = columnar_encoder.prepare_batch(batch, IMAGE_SCHEMA, RATIOS)
        found += [prepared.reasons.get(row, columnar_encoder.SPLITS[code]) for row, code in enumerate(prepared.codes.tolist())]
    assert found == expected
    by_rows, by_batches = TableStats(), TableStats()
    StatsCounter(IMAGE_SCHEMA, RATIOS).count(rows, by_rows)
    for batch in batches:
        columnar_encoder.count_batch(batch, IMAGE_SCHEMA, RATIOS, by_batches)
    assert by_batches == by_rows


@given(st.lists(st.sampled_from([0, 1, 2]), max_size=60))
def test_split_runs_group_each_splits_records_in_their_order(codes):
    codes = np.array(codes, dtype=np.int8)
    order, runs = columnar_encoder.split_runs(codes)
    placed = np.arange(len(codes)) if order is None else order
    assert (order is None) == bool((np.diff(codes) >= 0).all())
    assert [code for code, _start, _stop in runs] == sorted(set(codes.tolist()))
    assert sum(stop - start for _code, start, stop in runs) == len(codes)
    for code, start, stop in runs:
        assert placed[start:stop].tolist() == np.flatnonzero(codes == code).tolist()


def test_counting_decides_splits_only_for_rows_that_can_add_a_label(monkeypatch):
    """Once a TRAIN row is found, a row whose label is already known cannot change the vocabulary: the rows
    of a table without a split column are hashed for their split only where a label is new (a missing one
    discards its row before any hash), and the counts are those of counting every row."""
    n = 400
    frame = pd.DataFrame({"id": np.arange(n), "label": [("cat", "dog")[i % 2] for i in range(n)]})
    frame.loc[150:159, "label"] = "owl"  # first seen in the second batch
    frame.loc[390, "label"] = None
    schema = Schema({"id": "IntegerInput", "label": "StringLabel"})
    batches = staged_batches(frame, schema, 100)
    hashed, split_keys = [], columnar_encoder.split_keys
    monkeypatch.setattr(columnar_encoder, "split_keys", lambda batch, schema: hashed.append(batch.num_rows) or split_keys(batch, schema))
    counted, by_rows = TableStats(), TableStats()
    for batch in batches:
        columnar_encoder.count_batch(batch, schema, RATIOS, counted)
    StatsCounter(schema, RATIOS).count([row for batch in batches for row in batch.to_pylist()], by_rows)
    assert counted == by_rows and counted.vocabularies == {"label": ["cat", "dog", "owl"]}
    assert hashed == [100, 10]


def test_float64_bits_and_utc_nanoseconds_are_stored_as_the_contract_says():
    frame = pd.DataFrame({"split": ["TRAIN"], "d": [0.1],
                          "t": pd.to_datetime(["2020-01-01 01:00"]).tz_localize("Europe/Paris")})
    schema = Schema({"split": "SplitKey", "d": "DoubleInput", "t": "DatetimeInput"})
    (batch,) = staged_batches(frame, schema, 10)
    encoded = columnar_encoder.TableEncoder(schema, {}).encode(batch, columnar_encoder.prepare_batch(batch, schema, RATIOS))
    import tensorflow as tf

    example = tf.train.Example.FromString(encoded.records[0].as_py()).features.feature
    assert example["d"].int64_list.value[0] == struct.unpack("<q", struct.pack("<d", 0.1))[0]
    assert example["t"].int64_list.value[0] == pd.Timestamp("2020-01-01 00:00", tz="UTC").value


def test_image_columns_are_refused():
    with pytest.raises(ValueError, match="image-free"):
        columnar_encoder.TableEncoder(Schema({"image_uri": "ImageUri"}), {})


# ------------------------------------------------------------------ Parquet files' own Arrow types

@st.composite
def arrow_batches(draw) -> tuple[pa.RecordBatch, Schema]:
    rows = draw(st.integers(1, 15))

    def cells(strategy):
        return draw(st.lists(st.one_of(st.none(), strategy), min_size=rows, max_size=rows))

    micros = st.integers(-(6 * 10**16), 6 * 10**16)  # years 1..3871: python datetimes (beyond 2262: discarded)
    arrays = {
        "split": pa.array(draw(st.lists(st.sampled_from(["TRAIN", "TEST", "bad"]), min_size=rows, max_size=rows)),
                          pa.large_string()),
        "i32": pa.array(cells(st.integers(-(2**31), 2**31 - 1)), pa.int32()),
        "u64": pa.array(cells(st.integers(0, 2**64 - 1)), pa.uint64()),
        "yes": pa.array(cells(st.booleans()), pa.bool_()),
        "half": pa.array([None if v is None else np.float16(v) for v in cells(st.floats(width=16))], pa.float16()),
        "f32": pa.array(cells(st.floats(width=32)), pa.float32()),
        "when": pa.array(cells(micros), pa.timestamp("us", "Europe/Paris")),
        "naive": pa.array(cells(st.integers(-(6 * 10**13), 6 * 10**13)), pa.timestamp("ms")),
        "kind": pa.array(cells(st.sampled_from(["a", "é"]))).dictionary_encode(),
        "vec": pa.array(cells(st.lists(st.floats(width=32), min_size=2, max_size=2)), pa.list_(pa.float32(), 2)),
        "ids": pa.array(cells(st.lists(st.one_of(st.none(), st.integers(-99, 99)), max_size=3)), pa.list_(pa.int32())),
        "flags": pa.array(cells(st.lists(st.booleans(), max_size=3)), pa.list_(pa.bool_())),
        "label": pa.array(cells(st.sampled_from(["cat", "owl", ""])), pa.string()),
    }
    schema = Schema({"split": "SplitKey", "i32": "IntegerInput", "u64": "IntegerInput", "yes": "IntegerInput",
                     "half": "FloatInput", "f32": "DoubleInput", "when": "DatetimeInput", "naive": "DatetimeInput",
                     "kind": "StringInput", "vec": "FloatInput[2]", "ids": "IntegerInput[]",
                     "flags": "IntegerInput[]", "label": "StringLabel"})
    return pa.RecordBatch.from_pydict(arrays), schema


@SETTINGS
@given(arrow_batches())
def test_parquet_arrow_types_encode_as_the_row_path_does(found):
    """A user's Parquet batch, conformed as the pipeline reads it (tfrecorder.sources.parquet_values.conform_batch)."""
    from tfrecorder.sources.parquet_source import rows_of_batch
    from tfrecorder.sources.parquet_values import conform_batch

    batch, schema = found
    assert_same([conform_batch(batch, schema)], rows_of_batch(batch, schema), schema)
