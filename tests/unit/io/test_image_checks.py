"""Fuzz the cheap structural checks with TensorFlow's own decoders as the oracle."""
from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from support.mutations import mutate, mutations, tf_decodes

from tfrecorder.io import decode_check
from tfrecorder.io.image_checks import jpeg_structure_error, png_structure_error
from tfrecorder.io.image_probe import probe_image
from tfrecorder.sample_data import encode_image, photo_array

PHOTO = Image.fromarray(photo_array(48, 64, 3))
JPEG = encode_image(PHOTO, "JPEG", quality=85)
PROGRESSIVE = encode_image(PHOTO, "JPEG", progressive=True)
PNG = encode_image(PHOTO, "PNG")

FUZZ = settings(max_examples=int(__import__("os").environ.get("TFRECORDER_FUZZ_EXAMPLES", 150)), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def test_sound_files_pass():
    assert jpeg_structure_error(JPEG) is None
    assert jpeg_structure_error(PROGRESSIVE) is None
    assert png_structure_error(PNG) is None


@FUZZ
@given(mutations)
def test_png_check_agrees_with_tensorflow_exactly(tf, changes):
    data = mutate(PNG, changes)
    assert (png_structure_error(data) is None) == tf_decodes(tf, data)


@FUZZ
@given(st.sampled_from([JPEG, PROGRESSIVE]), mutations)
def test_default_check_never_rejects_a_jpeg_tensorflow_decodes(tf, source, changes):
    data = mutate(source, changes)
    if tf_decodes(tf, data):
        probe_image(data)  # raises InvalidImage on a rejection


@pytest.mark.parametrize("source", [JPEG, PROGRESSIVE, PNG], ids=["jpeg", "progressive", "png"])
def test_every_truncation_is_caught(tf, source):
    check = png_structure_error if source is PNG else jpeg_structure_error
    for cut in range(0, len(source) - 1, max(1, len(source) // 97)):
        assert check(source[:cut]) is not None, cut
        assert not tf_decodes(tf, source[:cut])


def test_jpeg_entropy_damage_needs_the_decode_check(tf):
    """Documented limit: some damage inside scan data passes the cheap check; validate='decode' catches it."""
    rng = random.Random(7)
    found = 0
    for _ in range(400):
        data = bytearray(PROGRESSIVE)
        for _ in range(3):
            data[rng.randrange(len(data) // 4, len(data) - 2)] = rng.randrange(256)
        data = bytes(data)
        if jpeg_structure_error(data) is None and not tf_decodes(tf, data):
            found += 1
            assert isinstance(decode_check.decode(data), str)
    assert found > 0
