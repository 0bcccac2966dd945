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


def test_the_default_modes_jpeg_decode_gives_a_close_hash_without_decoding_again():
    from tfrecorder.io import decode_check
    from tfrecorder.io.perceptual_hash import pixels_hash

    for seed in range(4):
        data = encoded(photo(seed), "JPEG")
        kept: list = []
        verdict = decode_check.decode(data, jpeg_pixels=kept)
        assert verdict == decode_check.decode(data)  # the same op, the same verdict
        [(shape, pixels)] = kept
        assert shape == (30, 40, 3) and len(pixels) == 30 * 40 * 3
        assert hamming(pixels_hash(shape, pixels), perceptual_hash(data)) <= 7
    assert pixels_hash((0, 4, 3), b"") is None


def test_every_copy_of_a_picture_is_hashed_from_the_same_scale():
    from tfrecorder.io.perceptual_hash import reduction

    assert reduction(4000, 3000) == 8 and reduction(640, 480) == 4 and reduction(320, 240) == 2
    assert reduction(100, 60) == 1
    big = photo(7, (1024, 768))
    jpeg, png = encoded(big, "JPEG"), encoded(big, "PNG")
    from tfrecorder.io import decode_check
    from tfrecorder.io.perceptual_hash import pixels_hash

    kept: list = []
    decode_check.decode(jpeg, jpeg_pixels=kept)  # TensorFlow's 1/8 decode: the scale Pillow hashes at too
    assert hamming(pixels_hash(*kept[0]), perceptual_hash(jpeg)) <= 2
    assert hamming(perceptual_hash(png), perceptual_hash(jpeg)) <= 2
