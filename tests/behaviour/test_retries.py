"""Retry safety: every bundle of every step replayed once (Beam's direct_runner_bundle_repeat, which
re-runs each bundle with its side effects kept and its outputs dropped) gives exactly the output of a
normal run, and leaves no temporary files.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

import tfrecorder
from beam_pipelines.steps import part_commits
from tfrecorder.format import file_names
from tfrecorder.io import storage
from tfrecorder.sources import csv_slicing
from tfrecorder.sample_data import make_sample_dataset
from support.replay import REPLAY, snapshot

@pytest.fixture(scope="module")
def table(tmp_path_factory) -> pd.DataFrame:
    """40 sample images, plus rows discarded for a missing image and for an unknown split."""
    frame = pd.read_csv(make_sample_dataset(tmp_path_factory.mktemp("retries"), count=40))
    frame.loc[3, "image_uri"] = "/no/such/image.jpg"
    frame.loc[11, "image_uri"] = "/no/such/other.jpg"
    frame.loc[17, "split"] = "HOLDOUT"
    return frame


@pytest.fixture(scope="module")
def csv_source(table, tmp_path_factory) -> Path:
    """The table as CSV, with one malformed line (too many fields) at the end."""
    path = tmp_path_factory.mktemp("csv") / "data.csv"
    path.write_text(table.to_csv(index=False) + "TRAIN,/x.jpg,cat,extra\n")
    return path


@pytest.fixture
def piece_writes(monkeypatch) -> list[str]:
    """Paths of piece files opened for writing (proves the replay really re-ran the writing bundles)."""
    opened: list[str] = []
    real_open_write = storage.open_write

    def watched(path):
        if f"{os.sep}_pieces{os.sep}" in path and path.endswith(".part"):
            opened.append(path)
        return real_open_write(path)

    monkeypatch.setattr(storage, "open_write", watched)
    return opened


@pytest.fixture
def part_lookups(monkeypatch) -> list[bool]:
    """Whether each look-up of a part's manifest found it committed (issue 27: a replayed attempt of a
    part finds the first attempt's manifest and emits it, writing nothing again)."""
    found: list[bool] = []
    real_committed = part_commits.committed

    def watched(config, part):
        manifest = real_committed(config, part)
        found.append(manifest is not None)
        return manifest

    monkeypatch.setattr(part_commits, "committed", watched)
    return found


CASES = {
    "csv": dict(),
    "dataframe": dict(source="frame"),
    "gzip": dict(compression="gzip"),
    "num_shards": dict(num_shards=3),
    "tiny_shards": dict(max_shard_bytes=20_000),
}


@pytest.mark.parametrize("case", CASES)
def test_replaying_every_bundle_gives_the_same_job(case, table, csv_source, tmp_path, piece_writes, part_lookups):
    options = dict(CASES[case])
    source = table if options.pop("source", None) == "frame" else csv_source
    normal = tfrecorder.convert(source, tmp_path / "normal", job_label="retry", progress=False, **options)
    normal_pieces = len(piece_writes)
    replayed = tfrecorder.convert(source, tmp_path / "replayed", job_label="retry", progress=False,
                                  dataflow_options=REPLAY, **options)
    # every writing bundle ran twice; the second attempt of a part found it committed and wrote nothing
    assert len(piece_writes) == 2 * normal_pieces > 0
    assert part_lookups.count(True) == part_lookups.count(False) // 2 > 0
    expected, got = snapshot(normal["tfrecord_dir"]), snapshot(replayed["tfrecord_dir"])
    assert got == expected
    assert got["metadata"]["discarded"] == (4 if source is csv_source else 3)
    assert sum(len(records) for split in got["records"].values() for records in split) == \
        got["metadata"]["records_written"] == 40 - 3
    for out in ("normal", "replayed"):
        assert [p.name for p in (tmp_path / out).iterdir()] == [Path(normal["tfrecord_dir"]).name if out == "normal"
                                                                 else Path(replayed["tfrecord_dir"]).name]


def test_replayed_discard_file_lists_each_discarded_row_once(table, csv_source, tmp_path):
    result = tfrecorder.convert(csv_source, tmp_path, progress=False, dataflow_options=REPLAY)
    lines = Path(result["tfrecord_dir"], file_names.DISCARD_FILE).read_text().splitlines()
    assert len(lines) == 1 + 4
    assert json.loads(Path(result["tfrecord_dir"], file_names.METADATA_FILE).read_text())["discard_reasons"] == {
        "missing file": 2, "unknown split": 1, "malformed CSV row": 1}


def test_replaying_every_bundle_of_a_gs_job_gives_the_same_job(gcs, table, tmp_path):
    """gs:// output: assembly, discard merge and the parallel publish, each run twice."""
    gcs.bucket("tfr-retries")
    jobs = {}
    for name, options in (("normal", {}), ("replayed", {"dataflow_options": REPLAY})):
        result = tfrecorder.convert(table, "gs://tfr-retries/out", job_label=name, progress=False, num_shards=2,
                                    compression="gzip", **options)
        local = tmp_path / name
        for url in gcs.list(result["tfrecord_dir"] + "/"):
            (local / url.rsplit("/", 1)[1]).parent.mkdir(parents=True, exist_ok=True)
            (local / url.rsplit("/", 1)[1]).write_bytes(gcs.download(url))
        jobs[name] = snapshot(str(local))
    assert jobs["replayed"] == jobs["normal"]
    assert jobs["normal"]["metadata"]["discarded"] == 3
    assert [url for url in gcs.list("gs://tfr-retries/out/") if "/.incomplete-" in url] == []


def test_replaying_every_bundle_of_a_csv_counted_as_scanned_gives_the_same_job(tmp_path, monkeypatch):
    """A table CSV of several byte ranges: each scan unit counts and commits the slice its range most
    likely is, and every replayed scan, count and encode finds that work committed."""
    from beam_pipelines.steps import read_rows

    monkeypatch.setattr(csv_slicing, "RANGE_BYTES", 2_000)  # batches still pay (64 records a range)
    rows = [f"{['TRAIN', 'TRAIN', 'VALIDATION', 'TEST', 'BOGUS'][n % 5]},{n},{['cat', 'dog', 'owl'][n % 3]}"
            for n in range(1_000)]
    rows[40] += ",extra"  # a malformed line, numbered across the slices
    source = tmp_path / "table.csv"
    source.write_text("split,n,label\n" + "\n".join(rows) + "\n")
    scans = []
    real_scan = read_rows.ScanUnit.output_of

    def watched(self, unit):
        scans.append(self.counter is not None)
        return real_scan(self, unit)

    monkeypatch.setattr(read_rows.ScanUnit, "output_of", watched)
    normal = tfrecorder.convert(str(source), tmp_path / "normal", job_label="retry", progress=False)
    assert len(scans) > 3 and all(scans)  # the scan counted
    replayed = tfrecorder.convert(str(source), tmp_path / "replayed", job_label="retry", progress=False,
                                  dataflow_options=REPLAY)
    expected, got = snapshot(normal["tfrecord_dir"]), snapshot(replayed["tfrecord_dir"])
    assert got == expected
    assert got["metadata"]["discard_reasons"] == {"unknown split": 200, "malformed CSV row": 1}
    assert got["metadata"]["rows_in"] == 1_000
