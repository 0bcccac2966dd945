"""pHash: stable under re-encoding, resizing, cropping and format changes; far apart for distinct photos."""

import numpy as np

from support.natural_images import VARIANTS, encoded, photo, variant
from tfrecorder.io.perceptual_hash import hamming, hamming_many, perceptual_hash


def test_variants_stay_close_and_distinct_photos_do_not():
    for seed in range(6):
        original = encoded(photo(seed), "JPEG" if seed % 2 else "PNG")
        base = perceptual_hash(original)
        assert base is not None
        for kind in VARIANTS:
            assert hamming(base, perceptual_hash(variant(original, kind)[0])) <= 7, (seed, kind)
    hashes = [perceptual_hash(encoded(photo(100 + i), "JPEG")) for i in range(20)]
    distances = [hamming(a, b) for i, a in enumerate(hashes) for b in hashes[i + 1:]]
    assert min(distances) > 7 and 20 < np.mean(distances) < 44


def test_undecodable_bytes_have_no_hash_and_distances_vectorise():
    assert perceptual_hash(b"not an image") is None
    values = np.array([0, 0b1011, (1 << 64) - 1], dtype=np.uint64)
    assert hamming_many(0b1, values).tolist() == [1, 2, 63]


def test_the_default_modes_decode_gives_the_same_hash_without_decoding_again():
    """decode_check.decode(hashes=...) hashes the verdict's own decode (a JPEG at the hash's scale):
    the very hash perceptual_hash gives the same bytes, for every format and size."""
    from tfrecorder.io import decode_check

    for seed, (size, image_format) in enumerate([((320, 240), "JPEG"), ((640, 480), "JPEG"), ((1100, 800), "JPEG"),
                                                  ((100, 60), "JPEG"), ((320, 240), "PNG"), ((640, 480), "WEBP")]):
        data = encoded(photo(seed, size), image_format)
        kept: list = []
        verdict = decode_check.decode(data, hashes=kept)
        assert verdict == decode_check.decode(data)  # the same verdict
        assert kept == [perceptual_hash(data)] and kept[0] is not None, (size, image_format)


def test_pixels_of_any_scale_and_channels_hash():
    from tfrecorder.io.perceptual_hash import pixels_hash

    rgb = np.asarray(photo(3, (200, 150)))
    base = pixels_hash(rgb)
    grey = (rgb @ np.array([0.299, 0.587, 0.114])).round().astype(np.uint8)[:, :, None]
    assert hamming(pixels_hash(grey), base) <= 2 and hamming(pixels_hash(np.repeat(grey, 2, axis=2)), base) <= 2
    assert pixels_hash(np.dstack([rgb, np.full(rgb.shape[:2], 7, np.uint8)])) == base  # alpha ignored
    assert hamming(pixels_hash(rgb[::2, ::2]), base) <= 4  # area-averaged: the scale hardly matters
    assert pixels_hash(rgb[:10, :12]) is not None  # smaller than the 16×16 grid
    assert pixels_hash(np.zeros((0, 4, 3), np.uint8)) is None and pixels_hash(np.zeros((4, 4, 5), np.uint8)) is None
    from tfrecorder.io import perceptual_hash as module

    large = np.asarray(photo(5, (900, 700)))  # made grey ROWS rows at a time: the hash of the whole grey image
    assert large.shape[0] > module.ROWS and pixels_hash(large) == module._hash_of_grey(module._grey(large))


def test_pillows_hash_where_tensorflow_is_missing_is_close():
    """Header mode without TensorFlow hashes Pillow's decode at the same scale: a few bits at most."""
    from tfrecorder.io.perceptual_hash import pillow_hash

    for seed, image_format in enumerate(["JPEG", "PNG", "JPEG"]):
        data = encoded(photo(seed, (400 + 40 * seed, 300)), image_format)
        assert hamming(pillow_hash(data), perceptual_hash(data)) <= 3
    assert pillow_hash(b"not an image") is None


def test_every_copy_of_a_picture_is_hashed_from_the_same_scale():
    from tfrecorder.io.perceptual_hash import reduction

    assert reduction(4000, 3000) == 8 and reduction(500, 375) == 8 and reduction(320, 240) == 4
    assert reduction(160, 120) == 2 and reduction(100, 60) == 1
    big = photo(7, (1024, 768))
    jpeg, png = encoded(big, "JPEG"), encoded(big, "PNG")
    assert hamming(perceptual_hash(png), perceptual_hash(jpeg)) <= 2
