"""Index sidecars: derived from the bytes as they are written, in the DALI / `tfrecord` text format."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfrecorder.errors import CorruptDataError
from tfrecorder.format.file_names import index_file_name
from tfrecorder.format.record_index import format_index, parse_index, scan_index, write_index
from tfrecorder.format.framing import write_record


def framed(records: list[bytes]) -> bytes:
    stream = io.BytesIO()
    for record in records:
        write_record(stream, record)
    return stream.getvalue()


def expected_entries(records: list[bytes]) -> list[tuple[int, int]]:
    entries, offset = [], 0
    for record in records:
        entries.append((offset, len(record) + 16))
        offset += len(record) + 16
    return entries


@settings(max_examples=60, deadline=None)
@given(records=st.lists(st.binary(max_size=300), max_size=20), cut=st.integers(0, 20), landing=st.integers(0, 10**6))
def test_index_from_end_offsets_equals_a_scan_of_the_bytes(records, cut, landing):
    """A range of a piece's records (from its end offsets) lands anywhere in a shard: same lines as a scan."""
    from tfrecorder.format.record_index import entries_from_ends

    data = framed(records)
    scanned = list(scan_index(io.BytesIO(data)))
    assert scanned == expected_entries(records)
    ends = [offset + length for offset, length in scanned]
    cut = min(cut, len(records))
    start = ends[cut - 1] if cut else 0
    shifted = [(landing + offset - start, length) for offset, length in scanned[cut:]]
    assert list(entries_from_ends(ends[cut:], start, landing)) == shifted


def test_write_index_streams_lines_into_the_index_directory(tmp_path):
    entries = expected_entries([b"a" * 5, b"", b"b" * 70_000])
    name = write_index(str(tmp_path), "train-00000-of-00001.tfrecord", iter(entries))
    assert name == "index/train-00000-of-00001.tfrecord.index"
    assert parse_index((tmp_path / name).read_bytes()) == entries
    write_index(str(tmp_path), "train-00000-of-00001.tfrecord", iter(entries[:1]))  # a retry replaces it whole
    assert parse_index((tmp_path / name).read_bytes()) == entries[:1]


def test_text_format_round_trips_and_names_bad_lines():
    entries = [(0, 21), (21, 16), (37, 70_016)]
    text = format_index(entries)
    assert text == b"0 21\n21 16\n37 70016\n"
    assert parse_index(text) == entries
    with pytest.raises(CorruptDataError, match="index line 2"):
        parse_index(b"0 21\n21\n")
    assert index_file_name("train-00000-of-00004.tfrecord") == "index/train-00000-of-00004.tfrecord.index"


def test_converted_job_lists_an_index_per_shard_matching_its_records(converted):
    job = Path(converted["tfrecord_dir"])
    metadata = json.loads((job / "metadata.json").read_text())
    assert metadata["record_index"]["written"] is True
    for info in metadata["splits"].values():
        for shard in info["shards"]:
            assert shard["index_file"] == index_file_name(shard["file"])
            entries = parse_index((job / shard["index_file"]).read_bytes())
            with open(job / shard["file"], "rb") as stream:
                assert entries == list(scan_index(stream))
            assert len(entries) == shard["records"]
            assert sum(length for _offset, length in entries) == shard["bytes"]


def test_shards_of_piece_ranges_are_indexed_from_offsets_sidecars(image_table, tmp_path):
    """num_shards=1 over several bundles concatenates piece ranges: the index comes from their offsets sidecars."""
    import tfrecorder

    table = image_table[~image_table["image_uri"].str.contains("missing|directory|truncated|empty|text")]
    result = tfrecorder.convert(pd_concat(table, 8), tmp_path, num_shards=1)
    job = Path(result["tfrecord_dir"])
    metadata = json.loads((job / "metadata.json").read_text())
    for info in metadata["splits"].values():
        (shard,) = info["shards"]
        with open(job / shard["file"], "rb") as stream:
            assert parse_index((job / shard["index_file"]).read_bytes()) == list(scan_index(stream))
    assert tfrecorder.verify(str(job)).ok


def pd_concat(table, times: int):
    import pandas as pd

    return pd.concat([table] * times, ignore_index=True)


def test_gzip_jobs_write_no_index_and_say_so(image_table, tmp_path):
    import tfrecorder

    result = tfrecorder.convert(image_table.head(6), tmp_path, compression="gzip")
    job = Path(result["tfrecord_dir"])
    metadata = json.loads((job / "metadata.json").read_text())
    assert metadata["record_index"]["written"] is False and "gzip" in metadata["record_index"]["reason"]
    assert not (job / "index").exists()
    assert all("index_file" not in s for info in metadata["splits"].values() for s in info["shards"])


def test_index_array_is_compact_and_rejects_bad_files():
    from tfrecorder.format.record_index import index_array

    assert index_array(b"0 21\n21 16\n").tolist() == [[0, 21], [21, 16]]
    assert index_array(b"").shape == (0, 2)
    for bad in (b"0 21\n21\n", b"0 x\n", b"-1 5\n"):
        with pytest.raises(CorruptDataError, match="index"):
            index_array(bad)


def test_the_tfrecord_package_shards_our_files_by_our_index(converted):
    """The `tfrecord` PyPI reader (the DALI index format) splits a shard among workers by our index file.

    It runs in a subprocess: its Example protos clash with TensorFlow's in one process.
    """
    import importlib.util
    import subprocess
    import sys

    import tfrecorder

    if importlib.util.find_spec("tfrecord") is None:
        pytest.skip("the tfrecord package (a test dependency) is not installed")
    job = Path(converted["tfrecord_dir"])
    shard = json.loads((job / "metadata.json").read_text())["splits"]["TRAIN"]["shards"][0]
    script = (
        "import json, sys\n"
        "from tfrecord.reader import tfrecord_loader\n"
        "parts = [[[bytes(r['image_uri']).decode(), int(r['label'][0])] for r in tfrecord_loader(sys.argv[1], sys.argv[2],"
        " {'image_uri': 'byte', 'label': 'int'}, shard=(worker, 3))] for worker in range(3)]\n"
        "print(json.dumps(parts))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(job / shard["file"]), str(job / shard["index_file"])],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    parts = json.loads(done.stdout)
    assert all(parts) and sum(len(p) for p in parts) == shard["records"]
    ds = tfrecorder.data_source(str(job), "train")
    expected = [[ds[i]["image_uri"].decode(), int(ds[i]["label"])] for i in range(shard["records"])]
    assert [row for part in parts for row in part] == expected
