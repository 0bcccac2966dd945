"""beam_pipelines.steps.read_rows: a CSV is read in parallel byte slices (local and gs://) and a staged
DataFrame by row groups, giving exactly the rows and malformed-line reports of a sequential read."""
from __future__ import annotations

import os

import apache_beam as beam
import pandas as pd
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.steps import read_rows
from tfrecorder.sources import csv_slicing, dataframe_staging, csv_source, source_registry
from tfrecorder.options.job_config import JobConfig
from tfrecorder.core.schema import Schema, infer_schema
from tfrecorder.sources.staged_rows import StagedRows, staged_parts

TRICKY = b'name,note,n\r\n' + (b'"a\nb","x, ""quoted""",1\r\nplain,"multi\r\nline\r\n",2\r\n'
                                b'12" pipe,literal quote,3\r\nshort,row\r\n\r\n"c","d",4\r\n') * 40


def config_for(source, **fields) -> JobConfig:
    fields = {"columns": (), "schema": Schema({}), **fields}
    return JobConfig(source=source, base_dir="", final_dir="", temp_dir="", job_name="t",
                     runner="DirectRunner", split_ratios=(0.8, 0.1, 0.1), num_shards=0, max_shard_bytes=1 << 20,
                     compression=None, image_size=None, validate="header", **fields)


def read_with_beam(config: JobConfig) -> tuple[list, list]:
    expected_rows, expected_malformed = [], []
    if isinstance(config.source, csv_source.CsvRows):
        for item in csv_source.iter_csv_rows(config.source.path):
            (expected_malformed if isinstance(item, tuple) else expected_rows).append(repr(item))
    with beam.Pipeline("DirectRunner") as pipeline:
        rows, malformed = read_rows.SourceParts(pipeline, config).branch("Rows") | read_rows.ReadRows(config)
        assert_that(rows | "RowText" >> beam.Map(repr), equal_to(expected_rows), label="Rows")
        assert_that(malformed | "BadText" >> beam.Map(repr), equal_to(expected_malformed), label="Malformed")
    return expected_rows, expected_malformed


def csv_config(path: str, **fields) -> JobConfig:
    table = source_registry.open_table(path)
    return config_for(table.row_source(Schema({}), ""), columns=tuple(table.columns), **fields)


@pytest.mark.parametrize("range_bytes", [7, 64, 1 << 20])
def test_local_csv_in_parallel_slices_matches_sequential_parse(tmp_path, monkeypatch, range_bytes):
    monkeypatch.setattr(csv_slicing, "RANGE_BYTES", range_bytes)
    path = tmp_path / "t.csv"
    path.write_bytes(TRICKY)
    config = csv_config(str(path))
    assert len(config.source.scan_units()) > 1 or range_bytes > len(TRICKY)
    rows, malformed = read_with_beam(config)
    assert len(rows) == 160 and len(malformed) == 40


def test_an_image_free_job_with_encoding_processes_scans_its_csv_in_them(tmp_path, monkeypatch):
    """The same slices (rows and malformed lines of a sequential parse), each range scanned by a child."""
    monkeypatch.setattr(csv_slicing, "RANGE_BYTES", 64)
    path = tmp_path / "t.csv"
    path.write_bytes(TRICKY)
    scanners = tmp_path / "scanners.log"
    real_scan = csv_source.CsvRows.scan

    def logged(self, unit):
        with open(scanners, "a") as log:
            log.write(f"{os.getpid()}\n")
        return real_scan(self, unit)

    monkeypatch.setattr(csv_source.CsvRows, "scan", logged)
    config = csv_config(str(path), encode_processes=2)
    rows, malformed = read_with_beam(config)
    assert len(rows) == 160 and len(malformed) == 40
    pids = scanners.read_text().split()
    assert len(pids) == len(config.source.scan_units()) > 2 and len(set(pids)) == 2 and str(os.getpid()) not in pids


TRICKY_TEXT = TRICKY.replace(b'12" pipe', b'12" p\xefpe', 7).replace(b'"multi\r\nline', b'"multi\r\n\xffline', 5)


@pytest.mark.parametrize("range_bytes", [7, 64, 1 << 20])
def test_invalid_bytes_in_any_slice_discard_their_record_with_its_file_line(tmp_path, monkeypatch, range_bytes):
    """Bytes that are not UTF-8 in any parallel slice: their records are discarded with the line numbers of
    a sequential parse, every other row is read."""
    monkeypatch.setattr(csv_slicing, "RANGE_BYTES", range_bytes)
    path = tmp_path / "t.csv"
    path.write_bytes(TRICKY_TEXT)
    config = csv_config(str(path))
    rows, discarded = read_with_beam(config)
    invalid = [reason for reason in discarded if "invalid text: line " in reason]
    assert len(rows) == 160 - 12 and len(discarded) == 40 + 12 and len(invalid) == 12
    assert repr(({"name": "plain", "note": "multi\r\n\\xffline\r\n", "n": "2"},
                 "invalid text: line 3: byte(s) 0xff in column 'note' are not valid utf-8")) in invalid


def _each_between(low: int, high: int):
    def check(found: list) -> None:
        assert found and all(low <= value <= high for value in found), found
    return check


def test_rows_can_be_read_in_batches_of_a_part(tmp_path, monkeypatch):
    monkeypatch.setattr(csv_slicing, "RANGE_BYTES", 64)
    path = tmp_path / "t.csv"
    path.write_bytes(TRICKY)
    config = csv_config(str(path))
    expected, _ = read_with_beam(config)
    with beam.Pipeline("DirectRunner") as pipeline:
        batches, _ = read_rows.SourceParts(pipeline, config).branch("Rows") | read_rows.ReadRows(config, batch_rows=7)  # 160 rows in several slices
        assert_that(batches | "Sizes" >> beam.Map(len), _each_between(1, 7), label="Sizes")
        assert_that(batches | "RowText" >> beam.FlatMap(lambda batch: map(repr, batch)), equal_to(expected),
                    label="Rows")


def test_gcs_csv_in_parallel_slices_matches_sequential_parse(gcs, monkeypatch):
    monkeypatch.setattr(csv_slicing, "RANGE_BYTES", 50)
    url = "gs://tfr-sources/tricky.csv"
    gcs.upload(url, TRICKY)
    read_with_beam(csv_config(url))


def test_staged_dataframe_is_read_by_row_groups(tmp_path, monkeypatch):
    monkeypatch.setattr(dataframe_staging, "MAX_ROW_GROUP_ROWS", 7)
    frame = pd.DataFrame({"n": range(50), "s": [f"v{i}" if i % 3 else None for i in range(50)]})
    path = str(tmp_path / "rows.arrow")
    schema = infer_schema(frame)
    row_groups = dataframe_staging.stage_frame(frame, schema, path)
    assert row_groups == 8
    config = config_for(StagedRows(staged_parts(path, row_groups)), schema=schema)
    expected = [repr({"n": n, "s": f"v{n}" if n % 3 else None}) for n in range(50)]
    with beam.Pipeline("DirectRunner") as pipeline:
        rows, _ = read_rows.SourceParts(pipeline, config).branch("Rows") | read_rows.ReadRows(config)
        assert_that(rows | beam.Map(repr), equal_to(expected))


def test_a_local_csv_jobs_passes_keep_and_take_parsed_tables_a_remote_one_parses(tmp_path):
    """read_rows.kept_tables: a source that keeps tables (CSV) and a local work directory; a pass that asks."""
    import dataclasses

    from tfrecorder.sources.kept_tables import KEEP, TAKE

    path = tmp_path / "t.csv"
    path.write_bytes(TRICKY)
    job = str(tmp_path / "job")
    local = dataclasses.replace(csv_config(str(path)), temp_dir=job)
    assert read_rows.kept_tables(local, KEEP).directory == os.path.join(job, "_work", read_rows.KEPT_DIR)
    assert read_rows.kept_tables(local, TAKE).mode == TAKE and read_rows.kept_tables(local, None) is None
    assert read_rows.kept_tables(dataclasses.replace(local, temp_dir="gs://bucket/job"), KEEP) is None
    assert read_rows.kept_tables(dataclasses.replace(local, source=StagedRows(())), KEEP) is None
