"""tfrecorder.io.storage on local paths (gs:// through the emulator: tests/unit/io/test_gcs.py, behaviour/test_gcs_jobs.py and test_outages.py)."""
from __future__ import annotations

import mmap
import os
import pickle
from pathlib import Path

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


def test_a_local_tree_of_many_files_is_removed_without_following_links(tmp_path):
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "kept.txt").write_bytes(b"x")
    (outside / "deep" / "kept.txt").write_bytes(b"y")
    tree = tmp_path / "tree"
    for folder in ("", "sub", "sub/many"):
        (tree / folder).mkdir(exist_ok=True)
    for i in range(3 * storage.LOCAL_UNLINKS):  # enough files in one directory to unlink them in parallel
        (tree / "sub" / "many" / f"{i}.part").write_bytes(b"z" * i)
        (tree / f"{i}.offsets").write_bytes(b"o")
    os.symlink(outside, tree / "sub" / "many" / "to-a-directory")
    os.symlink(outside / "kept.txt", tree / "to-a-file")
    storage.delete_tree(str(tree))
    assert not tree.exists() and (outside / "kept.txt").read_bytes() == b"x"
    assert (outside / "deep" / "kept.txt").read_bytes() == b"y"
    storage.delete_tree(str(tmp_path / "outside" / "kept.txt" / "not-a-directory"))  # missing is fine
    os.symlink(outside, tmp_path / "link")
    storage.delete_tree(str(tmp_path / "link"))  # a link to a directory: nothing below it is removed
    assert (outside / "kept.txt").exists() and (outside / "deep" / "kept.txt").exists()


@pytest.mark.parametrize("size", [0, 1, 80_000, (1 << 20) + 7])
def test_local_reads_return_every_byte(tmp_path, size):
    data = os.urandom(size)
    (tmp_path / "f.bin").write_bytes(data)
    assert storage.read_bytes(str(tmp_path / "f.bin")) == data


def test_local_reads_refuse_kernel_files_and_fail_as_opens(tmp_path):
    for kernel_file in ("/proc/self/status", "/proc/self/mem"):  # "regular files" of size 0 (mem: EIO if read)
        with pytest.raises(storage.NotRegularFile, match="a kernel interface file"):
            storage.read_bytes(kernel_file)
    with pytest.raises(storage.NotRegularFile, match="a character device"):
        storage.read_bytes("/dev/zero")
    with pytest.raises(FileNotFoundError):
        storage.read_bytes(str(tmp_path / "missing.jpg"))
    with pytest.raises(IsADirectoryError):
        storage.read_bytes(str(tmp_path))


def test_a_local_regular_file_maps_and_nothing_else_is_opened(tmp_path):
    path = tmp_path / "table.arrow"
    path.write_bytes(b"0123456789" * 1000)
    mapped = storage.map_local(str(path))
    path.unlink()  # the mapping outlives the file's name and its descriptor
    assert bytes(mapped[:10]) == b"0123456789" and len(mapped) == 10_000
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opened, it would block until a writer came
    with pytest.raises(storage.NotRegularFile, match="a FIFO"):
        storage.map_local(str(fifo))
    with pytest.raises(storage.NotRegularFile, match="a character device"):
        storage.map_local("/dev/zero")
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(ValueError):
        storage.map_local(str(tmp_path / "empty"))


def test_refusals_cross_processes_as_they_were_raised():
    """A worker's exception is pickled to its parent (beam_pipelines.workers.fork_pool)."""
    for raised in (storage.NotRegularFile("/x/fifo", "a FIFO"), storage.FileTooLarge("/x/a.jpg", 10, 12),
                   storage.FileTooLarge("gs://b/a.jpg", 10)):
        copy = pickle.loads(pickle.dumps(raised))
        assert type(copy) is type(raised) and str(copy) == str(raised)
        assert (copy.errno, copy.strerror, copy.filename) == (raised.errno, raised.strerror, raised.filename)


def test_a_source_is_read_not_mapped_in_the_callers_process(tmp_path):
    path = tmp_path / "table.parquet"
    path.write_bytes(b"PAR1" + os.urandom(10_000))
    with storage.open_source(str(path)) as source:  # mapped only in tfrecorder's own workers: test_fork_pool.py
        assert source.read(5) == path.read_bytes()[:5] and not isinstance(source, mmap.mmap)
        assert os.path.realpath(path) not in Path("/proc/self/maps").read_text()


@pytest.mark.parametrize("size", [0, 1, 80_000])
def test_local_reads_stop_at_the_cap_and_give_everything_below_it(tmp_path, size):
    path = tmp_path / "f.bin"
    data = os.urandom(size)
    path.write_bytes(data)
    assert storage.read_bytes(str(path), max_bytes=size) == data
    if size:
        with pytest.raises(storage.FileTooLarge, match=f"{size:,} bytes, more than {size - 1:,}"):
            storage.read_bytes(str(path), max_bytes=size - 1)


def test_a_sparse_file_over_the_cap_is_refused_by_its_size_unread(tmp_path):
    """2.6 GB (more than one read returns on Linux, ~2 GiB): refused from fstat's size, not read."""
    path = tmp_path / "huge.jpg"
    with open(path, "wb") as stream:
        stream.truncate(2_600_000_000)
    with pytest.raises(storage.FileTooLarge, match="2,600,000,000 bytes, more than 536,870,912"):
        storage.read_bytes(str(path), max_bytes=512 << 20)


def test_urls_no_storage_reads_are_refused_by_name():
    with pytest.raises(storage.UnsupportedLocation, match=r"^http\(s\) URLs are not read"):
        storage.read_bytes("https://example.com/a.jpg")
    with pytest.raises(storage.UnsupportedLocation, match="^no installed file system reads ftp:// URLs") as raised:
        storage.read_bytes("ftp://example.com/a.jpg")
    assert "apache-beam[gcp]" not in str(raised.value)


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


def test_exclusive_creation_keeps_the_first_content_and_leaves_no_staging_file(tmp_path):
    path = str(tmp_path / "d" / "k.json")
    assert storage.create_exclusive(path, b"first") is True
    assert storage.create_exclusive(path, b"second") is False
    assert open(path, "rb").read() == b"first" and os.listdir(tmp_path / "d") == ["k.json"]
    size, modified = storage.identity(path)
    assert size == 5 and modified == os.stat(path).st_mtime_ns


def test_holds_files_of_a_local_directory(tmp_path):
    (tmp_path / "f.txt").write_text("x")
    assert storage.holds_files(str(tmp_path)) and not storage.holds_files(str(tmp_path / "f.txt"))
    assert not storage.holds_files(str(tmp_path / "absent"))
