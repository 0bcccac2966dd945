"""Decode a batch's images with TensorFlow on every core while the DoFn's thread encodes rows.

TensorFlow's eager decode ops release the GIL, so a thread pool spreads validation decoding over the
machine's cores; the DoFn thread keeps doing the per-row Python work (probing, encoding, writing) and
waits for an image's verdict only when it reaches that row. One pool per DoFn instance, created on
first use and reused for every batch. Memory stays bounded: at most two batches' images are in flight
(a part's next batch is submitted before the current one is encoded: EncodeImageParts), and
`Pending.wait()` at the end of a batch makes sure none outlives it.
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Optional

from beam_pipelines.steps.fetch_images import Fetched
from tfrecorder.io import decode_check, tensorflow_kernels
from tfrecorder.io.image_headers import DEFAULT_MAX_IMAGE_PIXELS


def decode_and_hash(data: bytes, max_pixels: int) -> tuple[decode_check.Verdict, Optional[int]]:
    """TensorFlow's verdict and the image's perceptual hash (near-duplicate search, issue 29), both from
    one decode (decode_check.decode); None for an image refused."""
    hashes: list = []
    verdict = decode_check.decode(data, None, max_pixels, hashes=hashes)
    if not isinstance(verdict, decode_check.ImageInfo):
        return verdict, None
    return verdict, hashes[0] if hashes else None


class Pending:
    """The verdicts of one batch, as they complete: `verdict(uri, data)` waits for that image only."""

    def __init__(self, futures: dict[str, Future], max_pixels: int, hashes: bool = False) -> None:
        self._futures = futures
        self._max_pixels = max_pixels
        self._hashes = hashes

    def verdict(self, uri: str, data: bytes) -> decode_check.Verdict:
        future = self._futures.get(uri)
        if future is None:
            return decode_check.decode(data, max_pixels=self._max_pixels)
        return future.result()[0] if self._hashes else future.result()

    def perceptual_hash(self, uri: str) -> Optional[int]:
        """The image's perceptual hash, when the pool computes them (None: not computed or refused)."""
        future = self._futures.get(uri)
        return future.result()[1] if self._hashes and future is not None else None

    def wait(self) -> None:
        """Block until every decode of the batch has finished (rows discarded early never asked)."""
        wait(self._futures.values())


class DecodePool:
    """Runs `decode_check.decode` for a batch's fetched images on up to `threads` threads (images over
    `max_pixels` are refused unread); with `hashes`, `decode_and_hash` instead."""

    def __init__(self, threads: int, max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS, hashes: bool = False) -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.threads = threads
        self.max_pixels = max_pixels
        self.hashes = hashes
        self._pool: Optional[ThreadPoolExecutor] = None
        tensorflow_kernels.kernels()  # loaded once, here, before the decoding threads need them

    def submit(self, fetched: Fetched) -> Pending:
        """Start decoding every fetched image (read failures are the fetcher's to report)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="tfrecorder-decode")
        if self.hashes:
            return Pending({uri: self._pool.submit(decode_and_hash, data, self.max_pixels)
                            for uri, data in fetched.items() if isinstance(data, bytes)}, self.max_pixels, True)
        return Pending({uri: self._pool.submit(decode_check.decode, data, None, self.max_pixels)
                        for uri, data in fetched.items() if isinstance(data, bytes)}, self.max_pixels)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
