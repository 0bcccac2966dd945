"""Header probing agrees with TensorFlow's decoders; broken files get specific reasons."""
from __future__ import annotations

import io

import pytest

from support import imagegen
from tfrecorder.io import image_headers
from tfrecorder.errors import InvalidImage
from tfrecorder.io.image_probe import decoded_channels, probe_image, resize_image

ODD = imagegen.odd_images()
BROKEN = imagegen.broken_images()


@pytest.mark.parametrize("name", sorted(ODD))
def test_probe_matches_tensorflow_decode(tf, name):
    data, fmt, channels = ODD[name]
    info = probe_image(data)
    decoded = tf.io.decode_image(data, expand_animations=False)
    assert info.format == fmt
    assert (info.height, info.width, info.channels) == tuple(decoded.shape)
    assert info.channels == channels


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_files_are_refused_with_reason(name):
    data, reason = BROKEN[name]
    with pytest.raises(InvalidImage, match=f"^{reason}"):
        probe_image(data)


def test_decompression_bomb_header_is_refused():
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")
    with pytest.raises(InvalidImage, match="^image too large"):
        probe_image(png)


def test_png_damage_inside_pixel_data_is_caught_by_the_cheap_check():
    data = bytearray(ODD["rgb.png"][0])
    data[60:200] = bytes(140)  # damage the compressed pixel data, keep header and IEND
    with pytest.raises(InvalidImage, match="^corrupt image: PNG chunk 'IDAT' fails its CRC check"):
        probe_image(bytes(data))


@pytest.mark.parametrize("name", ["rgb.jpg", "rgba.png", "gray.jpg", "anim.gif"])
def test_resize_re_encodes_to_requested_size(tf, name):
    data, _fmt, _channels = ODD[name]
    resized, info = resize_image(data, probe_image(data), (10, 12))
    decoded = tf.io.decode_image(resized, expand_animations=False)
    assert (info.height, info.width) == (10, 12) == tuple(decoded.shape[:2])
    assert info.channels == decoded.shape[2]


def _extra_pngs() -> dict[str, tuple[bytes, int]]:
    """PNG colour types and depths the odd-image set lacks, with TensorFlow's channel count."""
    from PIL import Image

    from tfrecorder.sample_data import encode_image, photo_array

    rgb = Image.fromarray(photo_array(20, 30, 1))
    palette = rgb.convert("P", palette=Image.Palette.ADAPTIVE, colors=8)
    gray_alpha = rgb.convert("LA")
    return {
        "palette_transparent.png": (encode_image(palette, "PNG", transparency=0), 4),
        "gray_alpha.png": (encode_image(gray_alpha, "PNG"), 2),
        "bilevel.png": (encode_image(rgb.convert("1"), "PNG"), 1),
        "gray_transparent.png": (encode_image(rgb.convert("L"), "PNG", transparency=7), 1),
    }


EXTRA_PNGS = _extra_pngs()


@pytest.mark.parametrize("name", sorted(EXTRA_PNGS))
def test_more_png_kinds_match_tensorflow(tf, name):
    data, channels = EXTRA_PNGS[name]
    decoded = tf.io.decode_image(data, expand_animations=False)
    assert (probe_image(data).height, probe_image(data).width, channels) == tuple(decoded.shape)
    assert probe_image(data).channels == channels


@pytest.mark.parametrize("name", sorted(ODD) + sorted(EXTRA_PNGS))
def test_byte_header_reader_agrees_with_pillow(name):
    """The pure-bytes header reader gives Pillow's size on sound files of every format, and Pillow's
    channels where it reads them itself (JPEG, PNG, GIF); BMP and WebP channels are left to Pillow."""
    from PIL import Image

    data = ODD[name][0] if name in ODD else EXTRA_PNGS[name][0]
    header = image_headers.read_header(data)
    with Image.open(io.BytesIO(data)) as image:
        assert (header.width, header.height) == image.size
        if header.format in ("jpeg", "png", "gif"):
            assert header.channels == decoded_channels(header.format, image)
        else:
            assert header.channels is None


@pytest.mark.parametrize("name", ["rgb.jpg", "progressive.jpg", "cmyk.jpg", "rgb.png", "palette.png"])
def test_every_truncation_is_refused_with_a_reason(name):
    data = ODD[name][0]
    for cut in range(0, min(400, len(data) - 12)):  # the last 12 bytes of a PNG are its IEND chunk
        with pytest.raises(InvalidImage, match="^(empty file|not an image|truncated image|corrupt image)"):
            probe_image(data[:cut])


def test_png_with_invalid_depth_for_its_colour_type_is_refused():
    png = bytearray(ODD["rgb.png"][0])
    png[24] = 4  # RGB at 4 bits per sample does not exist (libpng refuses it)
    with pytest.raises(InvalidImage):
        probe_image(bytes(png))
