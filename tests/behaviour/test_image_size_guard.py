"""One size guard, before any allocation, in both validation modes.

A few hundred kilobytes can declare an image of hundreds of millions of pixels: a GIF whose later frame
is huge, a JPEG whose frame header follows markers an eager parser gives up on, PNG, BMP and WebP
headers claiming more than they hold. Each must be discarded as `image too large` in both modes before
a decoder allocates it, with one limit (`max_image_pixels`) that Pillow's global settings do not move,
and no Pillow warning on stderr. Sizes of accepted images are TensorFlow's, in both modes.
"""
from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pandas as pd
import pytest
from PIL import Image

import tfrecorder
from support import imagegen
from support.readers import read_job

MODES = ("decode", "header")
# Markers libjpeg skips before the frame header: an application segment, a comment, a restart interval.
ODD_MARKERS = b"\xff\xe1\x00\x06Exif\xff\xfe\x00\x05bomb\xff\xdd\x00\x04\x00\x00"


def bombs() -> dict[str, bytes]:
    """Ten files of at most ~3 MB, each declaring 96 M to 10 G pixels (a decode would take 0.1 to 30 GB)."""
    odd = imagegen.odd_images()
    lossless = imagegen.encode(Image.new("RGB", (8, 8)), "WEBP", lossless=True)
    extended = odd["rgba.webp"][0]
    assert extended[12:16] == b"VP8X"
    return {
        "frame.gif": imagegen.gif_of_frames([(1, 1), (16000, 16000)]),  # TensorFlow sizes by the largest frame
        "frames.gif": imagegen.gif_of_frames([(4000, 4000)] * 6, screen=(4000, 4000)),  # giflib keeps them all
        "screen.gif": imagegen.gif_of_frames([(1, 1)], screen=(30000, 30000)),  # Pillow draws on the screen
        "tem.jpg": imagegen.jpeg_of_one_grey(15000, 15000, b"\xff\x01\x00"),  # TEM, then a junk byte
        "markers.jpg": imagegen.jpeg_of_one_grey(12000, 12000, ODD_MARKERS),
        "claim.png": imagegen.with_declared_size(odd["rgb.png"][0], 100_000, 100_000),
        "black.png": imagegen.png_of_one_grey(12000, 12000),
        "claim.bmp": imagegen.with_declared_size(odd["rgb.bmp"][0], 100_000, 100_000),
        "lossless.webp": imagegen.with_declared_size(lossless, 16384, 16384),  # TensorFlow decodes it: 805 MB
        "canvas.webp": imagegen.with_declared_size(extended, 16384, 16384),
    }


MEASURE = """
import json, resource, sys
import pandas as pd
import tfrecorder

def convert(folder, names, validate, out):
    table = pd.DataFrame({"split": "TRAIN", "image_uri": [folder + "/" + name for name in names], "label": "a"})
    result = tfrecorder.convert(table, out, validate=validate, progress=False)
    discarded = pd.read_csv(result["tfrecord_dir"] + "/discarded.csv")
    return {"written": sum(result["written"].values()),
            "discards": {uri.rsplit("/", 1)[1]: reason for uri, reason in zip(discarded.image_uri, discarded.reason)}}

def peak_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

spec = json.loads(sys.argv[1])
report = {"small": {}, "bombs": {}}
for kind in ("small", "bombs"):
    for validate in ("decode", "header"):
        report[kind][validate] = convert(spec[kind], spec[kind + "_names"], validate, spec["out"] + "/" + kind + validate)
    report[kind + "_peak"] = peak_bytes()
print(json.dumps(report))
"""


def test_ten_bombs_cost_ten_discards_and_no_memory_in_both_modes(tmp_path):
    """Peak memory (in a fresh process) after converting ten small images in both modes, then ten
    bombs: the bombs add less than 200 MB, every one is discarded as too large, and nothing on stderr
    mentions Pillow's DecompressionBombWarning."""
    small = {name: data for name, (data, _fmt, _channels) in sorted(imagegen.odd_images().items())[:10]}
    bomb_files = bombs()
    imagegen.write_files(tmp_path / "small", small)
    imagegen.write_files(tmp_path / "bombs", bomb_files)
    spec = {"small": str(tmp_path / "small"), "small_names": sorted(small), "bombs": str(tmp_path / "bombs"),
            "bombs_names": sorted(bomb_files), "out": str(tmp_path / "out")}
    done = subprocess.run([sys.executable, "-c", MEASURE, json.dumps(spec)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "DecompressionBomb" not in done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    for validate in MODES:
        assert report["small"][validate] == {"written": 10, "discards": {}}, validate
        discards = report["bombs"][validate]["discards"]
        assert report["bombs"][validate]["written"] == 0, (validate, discards)
        assert sorted(discards) == sorted(bomb_files)
        assert all(reason.startswith("image too large: ") for reason in discards.values()), (validate, discards)
    grown = report["bombs_peak"] - report["small_peak"]
    assert grown < 200 * 2**20, f"the bombs raised the peak by {grown / 2**20:.0f} MB"


def _convert_both_modes(tmp_path, files: dict[str, bytes], **options) -> dict[str, dict]:
    """{mode: {file name: (height, width, channels) written, or the discard reason}}."""
    paths = imagegen.write_files(tmp_path / "images", files)
    table = pd.DataFrame({"split": "TRAIN", "image_uri": [str(p) for p in paths.values()], "label": "a"})
    found = {}
    for validate in MODES:
        result = tfrecorder.convert(table, tmp_path / validate, validate=validate, progress=False, **options)
        outcome = {example["image_uri"].decode().rsplit("/", 1)[1]: (example["image_height"], example["image_width"],
                                                                      example["image_channels"])
                   for example in read_job(result["tfrecord_dir"]).get("TRAIN", [])}
        discarded = pd.read_csv(f"{result['tfrecord_dir']}/discarded.csv")
        outcome.update({uri.rsplit("/", 1)[1]: reason for uri, reason in zip(discarded.image_uri, discarded.reason)})
        found[validate] = outcome
    return found


def test_both_modes_record_the_size_tensorflow_decodes(tf, tmp_path):
    """A GIF whose second frame is the larger (TensorFlow's output is the largest frame), and a JPEG with
    a TEM marker and a junk byte before its tables (libjpeg skips both)."""
    files = {"frames.gif": imagegen.gif_of_frames([(1, 1), (50, 40)]),
             "tem.jpg": imagegen.jpeg_of_one_grey(100, 60, b"\xff\x01\x00")}
    found = _convert_both_modes(tmp_path, files)
    for name, data in files.items():
        decoded = tuple(tf.io.decode_image(data, expand_animations=False).shape)
        assert found["decode"][name] == found["header"][name] == decoded, name


def test_one_pixel_limit_for_both_modes_without_pillow_warnings(tmp_path):
    """A valid 10000×10000 PNG (100 M pixels) is over the default limit (Pillow's default, 89,478,485) in
    both modes; `max_image_pixels` raises the limit for both; Pillow never warns."""
    files = {"big.png": imagegen.png_of_one_grey(10000, 10000), "small.jpg": imagegen.odd_images()["rgb.jpg"][0]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        default = _convert_both_modes(tmp_path / "default", files)
        raised = _convert_both_modes(tmp_path / "raised", files, max_image_pixels=100_000_000)
    for validate in MODES:
        assert default[validate]["big.png"] == "image too large: 10000x10000 exceeds max_image_pixels=89,478,485"
        assert raised[validate]["big.png"] == (10000, 10000, 1)
        assert default[validate]["small.jpg"] == raised[validate]["small.jpg"] == (24, 32, 3)
    assert not [w for w in caught if issubclass(w.category, Image.DecompressionBombWarning)]


@pytest.mark.parametrize("pillow_limit", [None, 64])
def test_pillows_global_limit_is_the_callers_and_changes_nothing(tmp_path, monkeypatch, pillow_limit):
    """Training scripts set Image.MAX_IMAGE_PIXELS = None (or lower it): every image is still written,
    in both modes, and the setting is left as the caller made it."""
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", pillow_limit)
    files = {name: data for name, (data, _fmt, _channels) in imagegen.odd_images().items()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = _convert_both_modes(tmp_path, files)
    for validate in MODES:
        assert {name: value for name, value in found[validate].items() if isinstance(value, str)} == {}, validate
    assert found["decode"] == found["header"]
    assert Image.MAX_IMAGE_PIXELS == pillow_limit
    assert not [w for w in caught if issubclass(w.category, Image.DecompressionBombWarning)]


ANIMATED = """
import json, sys
import pandas as pd
import tfrecorder
table = pd.DataFrame({"split": "TRAIN", "image_uri": sys.argv[1:3], "label": "a"})
found = {}
for validate in ("decode", "header"):
    result = tfrecorder.convert(table, sys.argv[3] + "/" + validate, validate=validate, progress=False)
    discarded = pd.read_csv(result["tfrecord_dir"] + "/discarded.csv")
    found[validate] = [sum(result["written"].values()), list(discarded.reason)]
print(json.dumps(found))
"""


def test_an_animated_webp_is_refused_in_both_modes_before_tensorflow_sees_it(tmp_path):
    """TensorFlow's WebP decoder corrupts its process's memory on animations (the process aborts): the
    conversion discards them, so neither it nor a training job reading its output crashes."""
    paths = imagegen.write_files(tmp_path, {"animated.webp": imagegen.animated_webp(),
                                            "still.webp": imagegen.odd_images()["rgb.webp"][0]})
    done = subprocess.run([sys.executable, "-c", ANIMATED, str(paths["animated.webp"]), str(paths["still.webp"]),
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    reason = ("unsupported image format: animated WebP (TensorFlow's WebP decoder corrupts its process's memory "
              "on animations, so a training job reading it would crash)")
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"decode": [1, [reason]], "header": [1, [reason]]}


@pytest.mark.parametrize("option", ["--max-image-pixels", "--max_image_pixels"])
def test_the_cli_takes_the_pixel_limit_and_refuses_a_bad_one(tmp_path, option):
    imagegen.write_files(tmp_path / "img", {"a.jpg": imagegen.odd_images()["rgb.jpg"][0]})  # 32×24
    (tmp_path / "t.csv").write_text("split,image_uri,label\nTRAIN,img/a.jpg,cat\n")
    base = [sys.executable, "-m", "tfrecorder", "convert", "--source", str(tmp_path / "t.csv"), "--validate", "header"]
    done = subprocess.run([*base, "--output_dir", str(tmp_path / "out"), option, "767"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "discarded: 1" in done.stdout
    bad = subprocess.run([*base, "--output_dir", str(tmp_path / "bad"), option, "0"], capture_output=True, text=True,
                         timeout=300)
    assert bad.returncode == 2
    assert bad.stderr.strip() == "tfrecorder: error: max_image_pixels must be a positive integer, got 0"
