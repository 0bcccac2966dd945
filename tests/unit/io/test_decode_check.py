"""validate="decode" (the default) against its oracle, tf.io.decode_image(..., expand_animations=False).

Seeded mutations of JPEG (baseline and progressive), PNG (RGB and palette), GIF, BMP and WebP (lossy
and lossless) files — byte flips, truncations, inserted and removed bytes, removed / duplicated /
moved marker segments and chunks, inserted JPEG markers — must get exactly TensorFlow's verdict:
nothing written that TensorFlow rejects, nothing discarded that it decodes.
"""
from __future__ import annotations

import random

import pandas as pd
import pytest
from PIL import Image

import tfrecorder
from support.mutations import random_mutation, tf_decodes
from support.readers import read_job
from tfrecorder.io import decode_check
from tfrecorder.io.image_headers import DEFAULT_MAX_IMAGE_PIXELS, read_header
from tfrecorder.errors import InvalidImage
from tfrecorder.io.image_probe import ImageInfo, probe_image
from tfrecorder.sample_data import encode_image, photo_array

PHOTO = Image.fromarray(photo_array(40, 56, 5))
SOURCES = {
    "baseline.jpg": encode_image(PHOTO, "JPEG", quality=85),
    "progressive.jpg": encode_image(PHOTO, "JPEG", progressive=True),
    "rgb.png": encode_image(PHOTO, "PNG"),
    "palette.png": encode_image(PHOTO.convert("P"), "PNG"),
    "image.gif": encode_image(PHOTO, "GIF"),
    "image.bmp": encode_image(PHOTO, "BMP"),
    "lossy.webp": encode_image(PHOTO, "WEBP"),
    "lossless.webp": encode_image(PHOTO.convert("RGBA"), "WEBP", lossless=True),
}


def mutated_files(seed: int, per_source: int) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    return [(name, random_mutation(rng, data)) for _ in range(per_source) for name, data in SOURCES.items()]


def oracle(tf, data: bytes):
    """TensorFlow's decoded shape, or None when it refuses the bytes."""
    try:
        return tuple(tf.io.decode_image(data, expand_animations=False).shape)
    except Exception:  # noqa: BLE001 - any decoder error means "not decodable"
        return None


def oracle_ratio_8(tf, data: bytes, ratio: int = 8):
    """The shape of libjpeg's 1/8-scale (1/`ratio`) decode, or None when it refuses the bytes."""
    try:
        return tuple(tf.io.decode_jpeg(data, ratio=ratio).shape)
    except Exception:  # noqa: BLE001 - any decoder error means "not decodable"
        return None


def test_sound_files_decode_to_tensorflows_shape(tf):
    for name, data in SOURCES.items():
        verdict = decode_check.decode(data)
        assert isinstance(verdict, ImageInfo), (name, verdict)
        assert (verdict.height, verdict.width, verdict.channels) == oracle(tf, data), name


def test_a_decompression_bomb_is_refused_before_any_pixels_are_allocated():
    import struct
    import zlib

    png = bytearray(SOURCES["rgb.png"])
    png[16:24] = struct.pack(">II", 60_000, 60_000)  # 3.6 G pixels declared, with a valid header CRC
    png[29:33] = struct.pack(">I", zlib.crc32(png[12:29]))
    jpeg = bytearray(SOURCES["baseline.jpg"])
    sof = jpeg.index(b"\xff\xc0")
    jpeg[sof + 5 : sof + 9] = struct.pack(">HH", 20_000, 20_000)  # 400 M pixels: over the limit
    for data in (bytes(png), bytes(jpeg)):
        assert decode_check.decode(data).startswith("image too large"), data[:4]


def test_verdict_is_tensorflows_on_mutated_files_of_every_format(tf):
    files = mutated_files(seed=13, per_source=50)  # 400 files
    accepted = refused = 0
    for name, data in files:
        header = read_header(data)
        verdict = decode_check.decode(data)
        if header is not None and header.pixels > DEFAULT_MAX_IMAGE_PIXELS:  # a bomb: refused before any decode
            assert verdict.startswith("image too large"), (name, verdict)
            continue
        expected = oracle(tf, data)
        if expected is None:
            assert isinstance(verdict, str) and verdict, (name, verdict)  # discarded, with a reason
            refused += 1
        else:
            assert isinstance(verdict, ImageInfo), (name, verdict)
            assert (verdict.height, verdict.width, verdict.channels) == expected, name
            accepted += 1
    assert accepted > 40 and refused > 40  # the fuzz exercises both sides


def test_both_modes_record_the_same_image_for_every_file_both_accept():
    """Header mode reads sizes as TensorFlow's decoders do: wherever both modes accept a mutated file, they
    record the same format, size and channels (they differ only on which files to accept: header mode
    lets through damage only a decode finds, see test_image_checks.py)."""
    accepted_by_both = 0
    for name, data in mutated_files(seed=13, per_source=50):
        verdict = decode_check.decode(data)
        try:
            probed = probe_image(data)
        except InvalidImage:
            continue
        if isinstance(verdict, ImageInfo):
            assert probed == verdict, name
            accepted_by_both += 1
    assert accepted_by_both > 100


def test_ratio_8_jpeg_decode_refuses_exactly_what_the_full_decode_refuses(tf):
    """The shortcut decode_check takes for JPEG, checked against the full decode on its own."""
    rng = random.Random(8)
    jpegs = [random_mutation(rng, SOURCES[name]) for _ in range(150) for name in ("baseline.jpg", "progressive.jpg")]
    for data in jpegs:
        if data[:3] == b"\xff\xd8\xff":
            assert tf_decodes(tf, data) == (oracle_ratio_8(tf, data) is not None)


def test_every_jpeg_ratio_refuses_exactly_what_the_full_decode_refuses(tf):
    """With near-duplicate search a JPEG's verdict comes from its decode at the perceptual hash's scale
    (ratio 8, 4, 2 or 1): each ratio checked against the full decode, on the mutated JPEGs above and on
    a photo large enough for every scale."""
    from support.natural_images import encoded, photo

    rng = random.Random(4)
    sources = [SOURCES["baseline.jpg"], SOURCES["progressive.jpg"], encoded(photo(3, (520, 400)), "JPEG")]
    jpegs = [random_mutation(rng, source) for _ in range(100) for source in sources]
    accepted = refused = 0
    for data in jpegs:
        if data[:3] != b"\xff\xd8\xff":
            continue
        decodes = tf_decodes(tf, data)
        accepted, refused = accepted + decodes, refused + (not decodes)
        for ratio in (1, 2, 4):
            assert decodes == (oracle_ratio_8(tf, data, ratio) is not None), ratio
    assert accepted > 20 and refused > 20  # both sides exercised


def test_the_verdict_is_the_same_when_the_decode_also_hashes(tf):
    """decode(hashes=[...]) (near-duplicate search: a JPEG decoded at the hash's scale, other formats'
    pixels handed over) gives exactly the verdict of the plain decode, on every mutated file."""
    for name, data in mutated_files(seed=5, per_source=30):
        hashes: list = []
        verdict = decode_check.decode(data, hashes=hashes)
        assert verdict == decode_check.decode(data), name
        assert len(hashes) == (1 if isinstance(verdict, ImageInfo) else 0), name


def test_default_convert_writes_exactly_the_images_tensorflow_decodes(tf, tmp_path):
    """Through the whole pipeline with default options: written ⇔ TensorFlow decodes."""
    directory = tmp_path / "images"
    directory.mkdir()
    rows, decodable = [], {}
    for i, (name, data) in enumerate(mutated_files(seed=31, per_source=25)):  # 200 files
        path = directory / f"{i:03d}-{name}"
        path.write_bytes(data)
        rows.append({"split": "TRAIN", "image_uri": str(path), "label": name.split(".")[-1]})
        decodable[str(path)] = oracle(tf, data) is not None
    result = tfrecorder.convert(pd.DataFrame(rows), tmp_path / "out", progress=False)
    assert result["validate"] == result["metadata"]["validate"] == "decode"
    written = read_job(result["tfrecord_dir"]).get("TRAIN", [])
    written_uris = {example["image_uri"].decode() for example in written}
    for example in written:
        assert tf_decodes(tf, example["image"]), example["image_uri"]
    assert written_uris == {uri for uri, ok in decodable.items() if ok}
    discarded = pd.read_csv(f"{result['tfrecord_dir']}/discarded.csv")
    assert set(discarded["image_uri"]) == {uri for uri, ok in decodable.items() if not ok}
    reasons = r"(corrupt|truncated) image: |not an image|unsupported image format|image too large: "
    assert discarded["reason"].str.match(reasons).all()
    assert result["rows_in"] == len(rows) == len(written) + result["discarded"]


@pytest.mark.parametrize("validate", ["header", "decode"])
def test_mode_is_reported(tmp_path, image_files, validate):
    table = pd.DataFrame({"split": ["TRAIN"], "image_uri": [str(image_files["rgb.jpg"])], "label": ["a"]})
    result = tfrecorder.convert(table, tmp_path, validate=validate, progress=False)
    assert result.validate == result.metadata["validate"] == validate
    assert f"validate={validate!r}" in repr(result)
