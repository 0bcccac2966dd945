"""Fuzz the cheap structural checks with TensorFlow's own decoders as the oracle."""
from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from tfrecorder.image_checks import jpeg_structure_error, png_structure_error
from tfrecorder.images import InvalidImage, probe_image
from tfrecorder.sample_data import encode_image, photo_array

PHOTO = Image.fromarray(photo_array(48, 64, 3))
JPEG = encode_image(PHOTO, "JPEG", quality=85)
PROGRESSIVE = encode_image(PHOTO, "JPEG", progressive=True)
PNG = encode_image(PHOTO, "PNG")

mutation = st.tuples(st.sampled_from(["set", "delete", "insert"]), st.floats(0, 1), st.binary(min_size=1, max_size=16))


def mutate(data: bytes, mutations) -> bytes:
    out = bytearray(data)
    for kind, where, payload in mutations:
        pos = min(int(where * len(out)), len(out) - 1)
        if kind == "set":
            out[pos] = payload[0]
        elif kind == "delete":
            del out[pos : pos + len(payload) * 3]
        else:
            out[pos:pos] = payload
    return bytes(out)


def tf_decodes(tf, data: bytes) -> bool:
    try:
        tf.io.decode_image(data, expand_animations=False)
        return True
    except Exception:  # noqa: BLE001 - any decoder error means "not decodable"
        return False


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def test_sound_files_pass():
    assert jpeg_structure_error(JPEG) is None
    assert jpeg_structure_error(PROGRESSIVE) is None
    assert png_structure_error(PNG) is None


@FUZZ
@given(st.lists(mutation, min_size=1, max_size=6))
def test_png_check_agrees_with_tensorflow_exactly(tf, mutations):
    data = mutate(PNG, mutations)
    assert (png_structure_error(data) is None) == tf_decodes(tf, data)


@FUZZ
@given(st.sampled_from([JPEG, PROGRESSIVE]), st.lists(mutation, min_size=1, max_size=6))
def test_jpeg_check_never_rejects_what_tensorflow_decodes(tf, source, mutations):
    data = mutate(source, mutations)
    if tf_decodes(tf, data):
        assert jpeg_structure_error(data) is None


@FUZZ
@given(st.sampled_from([JPEG, PROGRESSIVE, PNG]), st.lists(mutation, min_size=1, max_size=6))
def test_full_decode_never_accepts_what_tensorflow_rejects(tf, source, mutations):
    data = mutate(source, mutations)
    try:
        probe_image(data, full_decode=True)
    except InvalidImage:
        return
    assert tf_decodes(tf, data)


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
            with pytest.raises(InvalidImage):
                probe_image(data, full_decode=True)
    assert found > 0
