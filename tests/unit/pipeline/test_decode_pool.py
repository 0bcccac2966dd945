"""beam_pipelines.workers.decode_pool: a batch's images decoded on a thread pool, verdicts identical to decoding inline."""
from __future__ import annotations

import threading

import pytest

from beam_pipelines.workers.decode_pool import DecodePool
from support import imagegen
from tfrecorder.errors import RowError
from tfrecorder.io import decode_check


def batch() -> dict:
    """Fetched images as the fetcher returns them: good and broken bytes, and a read failure."""
    fetched = {f"good/{name}": data for name, (data, _fmt, _ch) in imagegen.odd_images().items()}
    fetched.update({f"bad/{name}": data for name, (data, _reason) in imagegen.broken_images().items()})
    fetched["unreadable.jpg"] = RowError("missing image: no such file")
    return fetched


def test_pool_verdicts_are_the_inline_decode_verdicts():
    fetched = batch()
    pool = DecodePool(threads=2)
    try:
        pending = pool.submit(fetched)
        for uri, data in fetched.items():
            if isinstance(data, bytes):
                assert pending.verdict(uri, data) == decode_check.decode(data), uri
        pending.wait()
    finally:
        pool.close()
    assert any(isinstance(decode_check.decode(d), str) for d in fetched.values() if isinstance(d, bytes))


def test_images_not_submitted_are_decoded_inline():
    data = imagegen.odd_images()["rgb.jpg"][0]
    pool = DecodePool(threads=1)
    try:
        pending = pool.submit({"unreadable.jpg": RowError("missing image")})  # read failures are not decoded
        assert pending.verdict("other.jpg", data) == decode_check.decode(data)
        pending.wait()
    finally:
        pool.close()


def test_decoding_runs_on_the_pool_threads_and_the_pool_restarts_after_close():
    data = imagegen.odd_images()["rgb.png"][0]
    pool = DecodePool(threads=2)
    before = {t.name for t in threading.enumerate()}
    pending = pool.submit({f"{i}.png": data for i in range(4)})
    pending.wait()
    started = {t.name for t in threading.enumerate()} - before
    assert started and all(name.startswith("tfrecorder-decode") for name in started)
    pool.close()
    assert not any(t.name.startswith("tfrecorder-decode") for t in threading.enumerate())
    pool.close()  # twice is harmless
    again = pool.submit({"x.png": data})
    assert again.verdict("x.png", data) == decode_check.decode(data)
    pool.close()


def test_a_pool_needs_a_thread():
    with pytest.raises(ValueError, match="threads must be >= 1, got 0"):
        DecodePool(threads=0)


def test_a_hashing_pool_gives_verdicts_and_perceptual_hashes():
    from support.natural_images import encoded, photo
    from beam_pipelines.workers.decode_pool import DecodePool
    from tfrecorder.io.perceptual_hash import perceptual_hash

    jpeg, png = encoded(photo(1), "JPEG"), encoded(photo(2), "PNG")
    pool = DecodePool(2, hashes=True)
    try:
        pending = pool.submit({"a.jpg": jpeg, "b.png": png, "c.jpg": b"not an image"})
        assert pending.verdict("a.jpg", jpeg).format == "jpeg" and pending.verdict("b.png", png).format == "png"
        assert isinstance(pending.verdict("c.jpg", b"not an image"), str)
        assert pending.perceptual_hash("a.jpg") == perceptual_hash(jpeg)  # the same hash, from the verdict's decode
        assert pending.perceptual_hash("b.png") == perceptual_hash(png)
        assert pending.perceptual_hash("c.jpg") is None and pending.perceptual_hash("unknown") is None
    finally:
        pool.close()
