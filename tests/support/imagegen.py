"""Generate real image files of many kinds (and broken ones) for the tests.

Each odd image comes with the format and channel count TensorFlow reports for it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from tfrecorder.sample_data import encode_image as encode
from tfrecorder.sample_data import photo_array


def odd_images(seed: int = 0, size: tuple[int, int] = (24, 32)) -> dict[str, tuple[bytes, str, int]]:
    """name → (file bytes, expected format, expected channels from tf.io.decode_image)."""
    h, w = size
    rgb = Image.fromarray(photo_array(h, w, seed))
    gray = rgb.convert("L")
    rgba = rgb.convert("RGBA")
    rgba.putalpha(Image.fromarray((np.arange(h * w).reshape(h, w) % 256).astype(np.uint8)))
    palette = rgb.convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
    gray16 = Image.fromarray((np.asarray(gray).astype(np.uint16) * 257), mode="I;16")
    return {
        "rgb.jpg": (encode(rgb, "JPEG", quality=90), "jpeg", 3),
        "gray.jpg": (encode(gray, "JPEG"), "jpeg", 1),
        "cmyk.jpg": (encode(rgb.convert("CMYK"), "JPEG"), "jpeg", 3),
        "progressive.jpg": (encode(rgb, "JPEG", progressive=True), "jpeg", 3),
        "rgb.png": (encode(rgb, "PNG"), "png", 3),
        "gray.png": (encode(gray, "PNG"), "png", 1),
        "rgba.png": (encode(rgba, "PNG"), "png", 4),
        "palette.png": (encode(palette, "PNG"), "png", 3),
        "gray16.png": (encode(gray16, "PNG"), "png", 1),
        "png_named.jpg": (encode(rgb, "PNG"), "png", 3),
        "anim.gif": (encode(palette, "GIF"), "gif", 3),
        "rgb.bmp": (encode(rgb, "BMP"), "bmp", 3),
        "rgb.webp": (encode(rgb, "WEBP"), "webp", 3),
        "rgba.webp": (encode(rgba, "WEBP"), "webp", 4),
    }


def broken_images(seed: int = 0) -> dict[str, tuple[bytes, str]]:
    """name → (file bytes, expected discard reason prefix)."""
    jpeg = encode(Image.fromarray(photo_array(24, 32, seed)), "JPEG")
    png = encode(Image.fromarray(photo_array(24, 32, seed)), "PNG")
    return {
        "truncated.jpg": (jpeg[: len(jpeg) // 2], "truncated image"),
        "truncated.png": (png[: len(png) // 2], "truncated image"),
        "empty.jpg": (b"", "empty file"),
        "text.jpg": (b"this is not an image, just text\n" * 4, "not an image"),
    }


def write_files(directory: Path, files: dict[str, bytes]) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, data in files.items():
        path = directory / name
        path.write_bytes(data)
        paths[name] = path
    return paths
