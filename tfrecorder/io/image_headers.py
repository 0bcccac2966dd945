"""What an image's header declares, read from its bytes the way TensorFlow's decoders read it.

Decoders allocate what a header declares before they read a pixel, and a few hundred bytes can declare
billions of pixels (a GIF frame, a JPEG or a lossless WebP of one colour compress ~1000:1). So each
image's format and size are read here, from the bytes, as TensorFlow's own decoders read them
(libjpeg's marker reader, libpng's IHDR, giflib's records, libwebp's headers, TensorFlow's BMP
reader), and both validation modes refuse an image declaring more than `max_image_pixels` before any
decoder, TensorFlow's or Pillow's, sees it (tfrecorder.io.image_probe.checked_header). One reading for both
modes also means they record the same size for every image they accept, and Pillow's global
MAX_IMAGE_PIXELS (the caller's setting) plays no part.

What counts towards the limit (`Header.pixels`) is what decoding the image allocates:
- JPEG, PNG, WebP: width × height (a WebP's canvas);
- BMP: width × height as TensorFlow reads them (an OS/2 header as Pillow reads it);
- GIF: the largest of TensorFlow's output (the widest × the tallest frame), giflib's rasters (it
  keeps every frame, one byte per pixel, until the decode ends) and Pillow's canvas (the logical
  screen grown to every frame's extent), so a GIF is bounded whichever decoder opens it.
`read_header` returns None where the decoder would refuse the header before allocating anything.
"""
from __future__ import annotations

import dataclasses
import struct
from typing import Optional

DEFAULT_MAX_IMAGE_PIXELS = 89_478_485
"""Pillow's default MAX_IMAGE_PIXELS, an 8-bit RGB image of 256 MiB: the most one decode of an image this
package lets through allocates is of that order (RGBA a third more, 16-bit PNG twice)."""


@dataclasses.dataclass(frozen=True)
class Header:
    format: str  # "jpeg" | "png" | "gif" | "bmp" | "webp", as TensorFlow detects it (tensorflow_format)
    height: int  # of the image TensorFlow decodes
    width: int
    pixels: int  # the most pixels decoding it allocates (see the module docstring): what the limit bounds
    channels: Optional[int]  # what TensorFlow decodes to, when the header says (JPEG, PNG, GIF); None: ask Pillow
    animated: bool = False  # a GIF of several frames, an APNG (acTL chunk), an animated WebP


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


def read_header(data: bytes) -> Optional[Header]:
    """The header of an image TensorFlow would try to decode; None for other bytes, and for a header its
    decoder refuses before allocating (no frame header, a zero size, an invalid PNG depth, ...)."""
    reader = _READERS.get(tensorflow_format(data))
    header = reader(data) if reader else None
    return header if header is not None and header.width > 0 and header.height > 0 else None


def too_large_reason(header: Header, max_pixels: int) -> Optional[str]:
    """The discard reason when decoding the image would allocate more than `max_pixels` pixels, else None."""
    if header.pixels <= max_pixels:
        return None
    size = f"{header.width}x{header.height}"
    if header.pixels != header.width * header.height:
        size += f" ({header.pixels:,} pixels with all its frames or its canvas)"
    return f"image too large: {size} exceeds max_image_pixels={max_pixels:,}"


# JPEG, as libjpeg's marker reader (jdmarker.c) walks it: garbage between segments is skipped, the
# first frame header of a process libjpeg decodes (Huffman or arithmetic, sequential or progressive)
# gives the size, and anything libjpeg stops at before one (a scan or EOI, an unknown marker, an
# unsupported process, a second SOI, a table segment with a bogus length) means no image.
_JPEG_SOF_DECODED = frozenset({0xC0, 0xC1, 0xC2, 0xC9, 0xCA})
_JPEG_NO_LENGTH = frozenset(range(0xD0, 0xD8)) | {0x01}  # RSTn and TEM
_JPEG_TABLES = frozenset({0xC4, 0xCC, 0xDB, 0xDD})  # DHT, DAC, DQT, DRI: libjpeg refuses a length < 2
_JPEG_SKIPPED = frozenset(range(0xE0, 0xF0)) | {0xFE, 0xDC}  # APPn, COM, DNL: a length < 2 skips nothing
_JPEG_CHANNELS = {1: 1, 3: 3, 4: 3}  # components → channels (CMYK and YCCK decode to RGB in TensorFlow)


def _jpeg_frame(data: bytes) -> Optional[tuple[int, int, int]]:
    """(height, width, components) of the frame header libjpeg decodes, or None when it finds none."""
    if data[:2] != b"\xff\xd8":
        return None
    pos, end = 2, len(data)
    while True:
        if pos + 1 < end and data[pos] == 0xFF and data[pos + 1] != 0xFF:  # a marker right where one belongs
            marker = data[pos + 1]
            pos += 2
        else:  # libjpeg's next_marker: skip anything up to an 0xFF, then fill bytes
            pos = data.find(b"\xff", pos)
            while 0 <= pos < end and data[pos] == 0xFF:
                pos += 1
            if pos < 0 or pos >= end:
                return None
            marker = data[pos]
            pos += 1
        if marker == 0x00 or marker in _JPEG_NO_LENGTH:  # 0xFF00 is stuffing, not a marker
            continue
        if pos + 2 > end:
            return None
        length = data[pos] << 8 | data[pos + 1]
        if marker in _JPEG_SOF_DECODED:
            if pos + 8 > end or length < 8:
                return None
            height, width, components = struct.unpack_from(">HHB", data, pos + 3)
            return height, width, components
        if marker in _JPEG_SKIPPED or (marker in _JPEG_TABLES and length >= 2):
            pos += max(length, 2)
            continue
        return None  # SOI, a scan or EOI before a frame, an unsupported process or an unknown marker


def _jpeg_header(data: bytes) -> Optional[Header]:
    frame = _jpeg_frame(data)
    if frame is None:
        return None
    height, width, components = frame
    return Header("jpeg", height, width, width * height, _JPEG_CHANNELS.get(components))


_PNG_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # colour type → channels (3 = palette: 3, or 4 with tRNS)
_PNG_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}  # what libpng accepts


def _png_header(data: bytes) -> Optional[Header]:
    """IHDR, which libpng requires first; the chunks before the first IDAT tell palette alpha and APNG."""
    if len(data) < 33 or data[8:16] != b"\x00\x00\x00\x0dIHDR":
        return None
    width, height, depth, colour = struct.unpack_from(">IIBB", data, 16)
    if depth not in _PNG_DEPTHS.get(colour, ()):
        return None
    channels, animated, pos = _PNG_CHANNELS.get(colour, 3), False, 33
    while pos + 8 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, pos)
        if kind in (b"IDAT", b"IEND"):
            break
        if kind == b"tRNS" and colour == 3:
            channels = 4
        animated = animated or kind == b"acTL"
        pos += 12 + length
    return Header("png", height, width, width * height, channels, animated)


def _gif_header(data: bytes) -> Optional[Header]:
    """Every frame giflib reads (DGifSlurp): image descriptors, skipping extensions, up to the trailer,
    an unknown record, a frame giflib refuses or the end of the data."""
    if len(data) < 13:
        return None
    screen_width, screen_height, flags = struct.unpack_from("<HHB", data, 6)
    pos = 13 + _colour_table_bytes(flags)
    frames: list[tuple[int, int, int, int]] = []  # (left, top, width, height)
    while pos < len(data):
        record = data[pos]
        if record == 0x21:  # extension: a label, then sub-blocks
            pos = _after_sub_blocks(data, pos + 2)
        elif record == 0x2C and pos + 10 <= len(data):
            left, top, width, height, frame_flags = struct.unpack_from("<HHHHB", data, pos + 1)
            code_size_at = pos + 10 + _colour_table_bytes(frame_flags)
            if width == 0 or height == 0 or code_size_at >= len(data) or data[code_size_at] > 8:
                break  # giflib stops before allocating this frame
            frames.append((left, top, width, height))
            pos = _after_sub_blocks(data, code_size_at + 1)
        else:  # the trailer (0x3B), an unknown record or a cut-off descriptor
            break
    if not frames:
        return None
    width, height = max(f[2] for f in frames), max(f[3] for f in frames)
    canvas_width = max([screen_width] + [left + w for left, _top, w, _h in frames])
    canvas_height = max([screen_height] + [top + h for _left, top, _w, h in frames])
    rasters = sum(w * h for _left, _top, w, h in frames)
    pixels = max(width * height, rasters, canvas_width * canvas_height)
    return Header("gif", height, width, pixels, 3, len(frames) > 1)


def _colour_table_bytes(flags: int) -> int:
    return 3 << ((flags & 7) + 1) if flags & 0x80 else 0


def _after_sub_blocks(data: bytes, pos: int) -> int:
    """The position after a chain of GIF sub-blocks starting at `pos` (past the end when it is cut off)."""
    end = len(data)
    while pos < end:
        size = data[pos]
        pos += 1 + size
        if size == 0:
            return pos
    return end


def _bmp_header(data: bytes) -> Optional[Header]:
    """Width and height where TensorFlow's BMP reader takes them (int32 at bytes 18 and 22, whatever the
    header's kind); an OS/2 header (12 bytes, 16-bit sizes), which TensorFlow does not decode, as Pillow reads it."""
    if len(data) < 32:  # TensorFlow's reader wants 32 bytes
        return None
    (info_size,) = struct.unpack_from("<I", data, 14)
    if info_size == 12:
        width, height = struct.unpack_from("<HH", data, 18)
    else:
        width, height = struct.unpack_from("<ii", data, 18)
        height = abs(height)  # negative: rows stored top-down
    return Header("bmp", height, width, width * height, None)


def _webp_header(data: bytes) -> Optional[Header]:
    """The canvas of an extended WebP (VP8X), else the size in the VP8 / VP8L bitstream header, with the
    checks libwebp makes before it trusts them (key frame and start code; signature and version)."""
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return Header("webp", height, width, width * height, None, bool(data[20] & 0x02))
    if chunk == b"VP8 " and len(data) >= 30 and not data[20] & 1 and data[23:26] == b"\x9d\x01\x2a":
        width, height = (size & 0x3FFF for size in struct.unpack_from("<HH", data, 26))
        return Header("webp", height, width, width * height, None)
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        (bits,) = struct.unpack_from("<I", data, 21)
        if bits >> 29:  # a version libwebp does not know
            return None
        width, height = (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
        return Header("webp", height, width, width * height, None)
    return None


_READERS = {"jpeg": _jpeg_header, "png": _png_header, "gif": _gif_header, "bmp": _bmp_header, "webp": _webp_header}
