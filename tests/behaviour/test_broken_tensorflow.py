"""A conversion that decodes images (validate="decode") on a machine whose TensorFlow is broken:
native libraries that are present but do not load fall back to the `tensorflow` package's kernels;
if that does not import either, one clear error (CLI: one line, exit 1) and nothing left in the output
directory. (The libraries load while the pipeline starts: the decoding step is the first to need them.)

The libraries are real files that are not libraries; the broken package is a real package on the
path whose import fails, as a missing CUDA or C++ runtime library makes it fail.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import imagegen
from tfrecorder.io import tensorflow_kernels

NAMES = tensorflow_kernels.LIBRARY_NAMES["linux"]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux wheel's library names")

FALLBACK = """
import json, sys
import tfrecorder
from tfrecorder.io import tensorflow_kernels
tensorflow_kernels.LIBRARY_DIR = sys.argv[3]
result = tfrecorder.convert(sys.argv[1], sys.argv[2], progress=False)
print(json.dumps({"kernels": type(tensorflow_kernels.kernels()).__name__, "written": result["written"],
                  "reasons": result["discard_reasons"]}))
"""


@pytest.fixture
def table(tmp_path) -> Path:
    (tmp_path / "good.png").write_bytes(imagegen.odd_images()["rgba.png"][0])
    (tmp_path / "broken.jpg").write_bytes(imagegen.odd_images()["rgb.jpg"][0][:-600])
    with open(tmp_path / "table.csv", "w", newline="") as stream:
        csv.writer(stream).writerows([["split", "image_uri", "label"], ["TRAIN", "good.png", "a"],
                                      ["TRAIN", "broken.jpg", "b"]])
    return tmp_path / "table.csv"


def _broken_libraries(directory: Path) -> Path:
    directory.mkdir(parents=True)
    for name in NAMES:
        (directory / name).write_bytes(b"not a shared library\n" * 100)
    return directory


def _env(*first: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, first), *sys.path])}


def test_native_libraries_that_do_not_load_fall_back_to_the_python_package(table, tmp_path):
    done = subprocess.run([sys.executable, "-c", FALLBACK, str(table), str(tmp_path / "out"),
                           str(_broken_libraries(tmp_path / "libs"))],
                          capture_output=True, text=True, timeout=300, env=_env())
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["kernels"] == "PythonKernels"
    assert found["written"] == {"TRAIN": 1} and sum(found["reasons"].values()) == 1
    assert "do not load" in done.stderr  # one warning says why decoding is slower to start


CLI_WAITING_FOR_TENSORFLOW = """
import sys
from beam_pipelines.launches import launch
from tfrecorder.cli import main
launch.LOADS_WHILE_STARTING_ROWS = -1  # as a large job: the libraries are waited for before the pipeline starts
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("libraries,start", [("broken", "while loading"), ("missing", "while loading"),
                                             ("missing", "after loading")])
def test_no_usable_tensorflow_is_one_clear_error_that_leaves_nothing_behind(table, tmp_path, libraries, start):
    package = tmp_path / "site" / "tensorflow"
    if libraries == "broken":
        _broken_libraries(package)
    else:
        package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        'raise ImportError("libcudart.so.12: cannot open shared object file: No such file or directory")\n')
    output_dir = tmp_path / "out"
    command = ["-m", "tfrecorder"] if start == "while loading" else ["-c", CLI_WAITING_FOR_TENSORFLOW]
    done = subprocess.run([sys.executable, *command, "convert", "--source", str(table), "--output_dir", str(output_dir)],
                          capture_output=True, text=True, timeout=300, env=_env(tmp_path / "site"))
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("tfrecorder: error: validate=\"decode\" needs TensorFlow") and "libcudart" in line
    assert "validate=\"header\"" in line
    assert list(output_dir.iterdir()) == []
