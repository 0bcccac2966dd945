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
  the oracle fuzz checks it accepts and rejects exactly what the full decode does. With near-duplicate
  search the ratio is the perceptual hash's scale (8, 4, 2 or 1), fuzzed the same way, and the hash is
  computed from that decode's pixels.
- A header declaring more than `max_pixels` pixels (tfrecorder.io.image_headers reads it as TensorFlow's
  decoders do) is refused before decoding ("image too large"), so a decompression bomb never allocates
  its pixels; header mode refuses it the same way (images.checked_header, the one size guard).

What is discarded although TensorFlow decodes it, on purpose: an image over the pixel limit (a GIF
counts all its frames and its logical screen too), and an animated WebP, on which TensorFlow's decoder
corrupts its process's memory (a training job reading it would crash).

The kernels run through TensorFlow's C API (tfrecorder.io.tensorflow_kernels): the very ops those
Python calls run, loaded in ~0.4 s instead of the Python package's ~2 s import, and without the GIL, so
callers spread `decode()` over threads (beam_pipelines.workers.decode_pool).
"""
from __future__ import annotations

from typing import Optional, Union

from tfrecorder.io import tensorflow_kernels
from tfrecorder.io.image_headers import DEFAULT_MAX_IMAGE_PIXELS
from tfrecorder.errors import InvalidImage
from tfrecorder.io.image_probe import ImageInfo, checked_header, probe_image
from tfrecorder.io.perceptual_hash import pixels_hash_of

DECODE = "decode"  # every written image decodes with TensorFlow (the default)
HEADER = "header"  # cheap structural checks only (the fast opt-in)
VALIDATIONS = (DECODE, HEADER)
DEFAULT_VALIDATION = DECODE

Verdict = Union[ImageInfo, str]  # what TensorFlow decodes it to, or the discard reason


def rejection_reason(data: bytes, message: str, max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> str:
    """The discard reason for bytes TensorFlow refuses: the structural checks' reason when they name the
    damage (empty, not an image, truncated, ...), else TensorFlow's own message."""
    try:
        probe_image(data, max_pixels)
    except InvalidImage as exc:
        return str(exc)
    return f"corrupt image: TensorFlow cannot decode it ({message})"


def decode(data: bytes, kernels: Optional[tensorflow_kernels.Kernels] = None,
           max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS, hashes: Optional[list] = None) -> Verdict:
    """Decode `data` with TensorFlow's kernels (`kernels`: this process's, by default): the ImageInfo
    `tf.io.decode_image` yields, or the discard reason. Nothing is decoded unless the header passes the
    size guard (`max_pixels`). With a `hashes` list, the decode also appends the image's perceptual hash
    there, computed from its own pixels (near-duplicate search): a JPEG is then decoded at the hash's
    scale (1/8 down to 1/1, perceptual_hash.reduction) instead of 1/8 — every such ratio accepts and
    refuses exactly what the full decode does (tests/unit/io/test_decode_check.py), so the verdict is
    the same; other formats' `decode_image` hands its pixels over."""
    try:
        header = checked_header(data, max_pixels)
    except InvalidImage as exc:
        return str(exc)
    kernels = kernels or tensorflow_kernels.kernels()
    try:
        if hashes is not None:  # one decode for the verdict and the near-duplicate hash
            shape, phash = pixels_hash_of(kernels, data, header.format, header.width, header.height)
            hashes.append(phash)
            if header.format == "jpeg":  # the size is the frame header's
                return ImageInfo("jpeg", header.height, header.width, shape[-1])
            height, width, channels = shape
        elif header.format == "jpeg":  # the 1/8-scale decode; the size is the frame header's
            return ImageInfo("jpeg", header.height, header.width, kernels.decode_jpeg_ratio_8(data)[-1])
        else:
            height, width, channels = kernels.decode_image(data)
    except tensorflow_kernels.DecodeFailed as exc:
        return rejection_reason(data, str(exc) or "decode failed", max_pixels)
    return ImageInfo(header.format, height, width, channels)


def check_image(data: bytes, validate: str, verdict: Optional[Verdict] = None,
                max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> ImageInfo:
    """The image's info under the validation mode, or InvalidImage(reason) when it is refused.

    `verdict`: TensorFlow's verdict when the caller already decoded the bytes (in parallel, with the same
    `max_pixels`); decode mode decodes here otherwise. Header mode runs the cheap structural checks only.
    """
    if validate == HEADER:
        return probe_image(data, max_pixels)
    verdict = decode(data, max_pixels=max_pixels) if verdict is None else verdict
    if isinstance(verdict, str):
        raise InvalidImage(verdict)
    return verdict
