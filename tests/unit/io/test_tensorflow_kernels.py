"""TensorFlow's decode kernels through its C API (tfrecorder.io.tensorflow_kernels).

Both ways of running the kernels — the C API (what conversions use) and the Python package (the
fallback) — must give `tf.io.decode_image`'s and `tf.io.decode_jpeg(ratio=8)`'s verdicts and shapes on
mutated files of every format. Conversions in a fresh interpreter must never import the `tensorflow`
package, and write and discard what a conversion in this process (TensorFlow imported) does.
"""
from __future__ import annotations

import csv
import json
import random
import subprocess
import sys

import pytest
from PIL import Image

import tfrecorder
from support import imagegen, mutations
from support.readers import read_job
from tfrecorder.io import decode_check, tensorflow_kernels
from tfrecorder.errors import InvalidImage
from tfrecorder.io import image_probe

CONVERT = """
import json, sys
import tfrecorder
result = tfrecorder.convert(sys.argv[1], sys.argv[2], progress=False)
print(json.dumps({"tensorflow_imported": "tensorflow" in sys.modules, "dir": result["tfrecord_dir"]}))
"""

def _jpeg(seed: int) -> bytes:
    return imagegen.encode(Image.fromarray(imagegen.photo_array(24, 32, seed)), "JPEG")


def _run(script: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _only_tensorflow_rejects(count: int) -> dict[str, bytes]:
    """Mutated images the structural checks accept and TensorFlow refuses: only a real decode discards them."""
    rng, found = random.Random(0), {}
    sources = sorted(imagegen.odd_images().items())
    for attempt in range(5000):
        name, (data, fmt, _channels) = sources[attempt % len(sources)]
        mutated = mutations.random_mutation(rng, data)
        try:
            image_probe.probe_image(mutated)
        except InvalidImage:
            continue
        if isinstance(decode_check.decode(mutated), str):
            found[f"mutated-{attempt}-{name}"] = mutated
            if len(found) == count:
                return found
    raise AssertionError(f"only {len(found)} mutated images only TensorFlow refuses")


@pytest.fixture(scope="module")
def mixed_table(tmp_path_factory):
    """A CSV of sound, broken and TensorFlow-only-undecodable images."""
    folder = tmp_path_factory.mktemp("mixed")
    files = {name: data for name, (data, _fmt, _channels) in imagegen.odd_images().items()}
    files.update({name: data for name, (data, _reason) in imagegen.broken_images().items()})
    files.update(_only_tensorflow_rejects(6))
    with open(folder / "table.csv", "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["split", "image_uri", "label"])
        for i, (name, data) in enumerate(sorted(files.items())):
            (folder / name).write_bytes(data)
            writer.writerow(["TRAIN" if i % 4 else "TEST", name, "ab"[i % 2]])
    return folder / "table.csv"


def _discards(tfrecord_dir: str) -> list[tuple[str, str]]:
    with open(f"{tfrecord_dir}/discarded.csv", newline="") as stream:
        return sorted((row["image_uri"], row["reason"]) for row in csv.DictReader(stream))


def _records(tfrecord_dir: str) -> dict[str, list[str]]:
    return {split: sorted(json.dumps(row, sort_keys=True, default=repr) for row in rows)
            for split, rows in read_job(tfrecord_dir).items()}


def _tensorflow_shape(call):
    try:
        return tuple(call().shape)
    except Exception:  # noqa: BLE001 - any decoder error means "not decodable"
        return None


def _kernel_shape(call):
    try:
        return call()
    except tensorflow_kernels.DecodeFailed as exc:
        assert str(exc)  # TensorFlow's message, for the discard reason
        return None


@pytest.mark.parametrize("kernels", [tensorflow_kernels.kernels(), tensorflow_kernels.PythonKernels()],
                         ids=["c-api", "python"])
def test_kernels_give_tensorflows_shapes_and_refusals(tf, kernels):
    rng = random.Random(21)
    sources = sorted(imagegen.odd_images().items())
    refused = 0
    for attempt in range(600):
        name, (data, _fmt, _channels) = sources[attempt % len(sources)]
        data = mutations.random_mutation(rng, data) if attempt % 3 else data
        if len(data) > 4_000_000:
            continue
        expected = _tensorflow_shape(lambda: tf.io.decode_image(data, expand_animations=False))
        assert _kernel_shape(lambda: kernels.decode_image(data)) == expected, (attempt, name)
        refused += expected is None
        if data[:3] == b"\xff\xd8\xff":
            assert (_kernel_shape(lambda: kernels.decode_jpeg_ratio_8(data))
                    == _tensorflow_shape(lambda: tf.io.decode_jpeg(data, ratio=8))), (attempt, name)
    assert 50 < refused < 550  # both sides exercised


@pytest.mark.parametrize("kernels", [tensorflow_kernels.kernels(), tensorflow_kernels.PythonKernels()],
                         ids=["c-api", "python"])
def test_the_decodes_with_pixels_are_tensorflows_decodes(tf, kernels):
    """decode_jpeg_pixels at every ratio and decode_image_pixels (near-duplicate hashes are computed from
    them) hand tf.io.decode_jpeg(ratio=...)'s and tf.io.decode_image's pixels to `use`."""
    import numpy as np

    for name, (data, image_format, _channels) in sorted(imagegen.odd_images().items()):
        if len(data) > 4_000_000:
            continue
        if image_format == "jpeg":
            for ratio in (1, 2, 4, 8):
                expected = tf.io.decode_jpeg(data, ratio=ratio)
                shape, pixels = kernels.decode_jpeg_pixels(data, ratio, np.array)
                assert shape == tuple(expected.shape) == pixels.shape, (name, ratio)
                assert np.array_equal(pixels, expected.numpy()), (name, ratio)
        try:
            expected = tf.io.decode_image(data, expand_animations=False).numpy()
        except Exception:  # noqa: BLE001 - any decoder error means "not decodable"
            expected = None
        try:
            shape, pixels = kernels.decode_image_pixels(data, np.array)
        except tensorflow_kernels.DecodeFailed:
            assert expected is None, name
            continue
        assert np.array_equal(pixels, expected) and shape == expected.shape, name
    with pytest.raises(tensorflow_kernels.DecodeFailed):
        kernels.decode_jpeg_pixels(b"\xff\xd8\xff broken", 4, np.array)
    with pytest.raises(tensorflow_kernels.DecodeFailed):
        kernels.decode_image_pixels(b"\x89PNG\r\n\x1a\n broken", np.array)


def test_the_c_api_runs_here():
    """This machine's wheel has the native libraries: conversions here never fall back to Python."""
    assert isinstance(tensorflow_kernels.kernels(), tensorflow_kernels.NativeKernels)


def test_a_fresh_conversion_never_imports_tensorflow_and_decides_as_this_process_does(mixed_table, tmp_path):
    fresh = _run(CONVERT, str(mixed_table), str(tmp_path / "fresh"))
    assert fresh["tensorflow_imported"] is False
    here = tfrecorder.convert(str(mixed_table), str(tmp_path / "here"), progress=False)
    assert _records(fresh["dir"]) == _records(here["tfrecord_dir"])
    discards = _discards(fresh["dir"])
    assert discards == _discards(here["tfrecord_dir"])
    assert sum("TensorFlow cannot decode it" in reason for _uri, reason in discards) == 6


def test_a_fresh_detection_job_never_imports_tensorflow_either(tmp_path):
    folder = tmp_path / "boxes"
    folder.mkdir()
    good = _jpeg(1)
    (folder / "good.jpg").write_bytes(good)
    ((name, bad),) = _only_tensorflow_rejects(1).items()
    (folder / name).write_bytes(bad)
    with open(folder / "boxes.csv", "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["split", "image_uri", "label", "xmin", "ymin", "xmax", "ymax"])
        writer.writerow(["TRAIN", "good.jpg", "cat", 0.1, 0.1, 0.5, 0.5])
        writer.writerow(["TRAIN", name, "cat", 0.1, 0.1, 0.5, 0.5])
    fresh = _run(CONVERT, str(folder / "boxes.csv"), str(tmp_path / "fresh"))
    assert fresh["tensorflow_imported"] is False
    here = tfrecorder.convert(str(folder / "boxes.csv"), str(tmp_path / "here"), progress=False)
    assert _discards(fresh["dir"]) == _discards(here["tfrecord_dir"])
    assert [uri for uri, _reason in _discards(fresh["dir"])] == [name]


def test_the_decoding_context_creates_cpu_devices_only(tf):
    """On a machine with GPUs a default context would initialise every visible GPU and reserve most of its
    memory next to the training process; the decoding context's config creates no GPU device."""
    assert tf.compat.v1.ConfigProto.FromString(tensorflow_kernels.CPU_ONLY_CONFIG).device_count == {"GPU": 0}
    kernels = tensorflow_kernels.kernels()
    assert isinstance(kernels, tensorflow_kernels.NativeKernels)
    devices = kernels.device_types()
    assert devices and set(devices) == {"CPU"}


EXIT_WHILE_LOADING = """
import os, sys, time
from tfrecorder.io import tensorflow_kernels
before = os.fstat(2)
tensorflow_kernels.load_in_background()
deadline = time.monotonic() + 30
while os.path.samestat(os.fstat(2), before) and tensorflow_kernels._loaded is None and time.monotonic() < deadline:
    time.sleep(0.001)  # until the loading thread holds stderr
print("held:", not os.path.samestat(os.fstat(2), before))
print("error: the one line before exiting", file=sys.stderr)
sys.exit(2)
"""


def test_a_process_exiting_while_the_kernels_load_keeps_what_it_printed_to_stderr():
    """The loading thread holds file descriptor 2 (to drop TensorFlow's start-up lines) and writes back what
    it caught when it ends: a process that prints its error and exits meanwhile (the command line's one
    line, exit 2) waits for it, so the line is not lost with the thread."""
    done = subprocess.run([sys.executable, "-c", EXIT_WHILE_LOADING], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stdout.strip() == "held: True", (done.stdout, done.stderr)
    assert "error: the one line before exiting" in done.stderr
