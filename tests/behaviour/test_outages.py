"""Outages fail, data problems discard: storage failures that outlast retries stop the conversion with
one clear error and nothing published; a missing object is a discarded row. Run on the GCS emulator
behind the fault-injecting proxy, with the retry window shortened to a few seconds.
"""
from __future__ import annotations

import csv
import os

import pandas as pd
import pytest

import tfrecorder
from support.readers import read_job
from tfrecorder.format import file_names
from tfrecorder.io import gcs
from tfrecorder.errors import StorageReadError
from tfrecorder.sample_data import make_sample_dataset

RETRY_WINDOW_SECONDS = 3.0


@pytest.fixture(scope="module")
def images(gcs, tmp_path_factory) -> dict[str, bytes]:
    """Four sample images uploaded to gs://tfr-outage/; URL → bytes."""
    frame = pd.read_csv(make_sample_dataset(tmp_path_factory.mktemp("outage"), count=4))
    uploaded = {}
    for path in frame["image_uri"]:
        url = f"gs://tfr-outage/{os.path.basename(path)}"
        data = open(path, "rb").read()
        gcs.upload(url, data)
        uploaded[url] = data
    return uploaded


@pytest.fixture
def short_retries(monkeypatch):
    monkeypatch.setattr(gcs, "RETRY", gcs.RETRY.with_timeout(RETRY_WINDOW_SECONDS))


def table(urls) -> pd.DataFrame:
    return pd.DataFrame({"split": "TRAIN", "image_uri": sorted(urls), "label": "a"})


def test_a_503_that_never_ends_fails_the_run_with_one_clear_error_and_publishes_nothing(
        proxy, images, short_retries, tmp_path):
    down = sorted(images)[1]
    proxy.fail(down[len("gs://tfr-outage/"):], 503, times=10**6)
    with pytest.raises(StorageReadError) as raised:
        tfrecorder.convert(table(images), tmp_path / "out", progress=False)
    kept, _fingerprint = sorted(os.listdir(tmp_path / "out"))  # issue 27: its committed work is kept for the next run
    assert kept.startswith(".incomplete-") and _fingerprint == ".resume-" + kept[len(".incomplete-"):]
    assert raised.value.strerror == (f"could not read {down}: gave up retrying: HTTP 503 ServiceUnavailable; "
                                     f"the conversion stopped and nothing was published; its committed work is "
                                     f"kept in {tmp_path / 'out' / kept}: the same call continues it")
    proxy.clear()  # the outage is over: the same call continues the job
    result = tfrecorder.convert(table(images), tmp_path / "out", progress=False)
    assert result["resumed"] is True and result["written"] == {"TRAIN": 4}
    assert os.listdir(tmp_path / "out") == [kept[len(".incomplete-"):]]


def test_a_503_that_ends_within_the_retry_window_writes_the_row(proxy, images, short_retries, tmp_path):
    flaky = sorted(images)[2]
    proxy.fail(flaky[len("gs://tfr-outage/"):], 503, times=3)
    result = tfrecorder.convert(table(images), tmp_path, progress=False)
    assert proxy.count(flaky[len("gs://tfr-outage/"):]) == 4
    assert (result["written"], result["discarded"]) == ({"TRAIN": 4}, 0)
    written = {ex["image_uri"].decode(): ex["image"] for exs in read_job(result["tfrecord_dir"]).values() for ex in exs}
    assert written == images


def test_a_404_is_a_missing_file_discard(proxy, images, short_retries, tmp_path):
    gone = sorted(images)[0]
    proxy.fail(gone[len("gs://tfr-outage/"):], 404, times=10**6)
    result = tfrecorder.convert(table(images), tmp_path, progress=False)
    assert (result["written"], result["discarded"]) == ({"TRAIN": 3}, 1)
    with open(os.path.join(result["tfrecord_dir"], file_names.DISCARD_FILE), newline="") as stream:
        assert [(r["image_uri"], r["reason"]) for r in csv.DictReader(stream)] == [(gone, f"missing file: {gone}")]


def test_an_outage_reported_only_as_text_by_a_worker_process_is_recognised():
    from tfrecorder.errors import translate_pipeline_error

    text = ("Error received from SDK harness for instruction 7: Traceback (most recent call last):\n  ...\n"
            "RuntimeError: tfrecorder.errors.StorageReadError: [Errno 5] could not read gs://b/x.jpg: gave up "
            "retrying: HTTP 503 ServiceUnavailable [while running 'EncodeAndWrite'] [while running 'Fused']\n")
    translated = translate_pipeline_error(RuntimeError(text), "/out")
    assert isinstance(translated, StorageReadError)
    assert translated.strerror == ("could not read gs://b/x.jpg: gave up retrying: HTTP 503 ServiceUnavailable; "
                                   "the conversion stopped and nothing was published")
    other = RuntimeError("ValueError: something else")
    assert translate_pipeline_error(other, "/out") is other


def test_the_cli_reports_an_outage_on_one_line(proxy, images, tmp_path):
    import subprocess
    import sys

    down = sorted(images)[3]
    proxy.fail(down[len("gs://tfr-outage/"):], 503, times=10**6)
    source = tmp_path / "rows.csv"
    table(images).to_csv(source, index=False)
    script = ("import sys; from tfrecorder import cli; from tfrecorder.io import gcs; "
              f"gcs.RETRY = gcs.RETRY.with_timeout({RETRY_WINDOW_SECONDS}); sys.exit(cli.main(sys.argv[1:]))")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": os.getcwd()}
    done = subprocess.run([sys.executable, "-c", script, "convert", "--source", str(source), "--output_dir",
                           str(tmp_path / "out")], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 1
    (kept,) = (name for name in os.listdir(tmp_path / "out") if name.startswith(".incomplete-"))
    assert done.stderr.strip().splitlines() == [
        f"tfrecorder: error: could not read {down}: gave up retrying: HTTP 503 ServiceUnavailable; "
        f"the conversion stopped and nothing was published; its committed work is kept in "
        f"{tmp_path / 'out' / kept}: the same call continues it"]
