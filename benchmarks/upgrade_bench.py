"""Bytes before and after `tfrecorder.upgrade()`, and its speed, on a TFRecorder 2.0 dataset.

    .venv/bin/python benchmarks/upgrade_bench.py                 # 200 photo-like 500x375 JPEGs
    .venv/bin/python benchmarks/upgrade_bench.py --images 50     # quick

The legacy directories are written the way TFRecorder 2.0 wrote them (tests/support/tfrecorder2_writer.py:
base64 raw pixels, gzip shards by default, also uncompressed), from the same photo-like JPEGs the
conversion benchmark uses; each is upgraded once, locally. Reported: the legacy shard bytes, the
upgraded shard bytes (lossless PNG), their ratio, the original JPEG bytes for reference, and the
upgrade's wall-clock time.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

PHOTO_SIZE = (375, 500)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=200)
    args = parser.parse_args()

    import pandas as pd
    from PIL import Image

    import tfrecorder
    from tfrecorder.sample_data import encode_image, photo_array
    from support.tfrecorder2_writer import write_tfrecorder2_dir

    from PIL import ImageFilter

    corpora = {  # the conversion benchmark's noisy photos, and the same blurred (closer to camera images)
        "noisy": lambda i: Image.fromarray(photo_array(*PHOTO_SIZE, i)),
        "smooth": lambda i: Image.fromarray(photo_array(*PHOTO_SIZE, i)).filter(ImageFilter.GaussianBlur(2)),
    }
    for corpus, make in corpora.items():
        work = HERE / ".out" / "upgrade" / corpus
        shutil.rmtree(work, ignore_errors=True)
        (work / "images").mkdir(parents=True)
        rows = []
        for i in range(args.images):
            path = work / "images" / f"{i:05d}.jpg"
            path.write_bytes(encode_image(make(i), "JPEG", quality=87))
            rows.append({"split": ("TRAIN", "TRAIN", "TRAIN", "VALIDATION", "TEST")[i % 5], "image_uri": str(path),
                         "label": ("cat", "dog", "fox")[i % 3]})
        jpeg_bytes = sum(p.stat().st_size for p in (work / "images").iterdir())
        print(f"{corpus}: {args.images} {PHOTO_SIZE[1]}x{PHOTO_SIZE[0]} JPEGs, {jpeg_bytes:,} bytes as files")
        for compression in ("gzip", None):
            legacy = write_tfrecorder2_dir(work / f"legacy-{compression}", pd.DataFrame(rows), compression=compression)
            started = time.perf_counter()
            result = tfrecorder.upgrade(legacy, work / f"upgraded-{compression}")
            elapsed = time.perf_counter() - started
            print(f"  TFRecorder 2.0 {compression or 'uncompressed'}: {result['input_bytes']:,} bytes -> upgraded "
                  f"{result['output_bytes']:,} bytes ({result['input_bytes'] / result['output_bytes']:.1f}x smaller), "
                  f"{sum(result['written'].values())} records in {elapsed:.1f} s")


if __name__ == "__main__":
    main()
