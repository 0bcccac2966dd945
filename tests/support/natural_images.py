"""Natural-looking synthetic photos and their planted near-duplicates (issue 29's near-duplicate evaluation).

A photo is a smooth random colour field (a few random values per axis, upsampled bicubically), a handful of
random shapes in random colours, then a light blur and sensor-like noise: distinct photos share no structure,
as distinct natural images do not, yet each has the low-frequency content perceptual hashes look at.
Variants are what datasets pick up in practice: a JPEG re-encode at quality 75, a 0.8× resize, a 2% crop
and a PNG↔JPEG format change.
"""
from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

VARIANTS = ("jpeg_q75", "resize_0.8", "crop_2pct", "format_swap")


def photo(seed: int, size: tuple[int, int] = (320, 240)) -> Image.Image:
    """A distinct natural-looking RGB image of `size` (width, height)."""
    rng = np.random.default_rng(seed)
    width, height = size
    grid = rng.integers(0, 256, (int(rng.integers(2, 6)), int(rng.integers(2, 6)), 3), dtype=np.uint8)
    image = Image.fromarray(grid).resize((width, height), Image.BICUBIC)
    draw = ImageDraw.Draw(image)
    for _ in range(int(rng.integers(3, 9))):
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        x0, y0 = int(rng.integers(-width // 4, width)), int(rng.integers(-height // 4, height))
        x1, y1 = x0 + int(rng.integers(width // 10, width // 2)), y0 + int(rng.integers(height // 10, height // 2))
        kind = rng.integers(0, 3)
        if kind == 0:
            draw.ellipse((x0, y0, x1, y1), fill=colour)
        elif kind == 1:
            draw.rectangle((x0, y0, x1, y1), fill=colour)
        else:
            points = [(int(rng.integers(0, width)), int(rng.integers(0, height))) for _ in range(3)]
            draw.polygon(points, fill=colour)
    image = image.filter(ImageFilter.GaussianBlur(radius=float(rng.uniform(0.5, 2.0))))
    noisy = np.asarray(image, dtype=np.float32) + rng.normal(0, 6, (height, width, 3))
    return Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))


def encoded(image: Image.Image, image_format: str, quality: int = 92) -> bytes:
    out = io.BytesIO()
    image.save(out, format=image_format, **({"quality": quality} if image_format == "JPEG" else {}))
    return out.getvalue()


def variant(original: bytes, kind: str) -> tuple[bytes, str]:
    """A near-duplicate of encoded image bytes: (bytes, file extension)."""
    with Image.open(io.BytesIO(original)) as opened:
        image = opened.convert("RGB")
        source_format = opened.format
    if kind == "jpeg_q75":
        return encoded(image, "JPEG", 75), "jpg"
    if kind == "resize_0.8":
        return encoded(image.resize((int(image.width * 0.8), int(image.height * 0.8)), Image.BILINEAR), "JPEG"), "jpg"
    if kind == "crop_2pct":
        dx, dy = max(1, image.width // 100), max(1, image.height // 100)  # 1% off each side: 2% of each dimension
        return encoded(image.crop((dx, dy, image.width - dx, image.height - dy)), "JPEG"), "jpg"
    if kind == "format_swap":
        return (encoded(image, "PNG"), "png") if source_format == "JPEG" else (encoded(image, "JPEG"), "jpg")
    raise ValueError(kind)
