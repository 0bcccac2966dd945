"""A 64-bit perceptual hash (pHash) of an image, from a small decode (issue 29: near-duplicate images).

The image is decoded small — at 1/8 scale (`reduction`: less for small images), a JPEG straight from its
DCT coefficients (Pillow's draft mode; in the default validation mode `pixels_hash` reuses TensorFlow's
own 1/8-scale decode instead of decoding again), other formats decoded and box-reduced — then shrunk to
32×32 grey; the hash is the sign, against their median, of
the 8×8 lowest-frequency DCT coefficients but the constant one. Re-encoding, resizing, slight crops and
format changes move few bits (measured in docs/statistics.md); distinct pictures differ in about half.
The caller has already bounded the image's pixels (tfrecorder.io.image_probe.checked_header), so
decoding here allocates nothing a hostile header could inflate beyond that bound.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
from PIL import Image

from tfrecorder.io.image_probe import open_with_pillow

SIDE = 32  # grey thumbnail the DCT is taken of
LOW = 8  # LOW×LOW lowest frequencies → 64 bits
_K = np.arange(SIDE)
_DCT = np.cos(np.pi * (2 * _K[None, :] + 1) * _K[:, None] / (2 * SIDE)).astype(np.float32)
_POPCOUNT = np.array([bin(value).count("1") for value in range(256)], dtype=np.uint8)


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
    """The image's 64-bit pHash, or None when Pillow cannot decode it (its row is still written)."""
    try:
        with open_with_pillow(data) as image:
            scale = reduction(*image.size)
            if image.format == "JPEG":  # decoded at 1/scale straight from the DCT coefficients
                image.draft("L", (-(-image.size[0] // scale), -(-image.size[1] // scale)))
                grey = image.convert("L")
            else:
                grey = image.convert("L")
                grey = grey.reduce(scale) if scale > 1 else grey
            grey = grey.resize((SIDE, SIDE), Image.BOX)
    except Exception:  # any decoder failure: no hash, never a failed bundle
        return None
    return _hash_of_grey(grey)


def pixels_hash(shape: tuple[int, ...], pixels: bytes) -> Optional[int]:
    """The pHash of decoded pixels (height × width × channels uint8: the default mode's 1/8-scale JPEG
    decode, tfrecorder.io.decode_check), without decoding again."""
    if len(shape) != 3 or shape[2] not in (1, 3, 4) or not shape[0] or not shape[1]:
        return None
    array = np.frombuffer(pixels, dtype=np.uint8).reshape(shape)
    image = Image.fromarray(array[:, :, 0] if shape[2] == 1 else array[:, :, :3])
    return _hash_of_grey(image.convert("L").resize((SIDE, SIDE), Image.BOX))


def _hash_of_grey(grey: Image.Image) -> int:
    pixels = np.asarray(grey, dtype=np.float32)
    low = (_DCT @ pixels @ _DCT.T)[:LOW, :LOW].ravel()
    bits = low > np.median(low[1:])
    return int(np.packbits(bits).view(">u8")[0])


def hamming(left: int, right: int) -> int:
    """Bits that differ between two hashes."""
    return bin(left ^ right).count("1")


def hamming_many(value: int, others: np.ndarray) -> np.ndarray:
    """Bits that differ between `value` and each uint64 of `others`."""
    x = (np.uint64(value) ^ others.astype(np.uint64)).view(np.uint8).reshape(-1, 8)
    return _POPCOUNT[x].sum(axis=1)
