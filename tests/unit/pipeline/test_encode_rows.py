"""beam_pipelines.steps.encode_rows: image read problems of a row are discards, storage failures fail the bundle."""
from __future__ import annotations

import pytest

from beam_pipelines.steps import encode_rows


def test_read_image_discards_problems_of_the_path_and_raises_storage_failures(tmp_path):
    from tfrecorder.errors import StorageReadError
    from tfrecorder.rows.row_encoding import RowError

    image = tmp_path / "a.jpg"
    image.write_bytes(b"bytes")
    assert encode_rows.read_image(str(image)) == b"bytes"
    row_problems = {
        str(tmp_path / "missing.jpg"): "missing file: ",
        str(image / "under-a-file.jpg"): "missing file: ",
        str(tmp_path): "not a file: ",
        str(tmp_path / ("x" * 300)): "invalid path: ",
        "nul\x00byte.jpg": "invalid path: ",
    }
    for uri, reason in row_problems.items():
        with pytest.raises(RowError, match=f"^{reason}"):
            encode_rows.read_image(uri)
    with pytest.raises(StorageReadError, match=r"could not read /proc/self/mem: Input/output error"):
        encode_rows.read_image("/proc/self/mem")  # the kernel answers EIO: a device error, not the row's fault
