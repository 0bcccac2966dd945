"""A 64-bit perceptual hash (pHash) of an image, from a small decode (issue 29: near-duplicate images).

The image is decoded small by TensorFlow — at 1/8 scale (`reduction`: less for small images), a JPEG
straight from its DCT coefficients (`tf.io.decode_jpeg(ratio=...)`), other formats decoded whole —
and its grey is area-averaged to 16×16; in the default validation mode that decode is the verdict's
own (tfrecorder.io.decode_check), so an image is decoded once, and the same bytes get the same hash in
every mode (Pillow's decode is the fallback only where TensorFlow does not load or refuses the bytes,
in header mode). The hash is the sign, against their median, of
the 8×8 lowest-frequency DCT coefficients but the constant one. Re-encoding, resizing, slight crops and
format changes move few bits (measured in docs/statistics.md); distinct pictures differ in about half.
The 16×16 grid (not pHash's usual 32×32) lets a 500×375 photo be hashed from the default mode's own 1/8
decode (63×47 pixels): on the planted set, variants drift no more than with 32×32 at 1/4 scale, whereas
32×32 at 1/8 let 2% crops drift up to 10 bits.
The caller has already bounded the image's pixels (tfrecorder.io.image_probe.checked_header), so
decoding here allocates nothing a hostile header could inflate beyond that bound.
"""
from __future__ import annotations

import functools
from typing import Optional

import numpy as np

from tfrecorder.errors import TensorFlowUnavailable
from tfrecorder.io import tensorflow_kernels
from tfrecorder.io.image_headers import read_header
from tfrecorder.io.image_probe import open_with_pillow

SIDE = 16  # grey thumbnail the DCT is taken of
METHOD = "phash-dct8-of-16x16"  # in resumable jobs' fingerprints: hashes of another method are not comparable
LOW = 8  # LOW×LOW lowest frequencies → 64 bits
_K = np.arange(SIDE)
_DCT = np.cos(np.pi * (2 * _K[None, :] + 1) * _K[:, None] / (2 * SIDE)).astype(np.float32)
_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)  # ITU-R 601-2, as Pillow's convert("L")
ROWS = 256  # rows of a large image made grey at a time
_POPCOUNT = np.array([bin(value).count("1") for value in range(256)], dtype=np.uint8)


_tensorflow_unavailable = False

MIN_SIDE = 2 * SIDE  # the reduced image keeps at least this many pixels a side (fewer: hashes drift)


def reduction(width: int, height: int) -> int:
    """The scale every image is decoded at before it is shrunk to SIDE×SIDE, whatever its format and the
    validation mode: 1/8 (what a JPEG's DCT gives directly, and the default mode's TensorFlow decode), or
    1/4, 1/2, 1 for images too small to keep MIN_SIDE pixels a side at 1/8. The same scale for every copy
    of a picture keeps a PNG and its JPEG re-encode, or a JPEG hashed from TensorFlow's pixels and one
    from Pillow's, a few bits apart."""
    for scale in (8, 4, 2):
        if min(width, height) // scale >= MIN_SIDE:
            return scale
    return 1


def perceptual_hash(data: bytes) -> Optional[int]:
    """The image's 64-bit pHash, or None when it decodes with neither TensorFlow nor Pillow (its row is
    still written): from TensorFlow's decode, as `decode_check.decode` computes it in the default
    validation mode (the same pixels, so the same hash, whatever the mode), else from Pillow's."""
    global _tensorflow_unavailable
    header = read_header(data)
    if header is not None and not _tensorflow_unavailable:
        try:
            kernels = tensorflow_kernels.kernels()
        except TensorFlowUnavailable:  # header mode without TensorFlow: Pillow's decode, a few bits apart
            kernels, _tensorflow_unavailable = None, True  # asked once per process, not once per image
        if kernels is not None:
            try:
                return pixels_hash_of(kernels, data, header.format, header.width, header.height)[1]
            except tensorflow_kernels.DecodeFailed:
                pass  # header mode writes what TensorFlow refuses: Pillow may still decode it
    return pillow_hash(data)


def pixels_hash_of(kernels: tensorflow_kernels.Kernels, data: bytes, image_format: str, width: int,
                   height: int) -> tuple[tuple[int, ...], Optional[int]]:
    """TensorFlow's decode of the image (a JPEG at the hash's scale, `reduction`: the op accepts and
    refuses exactly what the full decode does, tests/unit/io/test_decode_check.py; other formats
    `decode_image`'s) and the pHash of its pixels, read in place: (decoded shape, hash). DecodeFailed
    when TensorFlow refuses the bytes."""
    if image_format == "jpeg":
        return kernels.decode_jpeg_pixels(data, reduction(width, height), pixels_hash)
    return kernels.decode_image_pixels(data, pixels_hash)


def pixels_hash(pixels: np.ndarray) -> Optional[int]:
    """The pHash of decoded pixels (height × width × channels uint8, any scale): grey (ITU-R 601 luma;
    the first channel of grey images), area-averaged to SIDE×SIDE and DCT-transformed as products of
    small matrices, ROWS rows at a time (a large image never gets a float copy of its own); None for no
    pixels or unknown channels."""
    if pixels.ndim != 3 or pixels.shape[2] not in (1, 2, 3, 4) or not pixels.shape[0] or not pixels.shape[1]:
        return None
    height = pixels.shape[0]
    columns = _rows(height)
    low = np.zeros((LOW, pixels.shape[1]), dtype=np.float32)
    for start in range(0, height, ROWS):
        low += columns[:, start:start + ROWS] @ _grey(pixels[start:start + ROWS])
    return _bits(low @ _rows(pixels.shape[1]).T)


def _grey(pixels: np.ndarray) -> np.ndarray:
    if pixels.shape[2] < 3:
        return pixels[:, :, 0].astype(np.float32)
    grey = pixels[:, :, 0] * _LUMA[0]  # ufuncs, not BLAS: a BLAS call this size wakes its own threads
    grey += pixels[:, :, 1] * _LUMA[1]
    grey += pixels[:, :, 2] * _LUMA[2]
    return grey


def pillow_hash(data: bytes) -> Optional[int]:
    """The pHash from Pillow's decode at the same scale (a JPEG straight from its DCT coefficients):
    where TensorFlow does not load or refuses the bytes (header mode only); None when Pillow cannot
    decode them either."""
    try:
        with open_with_pillow(data) as image:
            scale = reduction(*image.size)
            if image.format == "JPEG":  # decoded at 1/scale straight from the DCT coefficients
                image.draft("L", (-(-image.size[0] // scale), -(-image.size[1] // scale)))
            grey = np.asarray(image.convert("L"), dtype=np.float32)
    except Exception:  # any decoder failure: no hash, never a failed bundle
        return None
    return _hash_of_grey(grey) if grey.size else None


def _hash_of_grey(grey: np.ndarray) -> int:
    """The hash of a grey image (float32, any size)."""
    return _bits(_rows(grey.shape[0]) @ grey @ _rows(grey.shape[1]).T)


def _bits(low: np.ndarray) -> int:
    """The signs, against their median, of the LOW×LOW lowest DCT frequencies of the SIDE×SIDE area
    average (`low`) but the constant one, as 64 bits."""
    low = low.ravel()
    bits = low > np.partition(low[1:], LOW * LOW // 2 - 1)[LOW * LOW // 2 - 1]  # the median of the 63 others
    return int(np.packbits(bits).view(">u8")[0])


@functools.lru_cache(maxsize=128)
def _rows(size: int) -> np.ndarray:
    """LOW × size: the first LOW DCT basis rows over SIDE cells, times the area average of `size` pixels
    into SIDE cells (each cell the mean of the pixels it covers, fractions of a pixel at its edges)."""
    edges = np.arange(SIDE + 1) * (size / SIDE)
    starts = np.arange(size)
    cover = np.clip(np.minimum(edges[1:, None], starts[None, :] + 1) - np.maximum(edges[:-1, None], starts[None, :]),
                    0, None) / (size / SIDE)
    return (_DCT[:LOW].astype(np.float64) @ cover).astype(np.float32)


def hamming(left: int, right: int) -> int:
    """Bits that differ between two hashes."""
    return bin(left ^ right).count("1")


def hamming_many(value: int, others: np.ndarray) -> np.ndarray:
    """Bits that differ between `value` and each uint64 of `others`."""
    x = (np.uint64(value) ^ others.astype(np.uint64)).view(np.uint8).reshape(-1, 8)
    return _POPCOUNT[x].sum(axis=1)
