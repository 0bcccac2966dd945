"""CSV sample reading for schema inference (pandas' dtype inference, refined for datetimes and lists)."""
from __future__ import annotations

import pytest

from tfrecorder.core.schema import infer_schema
from tfrecorder.sources.csv_source import read_csv_sample

CSV = (
    "i,gappy,flag,x,text,na_text,when,day,mixed_when,vec,words,not_json\n"
    '1,,True,1.5,"a, ""b""",NA,2020-01-01T00:00:00Z,2020-01-01,2020-01-01,"[1, NaN]","[""a""]",[1\n'
    "2,3,false,inf,,null,2021-06-01T12:30:00.123456789+02:00,,yesterday,[],[],[2]\n"
)


def test_csv_sample_dtypes_infer_like_a_dataframe():
    sample = read_csv_sample(CSV)
    assert infer_schema(sample).to_json() == {
        "i": "IntegerInput", "gappy": "IntegerInput", "flag": "IntegerInput", "x": "FloatInput", "text": "StringInput",
        "na_text": "StringInput", "when": "DatetimeInput", "day": "DatetimeInput", "mixed_when": "StringInput",
        "vec": "FloatInput[]", "words": "StringInput[]", "not_json": "StringInput",
    }
    assert sample["na_text"].tolist() == ["NA", "null"]  # only an empty field is missing
    assert sample["when"][1].value == 1622543400_123456789


# --- the driver reads a sample of a file source, never the whole file ------------------------------

BIG_LINE = b"TRAIN,12345,0.14286,a short note,b\n"


def big_csv(target_bytes: int) -> bytes:
    return b"split,id,x,note,label\n" + BIG_LINE * (target_bytes // len(BIG_LINE))


def test_dataflow_submit_of_a_big_gcs_csv_downloads_at_most_32_mib(gcs, monkeypatch):
    """A 40 MiB gs:// CSV: header, sample and row estimate from its head; totals are the job's to count."""
    from google.cloud.storage import Blob

    import tfrecorder
    from tfrecorder.sources import csv_source

    url = "gs://tfr-driver-reads/big.csv"
    payload = big_csv(40 * 1024 * 1024)
    gcs.upload(url, payload)
    downloaded = []
    real = Blob.download_as_bytes

    def counting(self, *args, **kwargs):
        data = real(self, *args, **kwargs)
        if self.name == "big.csv":
            downloaded.append(len(data))
        return data

    monkeypatch.setattr(Blob, "download_as_bytes", counting)
    result = tfrecorder.convert(url, "gs://tfr-driver-reads/out", runner="DataflowRunner", project="tfrecorder-test",
                                region="europe-west4", dataflow_options={"dry_run": True, "no_auth": True})
    assert result["state"] == "DRY_RUN"
    assert 0 < sum(downloaded) <= csv_source.SAMPLE_BYTES, downloaded
    true_rows = len(payload) // len(BIG_LINE)
    assert result["rows_in_estimated"] and abs(result["rows_in"] - true_rows) <= true_rows * 0.01


def test_local_csv_head_is_read_in_steps_up_to_the_sample(tmp_path, monkeypatch):
    from tfrecorder.sources import csv_source, source_registry
    from tfrecorder.io import storage

    path = tmp_path / "big.csv"
    path.write_bytes(big_csv(3 * 1024 * 1024))
    read = []
    real = storage.read_range
    monkeypatch.setattr(storage, "read_range", lambda *args: read.append(len(real(*args))) or real(*args))
    table = source_registry.open_table(str(path))
    assert sum(read) <= csv_source.HEAD_STEP_BYTES + 2  # 10,000 sample rows fit in the first step (+ gzip's magic)
    assert table.columns == ["split", "id", "x", "note", "label"] and len(table.sample) == csv_source.SAMPLE_ROWS
    assert table.rows.data_start == len(b"split,id,x,note,label\n") and table.rows.size == path.stat().st_size


# --- text: encodings and bytes invalid in them ------------------------------------------------------

def test_a_row_with_invalid_bytes_in_the_sample_is_left_out_of_it_not_fatal(tmp_path):
    from tfrecorder.core.schema import Schema
    from tfrecorder.sources import source_registry

    path = tmp_path / "t.csv"
    path.write_bytes(b"id,name\n1,a\n2\xff,b\n3,\"multi\nline \xe9\"\n4,d\n")
    table = source_registry.open_table(str(path))
    assert table.sample["id"].tolist() == [1, 4] and table.infer_schema().to_json() == {
        "id": "IntegerInput", "name": "StringInput"}
    items = list(table.rows.read_part(table.rows.known_parts()[0], table.columns, Schema({})))
    assert [item for item in items if isinstance(item, dict)] == [{"id": "1", "name": "a"}, {"id": "4", "name": "d"}]
    assert [item for item in items if isinstance(item, tuple)] == [
        (0, {"id": "2\\xff", "name": "b"}, 1, "byte(s) 0xff in column 'id' are not valid utf-8"),
        (0, {"id": "3", "name": "multi\nline \\xe9"}, 2, "byte(s) 0xe9 in column 'name' are not valid utf-8"),
        ("records", (0, 4))]


def test_invalid_bytes_in_the_header_are_one_value_error(tmp_path):
    from tfrecorder.sources import source_registry

    path = tmp_path / "t.csv"
    path.write_bytes(b"id,pr\xe9nom\n1,a\n")
    with pytest.raises(ValueError, match=r"the header row is not valid utf-8 text \('id,pr\\\\xe9nom'\); "
                                         "pass the file's encoding as encoding="):
        source_registry.open_table(str(path))
    assert source_registry.open_table(str(path), encoding="latin-1").columns == ["id", "prénom"]


@pytest.mark.parametrize("encoding", ["latin-1", "cp1252", "utf-16", "utf-16-be", "shift_jis"])
def test_other_encodings_read_the_same_rows_as_utf8(tmp_path, encoding):
    from tfrecorder.core.schema import Schema
    from tfrecorder.sources import source_registry

    text = "id,prénom,note\n" + "".join(f'{i},Zoë {i},"a, ""b""\nc"\n' for i in range(50))
    if encoding == "shift_jis":
        text = text.replace("é", "日").replace("ë", "本")
    (tmp_path / "utf8.csv").write_text(text, encoding="utf-8")
    (tmp_path / "other.csv").write_bytes(text.encode(encoding))
    utf8 = source_registry.open_table(str(tmp_path / "utf8.csv"))
    other = source_registry.open_table(str(tmp_path / "other.csv"), encoding=encoding)
    assert other.columns == utf8.columns and other.sample.equals(utf8.sample) and other.rows_estimate == 50

    def read(table, method, *args) -> list:
        source = table.rows
        parts = source.known_parts() or source.plan_parts([source.scan(unit) for unit in source.scan_units()])
        return [repr(item) for part in parts for item in getattr(source, method)(part, table.columns, Schema({}), *args)]

    assert read(other, "read_part") == read(utf8, "read_part")
    batches = [b for b in read(other, "read_batches", 16) if not b.startswith("(")]
    assert len(batches) == 4  # 50 rows in batches of 16


def test_encodings_without_byte_scannable_separators_are_one_part_from_the_first_byte(tmp_path):
    from tfrecorder.sources import csv_slicing, source_registry

    path = tmp_path / "t.csv"
    path.write_bytes(("a,b\n" + "1,x\n" * 5000).encode("utf-16"))
    table = source_registry.open_table(str(path), encoding="utf-16")
    assert table.rows.known_parts() == [csv_slicing.Slice(0, 0, path.stat().st_size)]
    path.write_bytes(("a,b\n" + "1,x\n" * 5000).encode("latin-1"))
    scanned = source_registry.open_table(str(path), encoding="latin-1")
    assert scanned.rows.known_parts() == [csv_slicing.Slice(0, 4, 4 + 4 * 5000)]


def test_records_too_wide_for_column_wise_batches_to_pay_are_read_row_by_row(tmp_path, monkeypatch):
    """A slice must hold MIN_BATCH_RECORDS records for the columnar encoder's per-column cost to pay;
    wider records go row by row (a cost per value), so a wide table's cost grows linearly with its width."""
    from tfrecorder.sources import csv_slicing, source_registry

    monkeypatch.setattr(csv_slicing, "RANGE_BYTES", 64 * 100)  # column-wise up to 100 bytes per record
    for width, column_wise in ((10, True), (40, False)):
        path = tmp_path / f"w{width}.csv"
        path.write_text(",".join(f"c{i}" for i in range(width)) + "\n" + (",".join(["12"] * width) + "\n") * 30)
        rows = source_registry.open_table(str(path)).rows
        assert rows.record_bytes == 3 * width and rows.reads_batches is column_wise, width


def test_parts_grew_but_records_over_64_kb_still_go_row_by_row():
    from tfrecorder.sources import csv_slicing
    from tfrecorder.sources.csv_source import batches_pay

    assert csv_slicing.RANGE_BYTES == 16 * 1024 * 1024  # a part's fixed costs paid once per 16 MB
    assert batches_pay(64 * 1024) and not batches_pay(64 * 1024 + 1)
