"""TensorFlow's own verdict on image bytes: the exact test of "this image decodes in training".

`validate="decode"` (the default) writes an image only when `tf.io.decode_image(data,
expand_animations=False)` accepts it, and discards it only when that call fails: TensorFlow itself is
the decoder, so the verdict cannot drift from what a training job's `tf.data` pipeline will do. Pillow
was measured as a TensorFlow-free alternative and disagrees with TensorFlow on mutated BMP, GIF, PNG,
JPEG and lossless WebP files (tests/unit/io/test_decode_check.py keeps the oracle fuzz that proves this module
exact).

Two shortcuts keep it cheap without changing any verdict:
- JPEG is decoded with `tf.io.decode_jpeg(ratio=8)`: libjpeg still entropy-decodes every block (where
  damage shows) but skips most of the pixel work (~0.9 ms instead of ~1.5 ms for a 500×375 photo);
  the oracle fuzz checks it accepts and rejects exactly what the full decode does.
- A header declaring more than `images.MAX_PIXELS` is refused before decoding ("image too large"), so
  a decompression bomb never allocates its pixels — the one case where a decodable image is discarded.

The kernels run through TensorFlow's C API (tfrecorder.io.tensorflow_kernels): the very ops those
Python calls run, loaded in ~0.4 s instead of the Python package's ~2 s import, and without the GIL, so
callers spread `decode()` over threads (beam_pipelines.workers.decode_pool).
"""
from __future__ import annotations

import io
from typing import Optional, Union

from PIL import Image

from tfrecorder.io import tensorflow_kernels
from tfrecorder.io.image_probe import MAX_PIXELS, ImageInfo, InvalidImage, parse_header, probe_image

DECODE = "decode"  # every written image decodes with TensorFlow (the default)
HEADER = "header"  # cheap structural checks only (the fast opt-in)
VALIDATIONS = (DECODE, HEADER)
DEFAULT_VALIDATION = DECODE

Verdict = Union[ImageInfo, str]  # what TensorFlow decodes it to, or the discard reason


def tensorflow_format(data: bytes) -> Optional[str]:
    """The format `tf.io.decode_image` detects from the leading bytes (None: it refuses the data)."""
    if data[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    if data[:3] == b"GIF":
        return "gif"
    if data[:2] == b"BM":
        return "bmp"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


def declared_pixels(data: bytes, header: Optional[ImageInfo]) -> Optional[int]:
    """Width × height as the header declares it (`header`: the byte parser's reading, when it had one),
    read without decoding; None when Pillow cannot read the header either."""
    if header is not None:
        return header.width * header.height
    try:
        with Image.open(io.BytesIO(data)) as image:  # lazy: reads the header only
            return image.width * image.height
    except Image.DecompressionBombError:  # Pillow's own refusal: more than twice its limit
        return 2 * MAX_PIXELS + 1
    except Exception:  # noqa: BLE001 - Pillow refusing the header is TensorFlow's call to make, not ours
        return None


def rejection_reason(data: bytes, message: str) -> str:
    """The discard reason for bytes TensorFlow refuses: the structural checks' reason when they name the
    damage (empty, not an image, truncated, ...), else TensorFlow's own message."""
    try:
        probe_image(data)
    except InvalidImage as exc:
        return str(exc)
    return f"corrupt image: TensorFlow cannot decode it ({message})"


def decode(data: bytes, kernels: Optional[tensorflow_kernels.Kernels] = None) -> Verdict:
    """Decode `data` with TensorFlow's kernels (`kernels`: this process's, by default): the ImageInfo
    `tf.io.decode_image` yields, or the discard reason."""
    fmt = tensorflow_format(data)
    if fmt is None:
        return rejection_reason(data, "unknown image format")
    header = parse_header(data)
    pixels = declared_pixels(data, header)
    if pixels is not None and pixels > MAX_PIXELS:
        return f"image too large: {pixels} pixels exceeds {MAX_PIXELS}"
    kernels = kernels or tensorflow_kernels.kernels()
    try:
        if fmt == "jpeg":
            channels = kernels.decode_jpeg_ratio_8(data)[-1]
            if header is not None and header.format == "jpeg":
                return ImageInfo("jpeg", header.height, header.width, channels)
        height, width, channels = kernels.decode_image(data)  # not JPEG, or an unusual JPEG header
    except tensorflow_kernels.DecodeFailed as exc:
        return rejection_reason(data, str(exc) or "decode failed")
    return ImageInfo(fmt, height, width, channels)


def check_image(data: bytes, validate: str, verdict: Optional[Verdict] = None) -> ImageInfo:
    """The image's info under the validation mode, or InvalidImage(reason) when it is refused.

    `verdict`: TensorFlow's verdict when the caller already decoded the bytes (in parallel); decode mode
    decodes here otherwise. Header mode runs the cheap structural checks only.
    """
    if validate == HEADER:
        return probe_image(data)
    verdict = decode(data) if verdict is None else verdict
    if isinstance(verdict, str):
        raise InvalidImage(verdict)
    return verdict
