"""Generate real image files of many kinds (and broken ones) for the tests.

Each odd image comes with the format and channel count TensorFlow reports for it.
"""
from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import numpy as np
from PIL import Image

from tfrecorder.sample_data import encode_image as encode, photo_array


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


# Decompression bombs: small files declaring huge images, built without ever holding the image.

def gif_of_frames(frames: list[tuple[int, int]], screen: tuple[int, int] = (1, 1)) -> bytes:
    """A GIF89a of one-colour frames, each (width, height) at (0, 0) on a logical screen of `screen`."""
    data = b"GIF89a" + struct.pack("<HHBBB", *screen, 0x81, 0, 0) + bytes([0, 0, 0, 255, 255, 255] * 2)
    for width, height in frames:
        data += b"\x2c" + struct.pack("<HHHHB", 0, 0, width, height, 0) + _lzw_one_colour(width * height)
    return data + b";"


def _lzw_one_colour(pixels: int, min_code_size: int = 2) -> bytes:
    """GIF image data for `pixels` pixels of colour 0, coded as giflib's encoder codes a flat run: after
    a clear code, runs of 1, 2, 3, ... pixels (each the code the decoder learns next), a clear code when
    the code table is full, codes widening from min_code_size + 1 to 12 bits. 256 M pixels take ~190 KB."""
    clear, end = 1 << min_code_size, (1 << min_code_size) + 1
    out, buffer, buffered = bytearray(), 0, 0

    def emit(code: int, width: int) -> None:
        nonlocal buffer, buffered
        buffer |= code << buffered
        buffered += width
        while buffered >= 8:
            out.append(buffer & 0xFF)
            buffer >>= 8
            buffered -= 8

    width, left = min_code_size + 1, pixels
    while left:
        emit(clear, width)
        width, run, next_code = min_code_size + 1, 0, end + 1
        while left and next_code < 4095:
            length = min(run + 1, left)
            emit(0 if length == 1 else end + length - 1, width)
            left -= length
            if run:  # every code after the first teaches the decoder one
                next_code += 1
                if next_code >= 1 << width and width < 12:
                    width += 1
            run = length
    emit(end, width)
    if buffered:
        out.append(buffer & 0xFF)
    blocks = bytearray([min_code_size])
    for start in range(0, len(out), 255):
        blocks += bytes([len(out[start:start + 255])]) + out[start:start + 255]
    return bytes(blocks + b"\x00")


def jpeg_of_one_grey(width: int, height: int, after_soi: bytes = b"") -> bytes:
    """A valid baseline greyscale JPEG of flat grey, `after_soi` inserted right after its SOI marker: the
    headers and tables of Pillow's 8×8 encoding, the frame size patched, and 6 bits per 8×8 block (DC
    difference 0, end of block; ~2.9 MB for 15000×15000)."""
    small = encode(Image.new("L", (8, 8), 128), "JPEG")
    scan = small.index(b"\xff\xda")
    headers = small[:scan + 2 + int.from_bytes(small[scan + 2:scan + 4], "big")]
    frame = headers.index(b"\xff\xc0")
    headers = headers[:frame + 5] + struct.pack(">HH", height, width) + headers[frame + 9:]
    blocks = -(-width // 8) * -(-height // 8)
    body = bytes([0x28, 0xA2, 0x8A]) * (blocks // 4)  # four blocks: 001010 ×4
    tail = "001010" * (blocks % 4)
    if tail:
        tail += "1" * (-len(tail) % 8)
        body += int(tail, 2).to_bytes(len(tail) // 8, "big")
    return headers[:2] + after_soi + headers[2:] + body + b"\xff\xd9"


def png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_of_one_grey(width: int, height: int) -> bytes:
    """A valid 8-bit greyscale PNG of black, compressed row by row (~1000:1) without the image in memory."""
    compressor, idat = zlib.compressobj(9), []
    row = bytes(width + 1)  # filter byte 0, then the row's pixels
    for _ in range(height):
        idat.append(compressor.compress(row))
    idat.append(compressor.flush())
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header) + png_chunk(b"IDAT", b"".join(idat))
            + png_chunk(b"IEND", b""))


def with_declared_size(data: bytes, width: int, height: int) -> bytes:
    """A small PNG, BMP or WebP (lossless or extended) whose header claims `width` × `height` instead."""
    out = bytearray(data)
    if data.startswith(b"\x89PNG"):
        out[16:24] = struct.pack(">II", width, height)
        out[29:33] = struct.pack(">I", zlib.crc32(bytes(out[12:29])))
    elif data.startswith(b"BM"):
        out[18:26] = struct.pack("<ii", width, height)
    elif data[12:16] == b"VP8L":
        (bits,) = struct.unpack_from("<I", data, 21)
        out[21:25] = struct.pack("<I", (bits & ~((1 << 28) - 1)) | (width - 1) | (height - 1) << 14)
    elif data[12:16] == b"VP8X":
        out[24:30] = (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    else:
        raise ValueError("not a PNG, BMP, lossless or extended WebP")
    return bytes(out)


def animated_webp(frames: int = 3, size: tuple[int, int] = (24, 32)) -> bytes:
    """An animated WebP of `frames` differently coloured frames of (height, width) `size`."""
    images = [Image.fromarray(np.full((*size, 3), 40 * i, np.uint8)) for i in range(frames)]
    stream = io.BytesIO()
    images[0].save(stream, "WEBP", save_all=True, append_images=images[1:])
    return stream.getvalue()
