"""File access for local paths and gs:// URLs.

Local paths use the OS directly (fast, atomic renames); anything with a scheme goes through Beam's
FileSystems, which honours STORAGE_EMULATOR_HOST for GCS. TensorFlow's gfile is never used here:
it cannot be pointed at an emulator.
"""
from __future__ import annotations

import os
import posixpath
import shutil
from typing import BinaryIO, Iterable


def is_remote(path: str) -> bool:
    return "://" in path


def join(base: str, *parts: str) -> str:
    return posixpath.join(base, *parts) if is_remote(base) else os.path.join(base, *parts)


def _filesystems():
    from apache_beam.io.filesystems import FileSystems

    return FileSystems


def open_read(path: str) -> BinaryIO:
    if is_remote(path):
        return _filesystems().open(path)
    return open(path, "rb")


def open_write(path: str) -> BinaryIO:
    if is_remote(path):
        return _filesystems().create(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    return open(path, "wb")


def read_bytes(path: str) -> bytes:
    with open_read(path) as stream:
        return stream.read()


def write_bytes(path: str, data: bytes) -> None:
    with open_write(path) as stream:
        stream.write(data)


def exists(path: str) -> bool:
    if is_remote(path):
        return _filesystems().exists(path)
    return os.path.exists(path)


def size(path: str) -> int:
    if is_remote(path):
        return _filesystems().match([path])[0].metadata_list[0].size_in_bytes
    return os.path.getsize(path)


def list_files(prefix: str) -> list[str]:
    """Every file under the directory `prefix` (recursively), sorted."""
    if is_remote(prefix):
        pattern = prefix.rstrip("/") + "/**"
        results = _filesystems().match([pattern])[0].metadata_list
        return sorted(m.path for m in results)
    found = []
    for root, _dirs, files in os.walk(prefix):
        found.extend(os.path.join(root, f) for f in files)
    return sorted(found)


def rename(source: str, destination: str) -> None:
    if is_remote(source) or is_remote(destination):
        _filesystems().rename([source], [destination])
    else:
        os.makedirs(os.path.dirname(destination) or ".", exist_ok=True)
        os.replace(source, destination)


def delete_tree(prefix: str) -> None:
    """Remove a directory (local) or every object under a prefix (remote); missing is fine."""
    if is_remote(prefix):
        paths = list_files(prefix)
        if paths:
            _filesystems().delete(paths)
    else:
        shutil.rmtree(prefix, ignore_errors=True)


def delete_files(paths: Iterable[str]) -> None:
    paths = list(paths)
    remote = [p for p in paths if is_remote(p)]
    if remote:
        _filesystems().delete(remote)
    for path in paths:
        if not is_remote(path) and os.path.exists(path):
            os.remove(path)
