"""tfrecorder.sources.csv_columns: CSV text as batches of text columns, parsed exactly as tables.CsvRecords parses it."""
from __future__ import annotations

import io

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

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
    for odd in (b"1,2\n\n3,4\n", b"1,2,3\n", b"1,\xff\n"):
        assert type(csv_bytes_batches(odd, header)) is CsvBatches
