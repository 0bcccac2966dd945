"""Does decoding release the GIL? The main thread counts pure-Python loop iterations per second while a
second thread runs (a) nothing, (b) tf.io.decode_image, (c) the same kernel through TensorFlow's C API
as conversions run it (tfrecorder.io.tensorflow_kernels, via ctypes), (d) sorted() of a big list, a C
call known to hold the GIL. If decoding held the GIL, (b) and (c) would starve the counter like (d)."""
from __future__ import annotations

import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from PIL import Image  # noqa: E402

from tfrecorder.io.tensorflow_kernels import kernels  # noqa: E402
from tfrecorder.sample_data import encode_image, photo_array  # noqa: E402

IMAGES = [encode_image(Image.fromarray(photo_array(375, 500, i)), "JPEG", quality=87) for i in range(20)]
BIG_LIST = [random.random() for _ in range(60_000)]


def work(kind: str, stop: threading.Event) -> None:
    i = 0
    while not stop.is_set():
        if kind == "decode":
            tf.io.decode_image(IMAGES[i % len(IMAGES)], expand_animations=False)
        elif kind == "c-api":
            kernels().decode_image(IMAGES[i % len(IMAGES)])
        elif kind == "sort":
            sorted(BIG_LIST)
        else:
            time.sleep(0.01)
        i += 1


def count(seconds: float = 1.5) -> float:
    """Pure-Python loop iterations per second of wall clock."""
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        n += 1
    return n / seconds


def main() -> None:
    results: dict[str, list[float]] = {"idle": [], "decode": [], "c-api": [], "sort": []}
    for _ in range(4):
        for kind, found in results.items():
            stop = threading.Event()
            thread = threading.Thread(target=work, args=(kind, stop))
            thread.start()
            found.append(count())
            stop.set()
            thread.join()
    idle = statistics.median(results["idle"])
    for kind, found in results.items():
        print(f"counter while another thread runs {kind:6s}: {statistics.median(found) / 1e6:.2f} M iterations/s "
              f"({statistics.median(found) / idle:.0%} of idle)")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
