"""beam_pipelines.steps.encode_rows: image read problems of a row are discards, storage failures fail the bundle."""
from __future__ import annotations

import subprocess
import sys

import pytest

from beam_pipelines.steps import encode_rows
from tfrecorder.errors import RowError


def test_read_image_discards_problems_of_the_path_and_raises_storage_failures(tmp_path):
    image = tmp_path / "a.jpg"
    image.write_bytes(b"bytes")
    assert encode_rows.read_image(str(image)) == b"bytes"
    row_problems = {
        str(tmp_path / "missing.jpg"): "missing file: ",
        str(image / "under-a-file.jpg"): "missing file: ",
        str(tmp_path): "not a file: ",
        str(tmp_path / ("x" * 300)): "invalid path: ",
        "nul\x00byte.jpg": "invalid path: ",
        "/proc/self/mem": r"not a regular file: /proc/self/mem is a kernel interface file",  # EIO if read
        "/dev/zero": "not a regular file: /dev/zero is a character device",  # endless if read
        "https://example.com/a.jpg": "unsupported image location: http\\(s\\) URLs are not read; copy the images",
        "ftp://example.com/a.jpg": "unsupported image location: no installed file system reads ftp:// URLs",
    }
    for uri, reason in row_problems.items():
        with pytest.raises(RowError, match=f"^{reason}"):
            encode_rows.read_image(uri)
    with pytest.raises(RowError, match=r"^file too large: .*a.jpg holds 5 bytes, more than 4 \(max_image_bytes\)"):
        encode_rows.read_image(str(image), max_bytes=4)
    assert encode_rows.read_image(str(image), max_bytes=5) == b"bytes"


EXHAUSTED = """
import os, resource, sys
from beam_pipelines.steps import encode_rows
resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
held = []
try:
    while True:
        held.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
try:
    encode_rows.read_image(sys.argv[1])
except Exception as exc:
    print(type(exc).__name__, exc)
"""


def test_a_failure_of_the_worker_not_of_the_file_raises_storage_read_error(tmp_path):
    """A process out of file descriptors cannot read any image: the job fails (StorageReadError), no
    row is discarded for it."""
    image = tmp_path / "a.jpg"
    image.write_bytes(b"bytes")
    done = subprocess.run([sys.executable, "-c", EXHAUSTED, str(image)], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == f"StorageReadError [Errno 24] could not read {image}: Too many open files", done.stderr
