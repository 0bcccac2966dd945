"""CSV sample reading for schema inference (pandas' dtype inference, refined for datetimes and lists)."""
from __future__ import annotations

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
    assert sum(read) <= csv_source.HEAD_STEP_BYTES  # 10,000 sample rows fit in the first step
    assert table.columns == ["split", "id", "x", "note", "label"] and len(table.sample) == csv_source.SAMPLE_ROWS
    assert table.rows.data_start == len(b"split,id,x,note,label\n") and table.rows.size == path.stat().st_size
