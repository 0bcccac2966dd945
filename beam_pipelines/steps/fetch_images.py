"""Fetch the image bytes a batch of rows needs, with bounded concurrency.

Reading one object from a remote store costs tens of milliseconds of latency, so a batch's images
are fetched by a thread pool of at most `max_workers` threads, created once per DoFn instance and
reused for every batch. Memory stays bounded: only one batch's images are in flight or held at a
time. Results are keyed by URI, so they do not depend on completion order. A failure to read one
image is kept as that row's RowError, never raised.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Optional, Union

from tfrecorder.errors import RowError

Fetched = dict[str, Union[bytes, RowError]]


def _read_one(read: Callable[[str], bytes], uri: str) -> Union[bytes, RowError]:
    try:
        return read(uri)
    except RowError as exc:
        return exc


class Fetcher:
    """Reads batches of URIs with up to `max_workers` concurrent reads; `close()` stops the threads."""

    def __init__(self, read: Callable[[str], bytes], max_workers: int = 1) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        self._read = read
        self.max_workers = max_workers
        self._pool: Optional[ThreadPoolExecutor] = None

    def fetch(self, uris: Iterable[str]) -> Fetched:
        """Read every distinct URI once; returns {uri: bytes or RowError}."""
        distinct = list(dict.fromkeys(uris))
        if self.max_workers == 1 or len(distinct) <= 1:
            return {uri: _read_one(self._read, uri) for uri in distinct}
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.max_workers, thread_name_prefix="tfrecorder-fetch")
        return dict(zip(distinct, self._pool.map(lambda uri: _read_one(self._read, uri), distinct)))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def reader_for(fetched: Fetched) -> Callable[[str], bytes]:
    """A read function over already-fetched results (raises the stored RowError)."""

    def read(uri: str) -> bytes:
        result = fetched[uri]
        if isinstance(result, RowError):
            raise result
        return result

    return read
