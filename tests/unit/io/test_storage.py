"""tfrecorder.io.storage on local paths (gs:// through the emulator: tests/unit/io/test_gcs.py, behaviour/test_gcs_jobs.py and test_outages.py)."""
from __future__ import annotations

import os

import pytest

from tfrecorder.io import storage


def test_local_files_round_trip(tmp_path):
    path = storage.join(str(tmp_path), "a", "b.bin")  # open_write creates missing parent directories
    storage.write_bytes(path, b"0123456789")
    assert storage.exists(path) and not storage.is_dir(path) and storage.is_dir(str(tmp_path / "a"))
    assert storage.read_bytes(path) == b"0123456789" and storage.size(path) == 10
    assert storage.read_range(path, 3, 4) == b"3456"
    assert storage.read_range(path, 8, 100) == b"89"  # fewer bytes only at the end of the file
    assert storage.read_range(path, 0, 0) == b""
    copies = [(path, str(tmp_path / "c" / f"{i}.bin")) for i in range(3)]
    storage.copy_files(copies)
    assert storage.list_files(str(tmp_path)) == sorted([path, *(d for _s, d in copies)])
    storage.delete_files([copies[0][1], str(tmp_path / "never-there")])
    assert not storage.exists(copies[0][1]) and storage.exists(path)  # sources stay
    storage.delete_tree(str(tmp_path / "c"))
    storage.delete_tree(str(tmp_path / "c"))  # missing is fine
    assert storage.list_files(str(tmp_path)) == [path]


@pytest.mark.parametrize("size", [0, 1, 80_000, (1 << 20) + 7])
def test_local_reads_return_every_byte(tmp_path, size):
    data = os.urandom(size)
    (tmp_path / "f.bin").write_bytes(data)
    assert storage.read_bytes(str(tmp_path / "f.bin")) == data


def test_local_reads_of_proc_files_and_failures_are_opens(tmp_path):
    status = storage.read_bytes("/proc/self/status")  # a regular file whose size says 0
    assert status.startswith(b"Name:") and status.endswith(b"\n")
    with pytest.raises(FileNotFoundError):
        storage.read_bytes(str(tmp_path / "missing.jpg"))
    with pytest.raises(IsADirectoryError):
        storage.read_bytes(str(tmp_path))


def test_remote_paths_join_with_slashes():
    assert storage.is_remote("gs://b/x") and not storage.is_remote("/tmp/x")
    assert storage.join("gs://b/out", "job", "metadata.json") == "gs://b/out/job/metadata.json"
    assert storage.join("out", "job") == os.path.join("out", "job")


def test_check_writable_dir_probes_the_nearest_existing_ancestor(tmp_path):
    storage.check_writable_dir(str(tmp_path / "not" / "yet" / "there"))
    assert os.listdir(tmp_path) == []  # the probe file is removed, nothing is created
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=f"cannot be a directory: {tmp_path / 'file'} is a file"):
        storage.check_writable_dir(str(tmp_path / "file" / "out"))
