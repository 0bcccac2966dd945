"""Image probing: format, size and channels from the header, plus a cheap integrity check.

Conversion keeps each image's original bytes, so a full decode is not needed to build the Example.
JPEG and PNG headers (nearly every dataset) are parsed straight from the bytes; anything else, or any
header the byte parser is unsure about, is read by Pillow (no pixel decode). Both map the header to
the channel count that `tf.io.decode_image` returns. Cheap structural walks (JPEG markers, PNG chunk
CRCs; see image_checks) catch truncated and damaged files: that is `validate="header"`. The default,
`validate="decode"`, decodes every image with TensorFlow itself instead (tfrecorder.io.decode_check),
which also catches damage inside JPEG entropy-coded data.
"""
from __future__ import annotations

import dataclasses
import io
import struct
import warnings
from typing import Optional

from PIL import Image, UnidentifiedImageError

from tfrecorder.errors import InvalidImage  # defined in errors; importable from here as before
from tfrecorder.io.image_checks import JPEG_EOI_MISSING, jpeg_structure_error, png_structure_error

# Largest image we accept (pixels); a header declaring more is treated as a decompression bomb.
MAX_PIXELS = 178_956_970  # Pillow's own default limit

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


def _jpeg_decodes(data: bytes) -> bool:
    """libjpeg's 1/8-scale decode: reads every coded block, skips most of the pixel work."""
    try:
        with Image.open(io.BytesIO(data), formats=("JPEG",)) as image:
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


def _unidentified_reason(data: bytes) -> str:
    """Corrupt for a known signature that will not parse; name a format TensorFlow cannot decode
    (TIFF, ICO, ...); otherwise it is not an image."""
    for signature, name in _SIGNATURES.items():
        if data.startswith(signature):
            return f"corrupt image: {name} signature but the header cannot be parsed"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "corrupt image: WebP signature but the header cannot be parsed"
    try:
        with Image.open(io.BytesIO(data)) as image:
            return f"unsupported image format: {image.format} (TensorFlow decodes JPEG, PNG, GIF, BMP, WebP)"
    except Exception:  # noqa: BLE001 - anything Pillow cannot open is simply not an image
        return "not an image: unrecognised file content"


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # colour type → channels (3 = palette: 3, or 4 with tRNS)
_PNG_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}  # the valid ones
# JPEG start-of-frame markers (baseline, progressive, lossless, arithmetic); not DHT/JPG/DAC (C4, C8, CC).
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_JPEG_CHANNELS = {1: 1, 3: 3, 4: 3}  # components → channels (CMYK/YCCK decode to RGB in TF)
_JPEG_STANDALONE = frozenset(range(0xD0, 0xD8)) | {0x01}  # RSTn and TEM carry no length


def _parse_png_header(data: bytes) -> Optional[ImageInfo]:
    if len(data) < 33 or data[8:16] != b"\x00\x00\x00\x0dIHDR":
        return None
    width, height, depth, colour = struct.unpack_from(">IIBB", data, 16)
    if depth not in _PNG_DEPTHS.get(colour, ()):
        return None
    if colour == 3:
        channels, pos = 3, 8
        while pos + 8 <= len(data):  # chunks before the first IDAT: does the palette have alpha?
            length, kind = struct.unpack_from(">I4s", data, pos)
            if kind == b"tRNS":
                channels = 4
            if kind in (b"IDAT", b"IEND"):
                break
            pos += 12 + length
    else:
        channels = _PNG_CHANNELS.get(colour)
    return ImageInfo("png", height, width, channels) if channels else None


def _parse_jpeg_header(data: bytes) -> Optional[ImageInfo]:
    pos, end = 2, len(data)
    while pos + 4 <= end:
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in _JPEG_STANDALONE:
            pos += 2
            continue
        if marker in (0xD8, 0xD9, 0xDA):  # SOI, EOI or start of scan before any frame header
            return None
        (length,) = struct.unpack_from(">H", data, pos + 2)
        if marker in _JPEG_SOF:
            if length < 8 or pos + 10 > end:
                return None
            height, width, components = struct.unpack_from(">HHB", data, pos + 5)
            channels = _JPEG_CHANNELS.get(components)
            return ImageInfo("jpeg", height, width, channels) if channels else None
        if length < 2:
            return None
        pos += 2 + length
    return None


def parse_header(data: bytes) -> Optional[ImageInfo]:
    """JPEG or PNG format, size and channels read straight from the bytes; None when unsure.

    None (another format, an unusual or damaged header, a zero or oversized dimension) means: ask
    Pillow, whose answer and error messages are authoritative.
    """
    if data.startswith(b"\xff\xd8\xff"):
        info = _parse_jpeg_header(data)
    elif data.startswith(_PNG_SIGNATURE):
        info = _parse_png_header(data)
    else:
        return None
    if info is None or info.width <= 0 or info.height <= 0 or info.width * info.height > Image.MAX_IMAGE_PIXELS:
        return None
    return info


def probe_image(data: bytes) -> ImageInfo:
    """Identify `data` as an image and return its `ImageInfo`, or raise `InvalidImage(reason)`.

    The cheap checks of `validate="header"`; `validate="decode"` asks TensorFlow (see decode_check).
    """
    if not data:
        raise InvalidImage("empty file (0 bytes)")
    info = parse_header(data)
    if info is not None:
        _check_complete(info.format, data)
        return info
    return probe_with_pillow(data)


def probe_with_pillow(data: bytes) -> ImageInfo:
    """`probe_image` without the byte-level header parser: Pillow reads the header."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=_PIL_OPEN_FORMATS) as image:
                fmt = PIL_FORMATS[image.format]
                width, height = image.size
                if width <= 0 or height <= 0:
                    raise InvalidImage(f"invalid image size {width}x{height}")
                if width * height > MAX_PIXELS:
                    raise InvalidImage(f"image too large: {width}x{height} pixels exceeds {MAX_PIXELS}")
                _check_complete(fmt, data)
                channels = decoded_channels(fmt, image)
    except InvalidImage:
        raise
    except (UnidentifiedImageError, Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        if isinstance(exc, UnidentifiedImageError):
            raise InvalidImage(_unidentified_reason(data)) from None
        raise InvalidImage(f"image too large: {exc}") from None
    except (OSError, SyntaxError, ValueError, struct.error, EOFError) as exc:
        kind = "truncated image" if "truncat" in str(exc).lower() else "corrupt image"
        raise InvalidImage(f"{kind}: {exc}") from None
    return ImageInfo(fmt, height, width, channels)


def resize_image(data: bytes, info: ImageInfo, size: tuple[int, int]) -> tuple[bytes, ImageInfo]:
    """Resize to (height, width) and re-encode (PNG stays PNG to keep alpha, others become JPEG).

    Pillow does the resize; a damaged file TensorFlow decodes but Pillow cannot is InvalidImage.
    """
    height, width = size
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            if info.format == "gif":
                image = image.convert("RGB")
            keep_png = info.format == "png" or info.channels in (2, 4)
            if not keep_png:
                image = image.convert("L" if info.channels == 1 else "RGB")
            resized = image.resize((width, height), Image.Resampling.BILINEAR)
            out = io.BytesIO()
            resized.save(out, format="PNG" if keep_png else "JPEG", quality=95)
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise InvalidImage(f"corrupt image: cannot be resized ({exc})") from None
    encoded = out.getvalue()
    return encoded, probe_image(encoded)
