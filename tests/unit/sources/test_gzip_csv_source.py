"""tfrecorder.sources.gzip_csv_source: a gzip-compressed CSV, recognised by its magic bytes, converts exactly as
the uncompressed file (rows, discards, reasons), streamed as one part; the driver decompresses only the head."""
from __future__ import annotations

import gzip
import os
import pickle

import pytest

import tfrecorder
from tfrecorder.core.schema import Schema
from tfrecorder.sources import source_registry
from tfrecorder.sources.gzip_csv_source import GzipCsvRows, GzipCsvTable, is_gzip
from tfrecorder.sources.source_protocol import REASONED, SAMPLE_ROWS


def table_bytes(rows: int) -> bytes:
    """A CSV with a malformed line, a blank line and bytes invalid in UTF-8 (one of them past the sample)."""
    lines = [b"split,id,name,label\n"]
    for i in range(rows):
        name = b"caf\xe9" if i in (5, rows - 3) else "café ✓".encode() if i % 7 == 0 else b'"a, ""b"""'
        lines.append(b"%s,%d,%s,%s\n" % ([b"TRAIN", b"VALIDATION", b"TEST"][i % 3], i, name, b"cat" if i % 2 else b"dog"))
    lines.insert(40, b"TRAIN,only,three\n")
    lines.insert(90, b"\n")
    return b"".join(lines)


@pytest.fixture
def files(tmp_path) -> dict:
    data = table_bytes(SAMPLE_ROWS + 600)
    (tmp_path / "t.csv").write_bytes(data)
    (tmp_path / "t.csv.gz").write_bytes(gzip.compress(data))
    (tmp_path / "no-suffix").write_bytes(gzip.compress(data))
    return {name: str(tmp_path / name) for name in ("t.csv", "t.csv.gz", "no-suffix")}


def items(source, columns) -> list:
    parts = source.known_parts()
    return [repr(item) for part in parts for item in source.read_part(part, columns, Schema({}))]


def test_recognised_by_magic_bytes_and_opened_from_the_decompressed_head(files):
    plain = source_registry.open_table(files["t.csv"])
    for name in ("t.csv.gz", "no-suffix"):
        assert is_gzip(files[name])
        table = source_registry.open_table(files[name])
        assert type(table) is GzipCsvTable and table.columns == plain.columns
        assert table.sample.equals(plain.sample) and table.infer_schema() == plain.infer_schema()
        assert table.rows_estimated and abs(table.rows_estimate - (SAMPLE_ROWS + 602)) < 0.1 * SAMPLE_ROWS
    assert not is_gzip(files["t.csv"])


def test_rows_pickle_and_read_the_uncompressed_files_rows_and_records(files):
    plain = source_registry.open_table(files["t.csv"])
    table = source_registry.open_table(files["t.csv.gz"])
    rows = pickle.loads(pickle.dumps(table.row_source(Schema({}), "")))
    assert rows == GzipCsvRows(files["t.csv.gz"], "utf-8", plain.rows.record_bytes) and rows.known_parts() == [0]
    assert rows.reads_batches and plain.rows.record_bytes > 0
    assert items(rows, table.columns) == items(plain.rows, plain.columns)
    expected = [item for item in plain.rows.read_batches(plain.rows.known_parts()[0], plain.columns, Schema({}), 500)
                if isinstance(item, tuple)]
    found = list(rows.read_batches(0, table.columns, Schema({}), 500))
    assert [item for item in found if isinstance(item, tuple)] == expected  # discards and the record count
    assert sum(b.num_rows for b in found if not isinstance(b, tuple)) == SAMPLE_ROWS + 598


def test_damaged_compressed_data_past_the_head_ends_the_part_with_one_discard(tmp_path):
    whole = gzip.compress(table_bytes(60_000))  # ~2 MB of text: the driver decompresses the first MB only
    (tmp_path / "cut.csv.gz").write_bytes(whole[: len(whole) * 4 // 5])
    table = source_registry.open_table(str(tmp_path / "cut.csv.gz"))
    found = list(table.rows.read_part(0, table.columns, Schema({})))
    reasoned = [item for item in found if isinstance(item, tuple) and item[0] == REASONED]
    rows = [item for item in found if isinstance(item, dict)]
    assert len(reasoned) == 1 and 40_000 < len(rows) < 60_000
    assert reasoned[0][1][1].startswith("corrupt data: after line ")
    assert "Compressed file ended before the end-of-stream marker was reached" in reasoned[0][1][1]


def test_a_head_that_does_not_decompress_is_one_value_error(files, tmp_path):
    whole = open(files["t.csv.gz"], "rb").read()
    (tmp_path / "cut.csv.gz").write_bytes(whole[: len(whole) // 2])  # the head is the whole (cut) file
    (tmp_path / "bad.csv.gz").write_bytes(b"\x1f\x8b\x08\x00" + b"\x00" * 6 + b"not deflate data" * 4)
    for name in ("cut.csv.gz", "bad.csv.gz"):
        with pytest.raises(ValueError, match=f"gzip file .*{name} cannot be decompressed"):
            source_registry.open_table(str(tmp_path / name))


def job_view(job: str) -> tuple:
    """discarded.csv's lines and every split's records, each in a fixed order."""
    with open(os.path.join(job, "discarded.csv"), encoding="utf-8") as stream:
        discarded = stream.read().splitlines()
    records = {split: sorted(repr(sorted(record.items())) for record in tfrecorder.data_source(job, split))
               for split in ("train", "validation", "test")}
    assert all(records.values())
    return sorted(discarded), records


@pytest.mark.parametrize("replay", [False, True])
def test_converts_to_the_uncompressed_files_job(files, tmp_path, replay):
    options = {"dataflow_options": {"direct_runner_bundle_repeat": 1}} if replay else {}
    plain = tfrecorder.convert(files["t.csv"], str(tmp_path / "plain"), progress=False)
    packed = tfrecorder.convert(files["t.csv.gz"], str(tmp_path / "packed"), progress=False, **options)
    assert packed["written"] == plain["written"] and packed["discard_reasons"] == plain["discard_reasons"]
    assert plain["discard_reasons"] == {"invalid text": 2, "malformed CSV row": 1}
    assert job_view(packed["tfrecord_dir"]) == job_view(plain["tfrecord_dir"])
    discarded = "\n".join(job_view(packed["tfrecord_dir"])[0])
    assert "invalid text: line 7: byte(s) 0xe9 in column 'name' are not valid utf-8" in discarded
    assert f"invalid text: line {SAMPLE_ROWS + 600 - 3 + 4}:" in discarded  # past the sample, after 2 extra lines
