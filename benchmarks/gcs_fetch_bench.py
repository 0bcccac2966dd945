"""Image fetch throughput from GCS, sequential vs concurrent, at an injected per-request latency.

A GCS emulator runs in a child process behind a delaying proxy in another (tests/support/gcs_proxy.py,
127.0.0.1 only):
every request waits --delay-ms before it is served, like a real object store's latency. Images are
read with the same Fetcher + read_image the pipeline uses, in batches of the pipeline's batch size.
With --convert it also times whole conversions of the 60-image sample (gs:// CSV + images → gs://
output): directly against the emulator, and behind the delaying proxy at fetch_concurrency 1 and 16.

    .venv/bin/python benchmarks/gcs_fetch_bench.py [--images 256] [--delay-ms 20] [--repeat 3] [--convert]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import pandas as pd  # noqa: E402

from beam_pipelines.steps.fetch_images import Fetcher  # noqa: E402
from beam_pipelines.steps.encode_rows import read_image  # noqa: E402
from tfrecorder.options.job_config import JobConfig  # noqa: E402
from tfrecorder.sample_data import make_sample_dataset  # noqa: E402

BATCH = JobConfig.__dataclass_fields__["batch_size"].default
CONCURRENCIES = (1, 4, 8, 16, 32)


def serve(*args: str) -> tuple[subprocess.Popen, str]:
    """Run a tests/ helper script in its own process (its own interpreter lock); returns it and its URL."""
    child = subprocess.Popen([sys.executable, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return child, child.stdout.readline().strip()


def upload_sample(emulator: str, count: int, workdir: str) -> tuple[list[str], pd.DataFrame]:
    """Upload `count` sample images to gs://bench-images/photos/; returns their URLs and a gs:// table."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage as gcs_storage

    os.environ["STORAGE_EMULATOR_HOST"] = emulator
    client = gcs_storage.Client(project="bench", credentials=AnonymousCredentials())
    images, out = client.create_bucket("bench-images"), client.create_bucket("bench-out")
    del out
    table = pd.read_csv(make_sample_dataset(workdir, count=count))
    urls = []
    for path in table["image_uri"]:
        name = f"photos/{Path(path).name}"
        images.blob(name).upload_from_filename(path)
        urls.append(f"gs://bench-images/{name}")
    table["image_uri"] = urls
    images.blob("data.csv").upload_from_string(table.head(60).to_csv(index=False))
    return urls, table


def fetch_rate(urls: list[str], concurrency: int) -> float:
    fetcher = Fetcher(read_image, concurrency)
    started = time.perf_counter()
    for start in range(0, len(urls), BATCH):
        fetched = fetcher.fetch(urls[start:start + BATCH])
        assert all(isinstance(v, bytes) for v in fetched.values()), "a fetch failed"
    elapsed = time.perf_counter() - started
    fetcher.close()
    return len(urls) / elapsed


def convert_seconds(host: str, **options) -> float:
    import tfrecorder

    os.environ["STORAGE_EMULATOR_HOST"] = host
    started = time.perf_counter()
    result = tfrecorder.convert("gs://bench-images/data.csv", "gs://bench-out/jobs", **options)
    assert sum(result["written"].values()) == 60, result
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=3, help="runs per setting; the best is reported (less noise)")
    parser.add_argument("--convert", action="store_true", help="also time 60-row gs:// → gs:// conversions")
    args = parser.parse_args()
    emulator_process, emulator = serve(str(ROOT / "tests" / "support" / "gcs_emulator.py"))
    proxy_process, proxy = serve(str(ROOT / "tests" / "support" / "gcs_proxy.py"), "--upstream", emulator, "--delay-ms", str(args.delay_ms))
    try:
        with tempfile.TemporaryDirectory() as workdir:
            urls, _table = upload_sample(emulator, args.images, workdir)
            os.environ["STORAGE_EMULATOR_HOST"] = proxy
            fetch_rate(urls[:BATCH], 4)  # warm up: client, connection pool
            rates = {c: max(fetch_rate(urls, c) for _ in range(args.repeat)) for c in CONCURRENCIES}
            print(f"\nImage fetch from the GCS emulator behind a {args.delay_ms:g} ms proxy, "
                  f"{len(urls)} images, batches of {BATCH}, best of {args.repeat}")
            print(f"{'fetch_concurrency':>18} | {'images/s':>9} | {'vs sequential':>13}")
            print(f"{'-' * 18}-+-{'-' * 9}-+-{'-' * 13}")
            for concurrency, rate in rates.items():
                print(f"{concurrency:>18} | {rate:>9.1f} | {rate / rates[1]:>12.1f}x")
            if args.convert:
                print("\n60-row gs:// CSV + gs:// images → gs:// output (wall time of convert())")
                convert_seconds(emulator)  # warm up imports and Beam
                rows = [("emulator, no added latency (default options)", convert_seconds(emulator)),
                        (f"{args.delay_ms:g} ms proxy, fetch_concurrency=1", convert_seconds(proxy, fetch_concurrency=1)),
                        (f"{args.delay_ms:g} ms proxy, fetch_concurrency=16", convert_seconds(proxy, fetch_concurrency=16))]
                for label, seconds in rows:
                    print(f"{label:>48} | {seconds:6.2f} s")
    finally:
        for child in (proxy_process, emulator_process):
            child.stdin.close()
            child.wait(timeout=30)


if __name__ == "__main__":
    main()
