"""Parallel CSV slices (tfrecorder.sources.csv_slicing) give exactly the rows and malformed-line reports of one
sequential parse (csv_source.iter_csv_rows), whatever the quoting and wherever the range boundaries fall."""
from __future__ import annotations

import csv
import io

from hypothesis import HealthCheck, given, settings, strategies as st

from beam_pipelines.steps import read_rows
from tfrecorder.sources import csv_slicing, csv_source
from tfrecorder.core.schema import Schema
from tfrecorder.options.job_config import JobConfig
from tfrecorder.sources.csv_source import CsvRows


def sequential(path) -> list:
    return list(csv_source.iter_csv_rows(str(path)))


def in_slices(path: str, range_bytes: int) -> list:
    """What the pipeline does, without Beam: scan ranges, plan slices, read each, number malformed lines."""
    with open(path, "rb") as stream:
        data = stream.read()
    data_start, size = csv_slicing.header_end(data, complete=True), len(data)
    header = next(csv.reader(io.StringIO(data[:data_start].decode("utf-8-sig"), newline="")))
    source = CsvRows(path, size, data_start)
    config = JobConfig(source=source, schema=Schema({}), columns=tuple(header), base_dir="",
                       final_dir="", temp_dir="", job_name="t", runner="DirectRunner", split_ratios=(0.8, 0.1, 0.1),
                       num_shards=0, max_shard_bytes=1, compression=None, image_size=None, validate="header")
    ranges = csv_slicing.byte_ranges(data_start, size, range_bytes)
    scans = [source.scan(r) for r in reversed(ranges)]
    slices = csv_slicing.plan_slices(scans, data_start, size)
    assert [s.index for s in slices] == list(range(len(ranges)))
    assert all(a.end == b.start for a, b in zip(slices, slices[1:]))
    items = [item for piece in slices for item in read_rows.read_part(config, piece)]
    counts = [item for item in items if isinstance(item, tuple) and item[0] == read_rows.RECORDS]
    records = dict(count for _tag, count in counts)
    return [item if isinstance(item, dict) else read_rows.number_malformed(item, records, len(header))
            for item in items if item not in counts]


def check(tmp_path, data: bytes, range_bytes: int, block_bytes: int = 3) -> None:
    """Ranges of `range_bytes`, each scanned in blocks of `block_bytes`: same as a sequential parse."""
    path = tmp_path / "t.csv"
    path.write_bytes(data)
    default, csv_slicing.SCAN_BLOCK_BYTES = csv_slicing.SCAN_BLOCK_BYTES, block_bytes
    try:
        assert in_slices(str(path), range_bytes) == sequential(path)
    finally:
        csv_slicing.SCAN_BLOCK_BYTES = default


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
@given(data=csv_bytes(), range_bytes=st.integers(1, 40), block_bytes=st.integers(1, 40))
def test_fuzzed_csvs_parse_identically_in_slices(tmp_path, data, range_bytes, block_bytes):
    check(tmp_path, data, range_bytes, block_bytes)


@settings(max_examples=300, deadline=None)
@given(data=csv_bytes(), range_bytes=st.integers(1, 40), block_bytes=st.integers(1, 40))
def test_a_range_scanned_in_blocks_is_the_range_scanned_at_once(data, range_bytes, block_bytes):
    """Blocks after the ones where both hypotheses found their first record start are scanned for their
    quotes alone (read_scan): the range's scan is still exactly the one-block scan."""
    data_start, size = csv_slicing.header_end(data, complete=True), len(data)

    def scans(block: int) -> list:
        default, csv_slicing.SCAN_BLOCK_BYTES = csv_slicing.SCAN_BLOCK_BYTES, block
        try:
            return [csv_slicing.read_scan(lambda offset, length: data[offset:offset + length], r, data_start, size)
                    for r in csv_slicing.byte_ranges(data_start, size, range_bytes)]
        finally:
            csv_slicing.SCAN_BLOCK_BYTES = default

    assert scans(block_bytes) == scans(1 << 20)


UNQUOTED_CELL = st.lists(st.sampled_from(['a', 'b', ' ', 'é', '12']), max_size=6).map("".join)


@st.composite
def unquoted_csv_bytes(draw) -> bytes:
    """A CSV whose fields need no quotes (no quote, comma or newline in a cell), rows of any width."""
    columns = draw(st.integers(1, 4))
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    rows = [",".join(f"c{i}" for i in range(columns))]
    rows += [",".join(draw(st.lists(UNQUOTED_CELL, min_size=1, max_size=columns + 1)))
             for _ in range(draw(st.integers(0, 8)))]
    return (ending.join(rows) + (ending if draw(st.booleans()) else "")).encode("utf-8")


def likely_and_planned(data: bytes, range_bytes: int) -> list[tuple]:
    data_start, size = csv_slicing.header_end(data, complete=True), len(data)
    ranges = csv_slicing.byte_ranges(data_start, size, range_bytes)
    scans = [csv_slicing.read_scan(lambda offset, length: data[offset:offset + length], r, data_start, size)
             for r in ranges]
    likely = [csv_slicing.outside_quotes_slice(lambda offset, length: data[offset:offset + length], r, scan,
                                               data_start, size) for r, scan in zip(ranges, scans)]
    return list(zip(likely, csv_slicing.plan_slices(scans, data_start, size)))


@settings(max_examples=300, deadline=None)
@given(data=unquoted_csv_bytes(), range_bytes=st.integers(1, 40))
def test_without_quoted_newlines_the_likely_slice_of_a_range_is_its_planned_slice(data, range_bytes):
    """Where no range starts inside quotes, a range's guessed slice is the plan's (None: the plan's is empty)."""
    for likely, planned in likely_and_planned(data, range_bytes):
        assert likely == (planned if planned.end > planned.start else None)


def test_a_range_starting_inside_quotes_guesses_another_slice_than_the_plan():
    data = b'a,b\n1,"x\ny\nz"\n2,3\n'
    guesses = likely_and_planned(data, 5)  # the second range starts inside the quoted field
    assert any(likely is not None and likely != planned for likely, planned in guesses)
    assert any(likely == planned for likely, planned in guesses)


def test_byte_ranges_are_equal_and_as_many_as_balanced_count_gives():
    """Eleven ranges' worth of bytes (the last one short) are cut into twelve equal ranges, so that two or four
    processes get equal shares; the ranges cover the data once, in order."""
    ranges = csv_slicing.byte_ranges(10, 10 + 10 * 1000 + 1, 1000)
    assert len(ranges) == 12 and [r.index for r in ranges] == list(range(12))
    assert ranges[0].start == 10 and ranges[-1].end == 10 + 10 * 1000 + 1
    assert all(a.end == b.start for a, b in zip(ranges, ranges[1:]))
    assert {r.end - r.start for r in ranges[:-1]} == {834} and ranges[-1].end - ranges[-1].start == 827
    assert [(r.start, r.end) for r in csv_slicing.byte_ranges(0, 2000, 1000)] == [(0, 1000), (1000, 2000)]
