"""tfrecorder.sources.kept_tables: a part's parsed table kept by one pass is taken once by the next, whole
or not at all, within its bounds; anything odd about a kept table means the part is parsed again."""
from __future__ import annotations

import os

import pyarrow as pa
import pytest

from tfrecorder.sources import kept_tables
from tfrecorder.sources.csv_slicing import Slice
from tfrecorder.sources.kept_tables import KEEP, TAKE, KeptTables


@pytest.fixture(autouse=True)
def small_parts_are_kept(monkeypatch):
    monkeypatch.setattr(kept_tables, "KEPT_MIN_BYTES", 1)


TABLE = pa.table({"a": ["x", None, "z"], "b": ["1", "2", None]})


def test_a_kept_table_is_taken_once_as_it_was_and_its_file_goes(tmp_path):
    part = Slice(3, 100, 5000)
    KeptTables(str(tmp_path), KEEP).keep(part, TABLE)
    assert os.listdir(tmp_path) == ["000003-100-5000.arrow"]  # no staging file left behind
    assert KeptTables(str(tmp_path), KEEP).take(part, ["a", "b"]) is None  # a keeping pass parses
    taken = KeptTables(str(tmp_path), TAKE).take(part, ["a", "b"])
    assert taken.equals(TABLE) and os.listdir(tmp_path) == []
    assert KeptTables(str(tmp_path), TAKE).take(part, ["a", "b"]) is None  # taken: the next attempt parses
    KeptTables(str(tmp_path), TAKE).keep(part, TABLE)  # a taking pass keeps nothing
    assert os.listdir(tmp_path) == []


def test_only_parts_within_the_bounds_are_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(kept_tables, "KEPT_BYTES", 4096)
    monkeypatch.setattr(kept_tables, "KEPT_MIN_BYTES", 1000)
    keeping = KeptTables(str(tmp_path), KEEP)
    keeping.keep(Slice(0, 10, 4096), TABLE)
    keeping.keep(Slice(1, 4096, 8192), TABLE)  # ends beyond KEPT_BYTES
    keeping.keep(Slice(2, 10, 900), TABLE)  # smaller than KEPT_MIN_BYTES
    assert os.listdir(tmp_path) == ["000000-10-4096.arrow"]


def test_a_table_of_other_columns_an_unreadable_file_or_a_fifo_is_parsed_again(tmp_path):
    part = Slice(0, 0, 10)
    KeptTables(str(tmp_path), KEEP).keep(part, TABLE)
    assert KeptTables(str(tmp_path), TAKE).take(part, ["a"]) is None and os.listdir(tmp_path) == []
    taking = KeptTables(str(tmp_path), TAKE)
    with open(taking.path(part), "wb") as stream:
        stream.write(b"ARROW1 not a table")
    assert taking.take(part, ["a", "b"]) is None and os.listdir(tmp_path) == []
    os.mkfifo(taking.path(part))  # never opened: a FIFO would block a worker until a writer came
    assert taking.take(part, ["a", "b"]) is None and os.listdir(tmp_path) == []


def test_a_failed_write_keeps_nothing_and_fails_nothing(tmp_path):
    blocked = tmp_path / "kept"
    blocked.write_bytes(b"a file where the directory would be")
    KeptTables(str(blocked), KEEP).keep(Slice(0, 0, 10), TABLE)
    assert os.listdir(tmp_path) == ["kept"] and KeptTables(str(blocked), TAKE).take(Slice(0, 0, 10), ["a", "b"]) is None
