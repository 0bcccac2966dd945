"""tfrecorder.io.image_headers: the size an image's bytes declare, read as TensorFlow's decoders read it."""
from __future__ import annotations

import pytest

from support import imagegen
from tfrecorder.io.image_headers import DEFAULT_MAX_IMAGE_PIXELS, read_header, tensorflow_format, too_large_reason

ODD = imagegen.odd_images()


def test_headers_the_decoders_refuse_declare_no_image():
    jpeg = ODD["rgb.jpg"][0]
    assert read_header(jpeg[:2] + b"\xff\xda" + jpeg[4:]) is None  # scan before any frame header
    assert read_header(b"\xff\xd8\xff\xc0\x00\x11\x08\x00\x00\x00\x10\x03") is None  # zero height
    png = ODD["rgb.png"][0]
    assert read_header(png[:12] + b"IHDX" + png[16:]) is None
    assert read_header(b"GIF89a") is None
    bad_depth = bytearray(png)
    bad_depth[24] = 4  # RGB at 4 bits per sample does not exist (libpng refuses it)
    assert read_header(bytes(bad_depth)) is None


@pytest.mark.parametrize("data, expected", [(b"\xff\xd8\xff\xe0", "jpeg"), (b"\x89PNG\r\n\x1a\n", "png"),
                                            (b"GIF89a", "gif"), (b"BM", "bmp"), (b"RIFF\0\0\0\0WEBP", "webp"),
                                            (b"II*\0", None), (b"", None)])
def test_the_format_is_the_one_tensorflow_detects(data, expected):
    assert tensorflow_format(data) == expected


def test_a_jpeg_frame_header_is_found_past_a_tem_marker_and_junk():
    """libjpeg skips TEM (FF 01) and garbage between segments: the frame header after them gives the size."""
    jpeg = imagegen.jpeg_of_one_grey(300, 200, after_soi=b"\xff\x01\x00")
    header = read_header(jpeg)
    assert (header.format, header.width, header.height, header.channels) == ("jpeg", 300, 200, 1)


def test_a_gif_is_as_large_as_its_largest_frame_and_all_its_frames():
    """TensorFlow sizes a GIF's output by its largest frame; a 1x1 logical screen hides nothing."""
    header = read_header(imagegen.gif_of_frames([(1, 1), (400, 300)]))
    assert (header.width, header.height) == (400, 300) and header.animated
    assert header.pixels >= 400 * 300


def test_too_large_names_the_size_and_the_limit():
    header = read_header(imagegen.png_of_one_grey(20_000, 10_000))
    assert header.pixels == 200_000_000
    assert too_large_reason(header, DEFAULT_MAX_IMAGE_PIXELS) == \
        "image too large: 20000x10000 exceeds max_image_pixels=89,478,485"
    assert too_large_reason(header, header.pixels) is None
    frames = read_header(imagegen.gif_of_frames([(100, 100)] * 3))
    assert "pixels with all its frames or its canvas" in too_large_reason(frames, 100 * 100)
