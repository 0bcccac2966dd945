"""Fetch the image bytes a batch of rows needs, with bounded concurrency.

Reading one object from a remote store costs tens of milliseconds of latency, so a batch's images
are fetched by a small thread pool; results are keyed by URI, so they do not depend on completion
order. A failure to read one image is kept as that row's RowError, never raised.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Union

from tfrecorder.row_encoder import RowError

Fetched = dict[str, Union[bytes, RowError]]


def _read_one(read: Callable[[str], bytes], uri: str) -> Union[bytes, RowError]:
    try:
        return read(uri)
    except RowError as exc:
        return exc


def fetch_many(uris: Iterable[str], read: Callable[[str], bytes], max_workers: int = 1) -> Fetched:
    """Read every distinct URI once; returns {uri: bytes or RowError}."""
    distinct = list(dict.fromkeys(uris))
    if max_workers <= 1 or len(distinct) <= 1:
        return {uri: _read_one(read, uri) for uri in distinct}
    with ThreadPoolExecutor(max_workers=min(max_workers, len(distinct))) as pool:
        return dict(zip(distinct, pool.map(lambda uri: _read_one(read, uri), distinct)))


def reader_for(fetched: Fetched) -> Callable[[str], bytes]:
    """A read function over already-fetched results (raises the stored RowError)."""

    def read(uri: str) -> bytes:
        result = fetched[uri]
        if isinstance(result, RowError):
            raise result
        return result

    return read
