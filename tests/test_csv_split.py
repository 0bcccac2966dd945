"""Parallel CSV slices (tfrecorder.csv_split) give exactly the rows and malformed-line reports of one
sequential parse (tables.iter_csv_rows), whatever the quoting and wherever the range boundaries fall."""
from __future__ import annotations

import io

from hypothesis import HealthCheck, given, settings, strategies as st

from tfrecorder import csv_split, tables


def sequential(path) -> list:
    return list(tables.iter_csv_rows(str(path)))


def in_slices(data: bytes, range_bytes: int) -> list:
    """What the pipeline does, without Beam: scan ranges, plan slices, parse each, number malformed lines."""
    head = data
    data_start = csv_split.header_end(head, complete=True)
    header = next(iter(__import__("csv").reader(io.StringIO(head[:data_start].decode("utf-8-sig"), newline=""))))

    def read_at(offset: int, length: int) -> bytes:
        return data[offset : offset + length]

    ranges = csv_split.byte_ranges(data_start, len(data), range_bytes)
    scans = [csv_split.read_scan(read_at, r, data_start, len(data)) for r in reversed(ranges)]
    slices = csv_split.plan_slices(scans, data_start, len(data))
    assert [s.index for s in slices] == list(range(len(ranges)))
    assert all(a.end == b.start for a, b in zip(slices, slices[1:]))
    out, records_before = [], 0
    for piece in slices:
        text = io.TextIOWrapper(io.BytesIO(data[piece.start : piece.end]), encoding="utf-8", newline="")
        records = tables.CsvRecords(text, header)
        for item in records:
            if isinstance(item, tuple):
                row, index, fields = item
                item = (row, tables.malformed_reason(records_before + index + 2, fields, len(header)))
            out.append(item)
        records_before += records.records
    return out


def check(tmp_path, data: bytes, range_bytes: int) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(data)
    assert in_slices(data, range_bytes) == sequential(path)


def test_quoted_newlines_straddling_every_boundary(tmp_path):
    data = b'a,b\n"x\ny",1\n"p,""q""\r\nr",2\r\n\n3,"4\n5\n6"\n'
    for size in range(1, len(data) + 1):
        check(tmp_path, data, size)


def test_literal_quotes_inside_unquoted_fields(tmp_path):
    data = b'a,b\n12" pipe,1\nx,"y\nz"\n3" bolt,"q"\nab"c"d,5\n"o"k,6\n'
    for size in range(1, len(data) + 1):
        check(tmp_path, data, size)


def test_unterminated_quote_and_malformed_lines(tmp_path):
    data = b'\xef\xbb\xbfa,b,c\n1,2\n4,5,6,7\n\n"open,\n8,9\n'
    for size in range(1, len(data) + 1):
        check(tmp_path, data, size)


CELL = st.lists(st.sampled_from(['a', 'b', ',', '"', '\n', '\r', ' ', 'é', '""']), max_size=6).map("".join)
RAW = st.lists(st.sampled_from(['x', ',', '"', '\n', '\r', '\r\n', '12" pipe']), max_size=12).map("".join)


@st.composite
def csv_bytes(draw) -> bytes:
    import csv

    columns = draw(st.integers(1, 4))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator=draw(st.sampled_from(["\n", "\r\n"])))
    writer.writerow([f"c{i}" for i in range(columns)])
    for _ in range(draw(st.integers(0, 8))):
        if draw(st.booleans()):  # a well-formed, properly quoted row
            writer.writerow(draw(st.lists(CELL, min_size=columns, max_size=columns)))
        else:  # raw text: stray quotes, wrong field counts, blank lines, lone \r
            out.write(draw(RAW))
    return out.getvalue().encode("utf-8")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=csv_bytes(), range_bytes=st.integers(1, 40))
def test_fuzzed_csvs_parse_identically_in_slices(tmp_path, data, range_bytes):
    check(tmp_path, data, range_bytes)
