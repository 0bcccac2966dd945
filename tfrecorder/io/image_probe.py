"""Image probing: format, size and channels from the header, plus a cheap integrity check.

Conversion keeps each image's original bytes, so a full decode is not needed to build the Example.
Every header is read straight from the bytes the way TensorFlow's decoders read it
(tfrecorder.io.image_headers), and `checked_header` refuses an image declaring more than
`max_image_pixels` before any decoder sees it, in both validation modes. JPEG, PNG and GIF headers also
give the channel count `tf.io.decode_image` returns; for BMP and WebP (and a JPEG whose header leaves it
open) Pillow reads it from the header, without decoding pixels. Cheap structural walks (JPEG markers,
PNG chunk CRCs; see image_checks) catch truncated and damaged files: that is `validate="header"`. The
default, `validate="decode"`, decodes every image with TensorFlow itself instead
(tfrecorder.io.decode_check), which also catches damage inside JPEG entropy-coded data.

Pillow opens images here through its format plugins (`open_with_pillow`), not `Image.open`, whose
decompression-bomb check reads the caller's global `Image.MAX_IMAGE_PIXELS` and warns on stderr: this
package bounds the size itself, the same way whatever the caller set there.
"""
from __future__ import annotations

import dataclasses
import io
import struct
from typing import Optional, Sequence

from PIL import Image, UnidentifiedImageError

from tfrecorder.errors import InvalidImage
from tfrecorder.io.image_checks import JPEG_EOI_MISSING, jpeg_structure_error, png_structure_error
from tfrecorder.io.image_headers import (DEFAULT_MAX_IMAGE_PIXELS, Header, read_header, tensorflow_format,
                                         too_large_reason)

DEFAULT_MAX_IMAGE_BYTES = 512 * 1024 * 1024
"""The largest image file read (512 MiB): far above any JPEG, PNG or WebP within the pixel limit, well under
the 2 GiB a protobuf message (one Example) can hold, and a bound on the memory one fetched image takes."""

ANIMATED_WEBP = ("unsupported image format: animated WebP (TensorFlow's WebP decoder corrupts its process's "
                 "memory on animations, so a training job reading it would crash)")

PIL_FORMATS = {"JPEG": "jpeg", "MPO": "jpeg", "PNG": "png", "GIF": "gif", "BMP": "bmp", "WEBP": "webp"}
"""Pillow's format name → the image format name this package records (an MPO is a JPEG to TensorFlow)."""
_PIL_OPEN_FORMATS = ("JPEG", "PNG", "GIF", "BMP", "WEBP")


@dataclasses.dataclass(frozen=True)
class ImageInfo:
    format: str  # "jpeg" | "png" | "gif" | "bmp" | "webp"
    height: int
    width: int
    channels: int  # what tf.io.decode_image returns for these bytes


def decoded_channels(fmt: str, image: Image.Image) -> int:
    """Channel count tf.io.decode_image yields (TensorFlow's decoders, not Pillow's modes) for an image Pillow
    opened, `fmt` being its PIL_FORMATS name: what the probe records and what Pillow-based readers decode to."""
    mode = image.mode
    if fmt == "gif":
        return 3  # TF decodes GIF frames to RGB
    if fmt == "webp":
        return 4 if "A" in image.getbands() or image.info.get("transparency") is not None else 3
    if fmt == "jpeg":
        return 1 if mode == "L" else 3  # CMYK and YCCK are converted to RGB by TF's decoder
    if fmt == "bmp":
        return 4 if mode == "RGBA" else (1 if mode in ("L", "1") else 3)
    # PNG: libpng expands palettes to RGB(A) and keeps gray / gray+alpha as stored.
    if mode in ("1", "L", "I", "I;16", "I;16B", "I;16L"):
        return 1
    if mode == "LA":
        return 2
    if mode == "P":
        return 4 if "transparency" in image.info else 3
    if mode == "PA":
        return 4
    return 4 if mode in ("RGBA", "La") else 3


def open_with_pillow(data: bytes, formats: Optional[Sequence[str]] = None) -> Image.Image:
    """`Image.open(io.BytesIO(data), formats=formats)` without its decompression-bomb check (callers
    bounded the size first, see `checked_header`): Pillow's plugins read the header, in Image.open's
    order; UnidentifiedImageError when none accepts the bytes."""
    if formats is None or any(name not in Image.OPEN for name in formats):
        Image.init()  # registers every plugin, once per process (Image.open does the same)
    prefix = data[:16]
    for name in formats or Image.ID:
        if name not in Image.OPEN:  # a plugin this Pillow does not have
            continue
        factory, accept = Image.OPEN[name]
        verdict = accept(prefix) if accept else True
        if not verdict or isinstance(verdict, str):  # a string is Pillow's "not quite" (Image.open warns it)
            continue
        try:
            return factory(io.BytesIO(data), "")
        except (SyntaxError, IndexError, TypeError, struct.error):  # what Image.open takes for "not this format"
            continue
    raise UnidentifiedImageError("cannot identify image file")


def _jpeg_decodes(data: bytes) -> bool:
    """libjpeg's 1/8-scale decode: reads every coded block, skips most of the pixel work."""
    try:
        with open_with_pillow(data, ("JPEG",)) as image:
            image.draft(image.mode, (max(1, image.width // 8), max(1, image.height // 8)))
            image.load()
        return True
    except Exception:  # noqa: BLE001 - any decoder failure means the data is incomplete
        return False


def _check_complete(fmt: str, data: bytes) -> None:
    """Cheap checks that catch truncated and structurally damaged files without decoding pixels."""
    error = jpeg_structure_error(data) if fmt == "jpeg" else png_structure_error(data) if fmt == "png" else None
    if error == JPEG_EOI_MISSING and _jpeg_decodes(data):
        error = None  # only the end-of-image marker was lost; every block decodes (as in TensorFlow)
    if error:
        raise InvalidImage(error)
    if fmt == "gif" and not data.rstrip(b"\x00").endswith(b";"):
        raise InvalidImage("truncated image: GIF trailer missing")
    if fmt == "webp":
        declared = struct.unpack("<I", data[4:8])[0] + 8
        if len(data) < declared:
            raise InvalidImage(f"truncated image: WebP declares {declared} bytes, file has {len(data)}")
    if fmt == "bmp":
        declared = struct.unpack("<I", data[2:6])[0]
        if declared and len(data) < declared:
            raise InvalidImage(f"truncated image: BMP declares {declared} bytes, file has {len(data)}")


_SIGNATURES = {b"\xff\xd8": "JPEG", b"\x89PNG\r\n\x1a\n": "PNG", b"GIF8": "GIF", b"BM": "BMP"}
_FORMAT_NAMES = {"jpeg": "JPEG", "png": "PNG", "gif": "GIF", "bmp": "BMP", "webp": "WebP"}


def _unidentified_reason(data: bytes) -> str:
    """Corrupt for a known signature that will not parse; name a format TensorFlow cannot decode
    (TIFF, ICO, ...); otherwise it is not an image."""
    for signature, name in _SIGNATURES.items():
        if data.startswith(signature):
            return f"corrupt image: {name} signature but the header cannot be parsed"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "corrupt image: WebP signature but the header cannot be parsed"
    try:
        with open_with_pillow(data) as image:
            return f"unsupported image format: {image.format} (TensorFlow decodes JPEG, PNG, GIF, BMP, WebP)"
    except Exception:  # noqa: BLE001 - anything Pillow cannot open is simply not an image
        return "not an image: unrecognised file content"


def _unreadable_reason(data: bytes) -> str:
    """Why bytes without a header TensorFlow's decoders accept are refused: the structural damage when
    the JPEG or PNG walk names it, else what the bytes are (corrupt, another format, not an image)."""
    fmt = tensorflow_format(data)
    damage = jpeg_structure_error(data) if fmt == "jpeg" else png_structure_error(data) if fmt == "png" else None
    if damage:
        return damage
    if fmt is None:
        return _unidentified_reason(data)
    return f"corrupt image: {_FORMAT_NAMES[fmt]} header declares no image TensorFlow decodes"


def checked_header(data: bytes, max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> Header:
    """The header of image bytes a decoder may be given, or InvalidImage(reason): empty, not an image
    TensorFlow decodes, a header its decoder refuses, more than `max_pixels` pixels to allocate, an
    animated WebP. Both validation modes ask this first: the one size guard."""
    if not data:
        raise InvalidImage("empty file (0 bytes)")
    header = read_header(data)
    if header is None:
        raise InvalidImage(_unreadable_reason(data))
    reason = too_large_reason(header, max_pixels)
    if reason:
        raise InvalidImage(reason)
    if header.format == "webp" and header.animated:
        raise InvalidImage(ANIMATED_WEBP)
    return header


def probe_image(data: bytes, max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> ImageInfo:
    """Identify `data` as an image and return its `ImageInfo`, or raise `InvalidImage(reason)`.

    The cheap checks of `validate="header"`; `validate="decode"` asks TensorFlow (see decode_check).
    """
    header = checked_header(data, max_pixels)
    channels = header.channels if header.channels is not None else _pillow_channels(data, header.format)
    _check_complete(header.format, data)
    return ImageInfo(header.format, header.height, header.width, channels)


def _pillow_channels(data: bytes, fmt: str) -> int:
    """The channels TensorFlow decodes `data` to, from the mode Pillow reads in the header (no pixels)."""
    try:
        with open_with_pillow(data, _PIL_OPEN_FORMATS) as image:
            return decoded_channels(fmt, image)
    except UnidentifiedImageError:
        raise InvalidImage(_unidentified_reason(data)) from None
    except (OSError, SyntaxError, ValueError, struct.error, EOFError) as exc:
        kind = "truncated image" if "truncat" in str(exc).lower() else "corrupt image"
        raise InvalidImage(f"{kind}: {exc}") from None


def resize_image(data: bytes, info: ImageInfo, size: tuple[int, int],
                 max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> tuple[bytes, ImageInfo]:
    """Resize to (height, width) and re-encode (PNG stays PNG to keep alpha, others become JPEG).

    Pillow does the resize; a damaged file TensorFlow decodes but Pillow cannot is InvalidImage. `data`
    passed `checked_header` (its decode is bounded); `max_pixels` is the limit the result is probed with.
    """
    height, width = size
    try:
        with open_with_pillow(data, _PIL_OPEN_FORMATS) as image:
            image.load()
            if info.format == "gif":
                image = image.convert("RGB")
            keep_png = info.format == "png" or info.channels in (2, 4)
            if not keep_png:
                image = image.convert("L" if info.channels == 1 else "RGB")
            resized = image.resize((width, height), Image.Resampling.BILINEAR)
            out = io.BytesIO()
            resized.save(out, format="PNG" if keep_png else "JPEG", quality=95)
    except Image.DecompressionBombError as exc:  # Pillow's GIF frames check its global limit themselves
        raise InvalidImage(f"image too large: {exc}") from None
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise InvalidImage(f"corrupt image: cannot be resized ({exc})") from None
    encoded = out.getvalue()
    return encoded, probe_image(encoded, max_pixels)
