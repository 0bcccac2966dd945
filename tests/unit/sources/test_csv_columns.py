"""tfrecorder.sources.csv_columns: CSV text as batches of text columns, parsed exactly as tables.CsvRecords parses it."""
from __future__ import annotations

import io

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from tfrecorder.sources import csv_text
from tfrecorder.sources.csv_columns import CsvBatches, csv_bytes_batches
from tfrecorder.sources.csv_source import CsvRecords


def by_records(text: str, header: list[str]) -> tuple[list, list, int]:
    records = CsvRecords(io.StringIO(text, newline=""), header)
    items = list(records)
    return [i for i in items if isinstance(i, dict)], [i for i in items if isinstance(i, tuple)], records.records


def by_batches(batches) -> tuple[list, list, int]:
    items = list(batches)
    rows = [row for item in items if isinstance(item, pa.RecordBatch) for row in item.to_pylist()]
    return rows, [i for i in items if isinstance(i, tuple)], batches.records


def test_malformed_and_blank_records_are_reported_like_csv_records():
    text = "TRAIN,1\n\nTEST,2,extra\n" + 'VALIDATION,"multi\nline"\n' + "TRAIN\n"
    header = ["split", "x"]
    assert by_batches(CsvBatches(io.StringIO(text, newline=""), header, batch_rows=1)) == by_records(text, header)
    assert by_batches(csv_bytes_batches(text.encode(), header, batch_rows=1)) == by_records(text, header)
    assert by_records(text, header)[2] == 5


CELLS = st.text(alphabet='ab,"\n\r é', max_size=8)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(CELLS, min_size=1, max_size=4), max_size=8), st.booleans(), st.integers(1, 4))
def test_arrow_parse_of_a_slice_equals_pythons_csv_module(rows, quote_all, batch_rows):
    """Arbitrary text of commas, quotes, CR/LF and spaces: the same rows, malformed lines and record count
    whichever parser reads it (Arrow when the slice is clean, Python's csv module otherwise)."""
    lines = [",".join(f'"{c.replace(chr(34), chr(34) * 2)}"' if quote_all else c for c in row) for row in rows]
    text = "\n".join(lines)
    header = ["a", "b", "c"]
    assert by_batches(csv_bytes_batches(text.encode(), header, batch_rows)) == by_records(text, header)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.text(alphabet='ab"\n,é', max_size=5), min_size=3, max_size=3), min_size=1, max_size=20))
def test_well_formed_quoted_slices_parse_identically(rows):
    import csv

    out = io.StringIO()
    csv.writer(out).writerows(rows)
    text = out.getvalue()
    header = ["a", "b", "c"]
    assert by_batches(csv_bytes_batches(text.encode(), header, 7)) == by_records(text, header)


def test_clean_slices_go_through_arrow_and_odd_ones_through_python():
    header = ["a", "b"]  # Python's csv module reads with CsvBatches itself; Arrow's parse is a subclass of it
    assert type(csv_bytes_batches(b'1,"x\ny"\r\n2,\n', header)) is not CsvBatches
    for odd in (b"1,2\n\n3,4\n", b"1,2,3\n", b"1,\xff\n", b" \r\n\t\x0b\x0c", b""):  # (only whitespace: Python's)
        assert type(csv_bytes_batches(odd, header)) is CsvBatches
    for encoding in ("utf-8", "utf-8-sig", "latin-1", "cp1252", "utf-16-le"):  # ASCII text: not decoded to be checked
        data = "1,x\n2,é\n".encode(encoding) if encoding != "utf-8-sig" else "1,x\n2,é\n".encode("utf-8")
        found = [batch.to_pylist() for batch in csv_bytes_batches(data, header, 16, encoding)]
        ascii_only = [batch.to_pylist() for batch in csv_bytes_batches("1,x\n2,e\n".encode(encoding), header, 16, encoding)]
        assert found == [[{"a": "1", "b": "x"}, {"a": "2", "b": "é"}]] and ascii_only[0][1] == {"a": "2", "b": "e"}


def by_decoded_records(data: bytes, header: list[str], encoding: str) -> tuple[list, list, int]:
    text = io.TextIOWrapper(io.BytesIO(data), encoding=encoding, errors=csv_text.INVALID, newline="")
    records = CsvRecords(text, header, encoding)
    items = list(records)
    return [i for i in items if isinstance(i, dict)], [i for i in items if isinstance(i, tuple)], records.records


BYTE_CELLS = st.lists(st.sampled_from([b"a", b"b", b",", b'"', b"\n", b"\r", b" ", b"\xc3\xa9", b"\xe9", b"\xff",
                                       b"\x81", b"\xc3"]), max_size=6).map(b"".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(BYTE_CELLS, min_size=1, max_size=4), max_size=8), st.integers(1, 4),
       st.sampled_from(["utf-8", "latin-1", "cp1252"]))
def test_bytes_invalid_in_the_encoding_are_reported_like_csv_records(rows, batch_rows, encoding):
    """Arbitrary bytes, some invalid in the encoding: the same rows, discards (invalid text, malformed) and
    record count whichever parser reads them; a record holding an invalid byte is never a row."""
    data = b"\n".join(b",".join(row) for row in rows)
    header = ["a", "b", "c"]
    expected = by_decoded_records(data, header, encoding)
    assert by_batches(csv_bytes_batches(data, header, batch_rows, encoding)) == expected
    assert not any(csv_text.has_invalid(value or "") for row in expected[0] for value in row.values())


def test_invalid_text_is_a_discard_with_its_record_index_and_readable_values():
    data = b"1,ok\n2,caf\xe9\n3,fine\n"
    rows, discards, records = by_batches(csv_bytes_batches(data, ["id", "name"], 16))
    assert rows == [{"id": "1", "name": "ok"}, {"id": "3", "name": "fine"}] and records == 3
    assert discards == [({"id": "2", "name": "caf\\xe9"}, 1, "byte(s) 0xe9 in column 'name' are not valid utf-8")]
    latin = by_batches(csv_bytes_batches(data, ["id", "name"], 16, "latin-1"))
    assert latin == ([{"id": "1", "name": "ok"}, {"id": "2", "name": "café"}, {"id": "3", "name": "fine"}], [], 3)


def test_batches_of_a_stream_are_cut_by_characters_too(monkeypatch):
    from tfrecorder.sources import csv_columns

    monkeypatch.setattr(csv_columns, "BATCH_CHARS", 20)
    text = "".join(f"{i:04d},abcdef\n" for i in range(10))  # 10 characters of values per row
    batches = [b.num_rows for b in CsvBatches(io.StringIO(text, newline=""), ["a", "b"], batch_rows=1000)]
    assert batches == [2, 2, 2, 2, 2]
