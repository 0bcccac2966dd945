"""The batch image fetcher: bounded concurrency, one pool reused across batches, order-independent results."""
from __future__ import annotations

import random
import threading
import time

import pytest

from beam_pipelines.steps.fetch_images import Fetcher, reader_for
from tfrecorder.errors import RowError


class SlowReads:
    """Reads that take a random few milliseconds, recording how many ran at once and on which threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = self.peak = 0
        self.calls: list[str] = []
        self.threads: set[str] = set()

    def __call__(self, uri: str) -> bytes:
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            self.calls.append(uri)
            self.threads.add(threading.current_thread().name)
        time.sleep(random.uniform(0.001, 0.01))
        with self.lock:
            self.in_flight -= 1
        if uri.startswith("bad"):
            raise RowError(f"missing file: {uri}")
        return uri.encode() * 3


def test_results_match_sequential_reads_whatever_the_completion_order():
    uris = [f"img-{i}" for i in range(40)] + ["bad-1", "img-3", "img-3"]
    sequential = Fetcher(SlowReads(), 1).fetch(uris)
    fetcher = Fetcher(SlowReads(), 8)
    concurrent = fetcher.fetch(uris)
    fetcher.close()
    assert list(concurrent) == list(dict.fromkeys(uris))  # keyed in request order
    assert {u: v for u, v in concurrent.items() if u != "bad-1"} == {u: v for u, v in sequential.items() if u != "bad-1"}
    assert str(concurrent["bad-1"]) == str(sequential["bad-1"]) == "missing file: bad-1"
    read = reader_for(concurrent)
    assert read("img-5") == b"img-5" * 3
    with pytest.raises(RowError, match="missing file: bad-1"):
        read("bad-1")


def test_concurrency_is_bounded_and_each_uri_read_once():
    reads = SlowReads()
    fetcher = Fetcher(reads, 4)
    fetcher.fetch([f"img-{i % 30}" for i in range(90)])
    fetcher.close()
    assert 1 < reads.peak <= 4
    assert sorted(reads.calls) == sorted(f"img-{i}" for i in range(30))


def test_one_pool_serves_every_batch_until_closed():
    reads = SlowReads()
    fetcher = Fetcher(reads, 3)
    for batch in range(5):
        fetcher.fetch([f"b{batch}-{i}" for i in range(12)])
    assert len(reads.threads) <= 3 and all(t.startswith("tfrecorder-fetch") for t in reads.threads)
    fetcher.close()
    alive = {t.name for t in threading.enumerate()}
    assert not alive & reads.threads


def test_sequential_fetcher_starts_no_threads():
    reads = SlowReads()
    Fetcher(reads, 1).fetch(["a", "b", "c"])
    assert reads.threads == {threading.current_thread().name}


def test_bound_must_be_positive():
    with pytest.raises(ValueError, match="max_workers"):
        Fetcher(SlowReads(), 0)


@pytest.mark.parametrize("bad", [0, -1, 129, 2.0, "8", True])
def test_convert_rejects_a_bad_fetch_concurrency_before_any_pipeline(bad, image_table, tmp_path):
    import tfrecorder

    with pytest.raises(ValueError, match="fetch_concurrency must be an integer from 1 to 128"):
        tfrecorder.convert(image_table, tmp_path, fetch_concurrency=bad)
    assert list(tmp_path.iterdir()) == []
