"""tfrecorder.sources.csv_text: encodings checked once, bytes invalid in them marked per field, not fatal."""
from __future__ import annotations

import pytest

from tfrecorder.sources import csv_text


def test_check_encoding_names_the_codec_or_refuses_it():
    assert csv_text.check_encoding("UTF8") == "utf-8"
    assert csv_text.check_encoding("latin-1") == "iso8859-1"
    for bad in ("klingon", "rot13", "base64", None, b"utf-8"):
        with pytest.raises(ValueError, match="encoding"):
            csv_text.check_encoding(bad)


@pytest.mark.parametrize("encoding, scannable", [
    ("utf-8", True), ("utf-8-sig", True), ("latin-1", True), ("cp1252", True), ("ascii", True),
    ("utf-16", False), ("utf-16-le", False), ("shift_jis", False), ("gbk", False), ("cp037", False),
    ("utf-7", False),
])
def test_only_encodings_whose_separators_are_unambiguous_bytes_are_scanned(encoding, scannable):
    assert csv_text.byte_scannable(encoding) is scannable


def test_invalid_bytes_are_marked_one_for_one_and_shown_as_escapes():
    text = csv_text.decode(b"ok,caf\xe9,\xff\xfe", "utf-8")
    assert len(text) == len("ok,caf\xe9,\xff\xfe") and csv_text.has_invalid(text)
    assert csv_text.readable(text) == "ok,caf\\xe9,\\xff\\xfe"
    assert not csv_text.has_invalid(csv_text.decode("ok,café,✓".encode(), "utf-8"))
    assert not csv_text.has_invalid(csv_text.decode(bytes(range(256)), "latin-1"))  # every byte is latin-1
    assert csv_text.has_invalid(csv_text.decode("a\ud800b".encode("utf-16-le", "surrogatepass"), "utf-16-le"))
    assert csv_text.decode(b"a\xc3", "utf-8", final=False) == "a"  # an unfinished character waits


def test_invalid_fields_name_the_first_bad_column_and_its_bytes():
    fields = csv_text.decode(b"1,caf\xe9,\x80", "utf-8").split(",")
    assert csv_text.invalid_fields(fields, ["id", "name", "note"], "utf-8") == \
        "byte(s) 0xe9 in column 'name' are not valid utf-8"
    assert csv_text.invalid_fields(["1", "x", fields[2]], ["id", "name"], "utf-8") == \
        "byte(s) 0x80 in column #3 are not valid utf-8"  # a field beyond the header
    assert csv_text.invalid_fields(["1", "café"], ["id", "name"], "utf-8") is None
    assert csv_text.readable_row(["id", "name", "note"], fields) == {"id": "1", "name": "caf\\xe9", "note": "\\x80"}


def test_utf8_reads_skip_a_byte_order_mark_only_at_the_start_of_a_file():
    assert csv_text.stream_codec("utf-8") == "utf-8-sig" and csv_text.stream_codec("utf-16") == "utf-16"
