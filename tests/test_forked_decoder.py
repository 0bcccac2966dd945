"""Small decode-mode jobs decode in a forked child that imports TensorFlow (beam_pipelines.forked_decoder).

The pytest process has TensorFlow imported, so here conversions decode in-process; the forked path runs
in fresh interpreters, and both must write and discard exactly the same rows.
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
from beam_pipelines import runners
from beam_pipelines.forked_decoder import ForkedDecoder
from support import imagegen, mutations
from support.readers import read_job
from tfrecorder.io import decode_check, images

CONVERT = """
import json, sys
import tfrecorder
result = tfrecorder.convert(sys.argv[1], sys.argv[2], progress=False)
print(json.dumps({"tensorflow_imported": "tensorflow" in sys.modules, "dir": result["tfrecord_dir"]}))
"""

CHILD_DIES = """
import json, os, signal, sys, time
from beam_pipelines.fork_pool import ChildFailed
from beam_pipelines.forked_decoder import ForkedDecoder
decoder = ForkedDecoder()
os.kill(decoder.pid, signal.SIGKILL)
try:
    decoder.submit({"a.jpg": open(sys.argv[1], "rb").read()})
    outcome = "no error"
except ChildFailed as exc:
    outcome = "ChildFailed: " + str(exc)
decoder.close()
print(json.dumps({"outcome": outcome, "tensorflow_imported": "tensorflow" in sys.modules}))
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
            images.probe_image(mutated)
        except images.InvalidImage:
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


def test_forked_decoding_writes_and_discards_what_in_process_decoding_does(mixed_table, tmp_path):
    forked = _run(CONVERT, str(mixed_table), str(tmp_path / "forked"))
    assert forked["tensorflow_imported"] is False  # the child decoded: this process never imported it
    in_process = tfrecorder.convert(str(mixed_table), str(tmp_path / "in-process"), progress=False)
    assert _records(forked["dir"]) == _records(in_process["tfrecord_dir"])
    discards = _discards(forked["dir"])
    assert discards == _discards(in_process["tfrecord_dir"])
    assert sum("TensorFlow cannot decode it" in reason for _uri, reason in discards) == 6


def test_detection_job_decodes_in_the_child_too(tmp_path):
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
    forked = _run(CONVERT, str(folder / "boxes.csv"), str(tmp_path / "forked"))
    assert forked["tensorflow_imported"] is False
    in_process = tfrecorder.convert(str(folder / "boxes.csv"), str(tmp_path / "in-process"), progress=False)
    assert _discards(forked["dir"]) == _discards(in_process["tfrecord_dir"])
    assert [uri for uri, _reason in _discards(forked["dir"])] == [name]


def test_a_child_that_dies_fails_the_batch(tmp_path):
    image = tmp_path / "a.jpg"
    image.write_bytes(_jpeg(0))
    found = _run(CHILD_DIES, str(image))
    assert found["outcome"].startswith("ChildFailed: an encoding process stopped")
    assert found["tensorflow_imported"] is False


def test_not_started_once_tensorflow_runs_here():
    """Forking a process whose TensorFlow has threads running is unsafe (this pytest process has it)."""
    assert "tensorflow" in sys.modules
    with pytest.raises(RuntimeError, match="TensorFlow is imported already"):
        ForkedDecoder()
    assert runners.forked_decoder_pays_off(10) is False


def test_only_small_jobs_on_the_in_process_worker_fork_a_decoder():
    check = ("import json; from beam_pipelines import runners as r; "
             "print(json.dumps([r.forked_decoder_pays_off(r.FORKED_DECODE_MAX_ROWS), "
             "r.forked_decoder_pays_off(r.FORKED_DECODE_MAX_ROWS + 1), "
             "r.forked_decoder_pays_off(10, {'direct_num_workers': 1})]))")
    assert _run(check) == [True, False, False]
