"""A small, generated sample image dataset (real JPEG/PNG files and a split,image_uri,label CSV).

Used by `make demo`, the tests and the benchmarks, so nothing has to be downloaded. Images are
photo-like (gradients plus noise) so their JPEG sizes resemble real photos.
"""
from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import numpy as np
from PIL import Image

LABELS = ("cat", "dog", "fox")


def photo_array(height: int, width: int, seed: int) -> np.ndarray:
    """A photo-like RGB array: smooth colour waves plus sensor-like noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    base = np.stack(
        [
            128 + 100 * np.sin(x / (17 + seed % 7) + seed),
            128 + 100 * np.cos(y / (23 + seed % 5)),
            128 + 60 * np.sin((x + y) / 31),
        ],
        axis=-1,
    )
    noise = rng.normal(0, 18, size=(height, width, 3))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def encode_image(image: Image.Image, fmt: str, **kwargs) -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt, **kwargs)
    return out.getvalue()


def make_sample_dataset(directory: str | os.PathLike, count: int = 60, size: tuple[int, int] = (96, 128)) -> Path:
    """Write `count` labelled images (mostly JPEG, every fifth PNG) and data.csv; returns the CSV path.

    Splits follow an 80/10/10 pattern; the files are reused if they already exist.
    """
    root = Path(directory)
    image_dir = root / "images"
    image_dir.mkdir(parents=True, exist_ok=True)
    csv_path = root / "data.csv"
    rows = []
    for i in range(count):
        label = LABELS[i % len(LABELS)]
        fmt, suffix = ("PNG", "png") if i % 5 == 4 else ("JPEG", "jpg")
        path = image_dir / f"{label}_{i:04d}.{suffix}"
        if not path.exists():
            path.write_bytes(encode_image(Image.fromarray(photo_array(size[0], size[1], i)), fmt))
        split = "TRAIN" if i % 10 < 8 else ("VALIDATION" if i % 10 == 8 else "TEST")
        rows.append((split, str(path.resolve()), label))
    with open(csv_path, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["split", "image_uri", "label"])
        writer.writerows(rows)
    return csv_path
