"""Header probing agrees with TensorFlow's decoders; broken files get specific reasons."""
from __future__ import annotations

import pytest

import imagegen
from tfrecorder.images import InvalidImage, probe_image, resize_image

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
