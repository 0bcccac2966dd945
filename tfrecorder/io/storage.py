"""File access for local paths and gs:// URLs.

Local paths use the OS directly (fast, atomic renames). gs:// URLs go through tfrecorder.io.gcs
(google-cloud-storage: anonymous on an emulator, Application Default Credentials otherwise, transient
errors retried). Other schemes go through Beam's FileSystems. TensorFlow's gfile is never used here:
it cannot be pointed at an emulator.

Failures are raised the same way for every kind of path: FileNotFoundError, PermissionError, OSError.
`read_bytes` returns a whole file or fails, and reads only what cannot hang or flood a worker: locally
regular files only (never a FIFO, a device, a socket or a file of /proc, /sys and the like), and at most
`max_bytes` of anything. http(s) URLs are refused (UnsupportedLocation): no web server is read.
"""
from __future__ import annotations

import contextlib
import errno
import functools
import mmap
import os
import posixpath
import shutil
import stat
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO, Iterable, Iterator, Optional, Union

from tfrecorder.io import gcs

PARALLEL_REQUESTS = 32  # concurrent copy/delete requests when publishing or cleaning up remote files
MAX_NAME_BYTES = 255  # the longest file or directory name local file systems take (NAME_MAX)
WEB_SCHEMES = ("http://", "https://")
# Kernel interface file systems: their files say they are regular, but /proc/self/mem fails with EIO,
# /proc/kcore claims 128 TB and tracefs's trace_pipe blocks its reader until events arrive.
KERNEL_FILE_SYSTEMS = frozenset({"proc", "sysfs", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs",
                                 "configfs", "pstore", "bpf", "efivarfs", "fusectl", "binfmt_misc", "mqueue"})
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)  # O_NONBLOCK: a FIFO cannot block the open
_READ_STEP = 1 << 30  # bytes asked of one os.read (Linux returns at most ~2 GiB per call)
_GROWTH_STEP = 1 << 16  # bytes asked past the size fstat gave: finds the end, or the rest of a growing file
_maps_sources = False  # this process is one of tfrecorder's own workers: see maps_sources_here


class UnsupportedLocation(ValueError):
    """A URL no storage here reads: http(s), or a scheme none of Beam's installed file systems handles."""


class NotRegularFile(OSError):
    """A local path naming something other than a regular file (`strerror` says what): never read."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(errno.EINVAL, kind, path)

    def __reduce__(self):  # picklable (raised in a forked worker, re-raised by its parent) despite the constructor
        return type(self), (self.filename, self.strerror)


class FileTooLarge(OSError):
    """A file or object larger than the caller's cap (`strerror` says how large): not read past the cap."""

    def __init__(self, path: str, max_bytes: int, size: Optional[int] = None) -> None:
        held = f"{size:,} bytes, more than {max_bytes:,}" if size is not None else f"more than {max_bytes:,} bytes"
        super().__init__(errno.EFBIG, held, path)
        self.max_bytes, self.size = max_bytes, size

    def __reduce__(self):  # picklable, as NotRegularFile
        return type(self), (self.filename, self.max_bytes, self.size)


def is_remote(path: str) -> bool:
    return "://" in path


def user_path(path: Union[str, os.PathLike], what: str) -> str:
    """A path argument in the form every later step uses: a str, with a leading `~` expanded when it is
    local (URLs are kept as given). ValueError naming `what` when one of its names is longer than
    MAX_NAME_BYTES, which the file system would refuse only once work has started."""
    path = os.fspath(path)
    if is_remote(path):
        return path
    path = os.path.expanduser(path)
    for name in path.split(os.sep):
        if len(os.fsencode(name)) > MAX_NAME_BYTES:
            raise ValueError(f"{what}: the name {name[:24]}… is {len(os.fsencode(name))} bytes long; "
                             f"file and directory names are limited to {MAX_NAME_BYTES} bytes")
    return path


def join(base: str, *parts: str) -> str:
    return posixpath.join(base, *parts) if is_remote(base) else os.path.join(base, *parts)


def _filesystems():
    from apache_beam.io.filesystems import FileSystems

    return FileSystems


def _check_location(path: str) -> None:
    """UnsupportedLocation unless a storage here reads `path` (local, gs://, Beam's other file systems)."""
    if not is_remote(path) or gcs.is_gcs(path):
        return
    if path.lower().startswith(WEB_SCHEMES):
        raise UnsupportedLocation("http(s) URLs are not read; copy the images to local storage or gs://")
    try:
        _filesystems().get_filesystem(path)
    except ValueError:  # Beam's text sends users to install apache-beam[gcp], whatever the scheme
        scheme = path.split("://", 1)[0]
        raise UnsupportedLocation(f"no installed file system reads {scheme}:// URLs; use local paths or gs://") from None


def open_read(path: str) -> BinaryIO:
    """A binary, seekable reader (wrap it in gzip.GzipFile for .gz files)."""
    if gcs.is_gcs(path):
        return gcs.open_read(path)
    if is_remote(path):
        _check_location(path)
        return _filesystems().open(path)
    return open(path, "rb")


def open_write(path: str) -> BinaryIO:
    if gcs.is_gcs(path):
        return gcs.open_write(path)
    if is_remote(path):
        return _filesystems().create(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    return open(path, "wb")


def read_bytes(path: str, max_bytes: Optional[int] = None) -> bytes:
    """Every byte of a file or object, or an error (never part of it without one).

    `max_bytes`: FileTooLarge instead of anything larger (a gs:// object is not downloaded past it).
    Locally only regular files are read: NotRegularFile for a FIFO, device, socket or a file of a kernel
    file system such as /proc, which is never opened; IsADirectoryError for a directory.
    """
    if gcs.is_gcs(path):
        data = gcs.read_bytes(path, None if max_bytes is None else max_bytes + 1)
    elif is_remote(path):
        with open_read(path) as stream:
            data = stream.read() if max_bytes is None else stream.read(max_bytes + 1)
    else:
        return _read_local(path, max_bytes)
    if max_bytes is not None and len(data) > max_bytes:
        raise FileTooLarge(path, max_bytes)
    return data


def _read_local(path: str, max_bytes: Optional[int]) -> bytes:
    """A local regular file's bytes: stat first, so that a FIFO or a device is never opened; the open is
    non-blocking and its fstat checked again (a FIFO put in the file's place meanwhile cannot block it);
    os.read without Python's buffered reader (~6 µs less CPU per 80 KB image). Same errors as open()."""
    _check_regular(os.stat(path), path)
    descriptor = os.open(path, _OPEN_FLAGS)
    try:
        status = os.fstat(descriptor)
        _check_regular(status, path)
        if max_bytes is not None and status.st_size > max_bytes:
            raise FileTooLarge(path, max_bytes, status.st_size)
        return _read_to_end(descriptor, status.st_size, path, max_bytes)
    finally:
        os.close(descriptor)


def _read_to_end(descriptor: int, size: int, path: str, max_bytes: Optional[int]) -> bytes:
    """Every byte to the end of the file. The first read asks one byte more than fstat's `size`: getting
    exactly `size` bytes is the whole file (one read, the common case). Anything else — a read cut short
    (one read stops at ~2 GiB on Linux; network file systems may return less), a file that grew since
    fstat — reads on until a read returns nothing. FileTooLarge as soon as more than `max_bytes` arrived."""
    limit = sys.maxsize if max_bytes is None else max_bytes + 1  # reading this much proves the file too large
    chunk = os.read(descriptor, min(size + 1, _READ_STEP, limit))
    if len(chunk) == size:
        return chunk
    chunks, total = [chunk], len(chunk)
    while chunk:
        if total >= limit:
            raise FileTooLarge(path, max_bytes)
        chunk = os.read(descriptor, min(max(size - total, _GROWTH_STEP), _READ_STEP, limit - total))
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def _check_regular(status: os.stat_result, path: str) -> None:
    """NotRegularFile (IsADirectoryError for a directory) unless `status` is a regular file's outside the
    kernel's file systems."""
    mode = status.st_mode
    if stat.S_ISREG(mode) and status.st_dev not in _kernel_file_system_devices():
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"), (stat.S_ISREG, "a kernel interface file (/proc, /sys, ...)"))
    raise NotRegularFile(path, next((kind for test, kind in kinds if test(mode)), "not a regular file"))


@functools.lru_cache(maxsize=1)
def _kernel_file_system_devices() -> frozenset[int]:
    """The st_dev of every mounted kernel interface file system (KERNEL_FILE_SYSTEMS: /proc, /sys, cgroups,
    debugfs, tracefs, ...), read once per process from /proc/self/mounts."""
    mount_points = {"/proc", "/sys"}
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) >= 3 and fields[2] in KERNEL_FILE_SYSTEMS:
                    mount_points.add(fields[1].replace("\\040", " "))
    except OSError:
        pass  # no /proc (not Linux): only the defaults, if they exist
    devices = set()
    for mount_point in mount_points:
        try:
            devices.add(os.stat(mount_point).st_dev)
        except OSError:
            continue
    return frozenset(devices)


def map_local(path: str) -> mmap.mmap:
    """A local regular file mapped read-only (its bytes read by the kernel as they are touched), checked as
    `read_bytes` checks one: stat first, a non-blocking open and its fstat (NotRegularFile for a FIFO, a
    device and the like, never blocked on); ValueError for an empty file (nothing to map)."""
    _check_regular(os.stat(path), path)
    descriptor = os.open(path, _OPEN_FLAGS)
    try:
        _check_regular(os.fstat(descriptor), path)
        return mmap.mmap(descriptor, 0, access=mmap.ACCESS_READ)  # the mapping outlives the descriptor
    finally:
        os.close(descriptor)


def maps_sources_here() -> None:
    """Declare this process one of tfrecorder's own workers (a forked child: beam_pipelines.workers.fork_pool),
    whose end its parent reports as a failed bundle: `open_source` maps local files here from now on."""
    global _maps_sources
    _maps_sources = True


@contextlib.contextmanager
def open_source(path: str) -> Iterator[Union[mmap.mmap, BinaryIO]]:
    """A source file to read columns from at random (a Parquet file's row group): in one of tfrecorder's
    own workers (maps_sources_here) a local file is mapped (map_local: regular files only), else a reader
    (open_read).

    Why: a mapping hands the reader the page cache's pages in place, while a reader copies them into
    fresh memory that the kernel must first zero (a half-million-row slice of the benchmark's Parquet
    file: 16k page faults, 0.16–0.23 s; mapped: 1.1k, 0.11–0.13 s). Why only in a worker: a file that
    another process truncates while it is mapped faults (SIGBUS) on the next read past its new end, which
    ends the process reading it. A worker's end fails its bundle (fork_pool.ChildFailed); the caller's
    process (a notebook's kernel) is never put at that risk, and reads. A file a worker cannot map (an
    empty one, a file system that does not map files, such as FUSE with direct I/O) is read there too;
    anything but a regular file is refused either way. A mapping is not closed here: the reader's
    buffers may hold it, and it goes with the last of them."""
    if _maps_sources and not is_remote(path):
        try:
            mapped = map_local(path)
        except NotRegularFile:
            raise
        except (OSError, ValueError):  # read below, which says what is wrong if anything is
            pass
        else:
            yield mapped
            return
    with open_read(path) as stream:
        yield stream


def read_range(path: str, start: int, length: int) -> bytes:
    """`length` bytes of a file from byte offset `start` (fewer only at the end of the file)."""
    if length <= 0:
        return b""
    if gcs.is_gcs(path):
        return gcs.read_range(path, start, length)
    with open_read(path) as stream:
        stream.seek(start)
        return stream.read(length)


def write_bytes(path: str, data: bytes) -> None:
    with open_write(path) as stream:
        stream.write(data)


def create_exclusive(path: str, data: bytes) -> bool:
    """Create `path` holding `data` only if nothing is there yet; True if this call created it, False
    if it existed. Atomic: locally written under a temporary name and hard-linked into place (a link
    never replaces), so a reader never sees half of it; on gs:// one upload with a generation
    precondition of 0. What the first creator wrote wins."""
    if gcs.is_gcs(path):
        return gcs.create_exclusive(path, data)
    if is_remote(path):
        raise UnsupportedLocation(f"exclusive creation is not supported on {path}")
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    descriptor, staging = tempfile.mkstemp(dir=directory, prefix=".create-")
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)
        try:
            os.link(staging, path)
        except FileExistsError:
            return False
        return True
    finally:
        os.remove(staging)


def identity(path: str) -> tuple:
    """What changes when a file changes: (size, modification time in ns) locally, (generation, size) on
    gs://, (size,) elsewhere."""
    if gcs.is_gcs(path):
        return gcs.generation(path)
    if is_remote(path):
        return (size(path),)
    status = os.stat(path)
    return status.st_size, status.st_mtime_ns


def exists(path: str) -> bool:
    """True for an existing file or object (a gs:// "directory" prefix is not an object)."""
    if gcs.is_gcs(path):
        return gcs.exists(path)
    if is_remote(path):
        return _filesystems().exists(path)
    return os.path.exists(path)


def is_dir(path: str) -> bool:
    """A local directory, or a remote prefix holding objects that is not itself an object."""
    if not is_remote(path):
        return os.path.isdir(path)
    return not exists(path.rstrip("/")) and bool(list_files(path))


def holds_files(path: str) -> bool:
    """A local directory, or a remote prefix holding at least one object (found without listing it all)."""
    if gcs.is_gcs(path):
        return gcs.holds_objects(path)
    if is_remote(path):
        return bool(list_files(path))
    return os.path.isdir(path)


def size(path: str) -> int:
    if gcs.is_gcs(path):
        return gcs.size(path)
    if is_remote(path):
        return _filesystems().match([path])[0].metadata_list[0].size_in_bytes  # FileSystems has no metadata()
    return os.path.getsize(path)


def list_files(prefix: str) -> list[str]:
    """Every file under the directory `prefix` (recursively), sorted."""
    if gcs.is_gcs(prefix):
        return gcs.list_files(prefix)
    if is_remote(prefix):
        pattern = prefix.rstrip("/") + "/**"
        results = _filesystems().match([pattern])[0].metadata_list
        return sorted(m.path for m in results)
    found = []
    for root, _dirs, files in os.walk(prefix):
        found.extend(os.path.join(root, f) for f in files)
    return sorted(found)


def list_dirs(prefix: str) -> list[str]:
    """The directories directly under the directory `prefix`, sorted (gs://: one delimited listing)."""
    if gcs.is_gcs(prefix):
        return gcs.list_dirs(prefix)
    if is_remote(prefix):
        base = prefix.rstrip("/") + "/"
        return sorted({base + path[len(base):].split("/", 1)[0] for path in list_files(prefix) if "/" in path[len(base):]})
    if not os.path.isdir(prefix):
        return []
    return sorted(os.path.join(prefix, name) for name in os.listdir(prefix) if os.path.isdir(os.path.join(prefix, name)))


def copy(source: str, destination: str) -> None:
    """Copy a file or object, leaving the source in place (gs:// to gs://: server-side; between a local
    file and an object: streamed through this process)."""
    if gcs.is_gcs(source) and gcs.is_gcs(destination):
        gcs.copy(source, destination)
    elif is_remote(source) and is_remote(destination) and source.split("://")[0] == destination.split("://")[0]:
        _filesystems().copy([source], [destination])
    elif is_remote(source) or is_remote(destination):
        with open_read(source) as reader, open_write(destination) as writer:
            shutil.copyfileobj(reader, writer, 8 * 1024 * 1024)
    else:
        os.makedirs(os.path.dirname(destination) or ".", exist_ok=True)
        shutil.copyfile(source, destination)


def copy_files(pairs: Iterable[tuple[str, str]]) -> None:
    """Copy many (source, destination) files or objects; remote ones in parallel."""
    pairs = list(pairs)
    _in_parallel(lambda pair: copy(*pair), pairs, any(is_remote(s) or is_remote(d) for s, d in pairs))


def _in_parallel(action, items: list, remote: bool = True) -> None:
    """Apply `action` to every item; remote requests (I/O-bound) run on up to PARALLEL_REQUESTS threads."""
    if len(items) <= 1 or not remote:
        for item in items:
            action(item)
        return
    with ThreadPoolExecutor(min(PARALLEL_REQUESTS, len(items)), thread_name_prefix="tfrecorder-storage") as pool:
        for _ in pool.map(action, items):  # re-raises the first failure
            pass


LOCAL_UNLINKS = 16  # files of a local directory removed at once (delete_tree)


def delete_tree(prefix: str) -> None:
    """Remove a directory (local) or every object under a prefix (remote, in parallel); missing is fine.

    Locally each directory's files are unlinked on LOCAL_UNLINKS threads first: on a file system that
    discards freed blocks (ext4 mounted with `discard`) an unlink of a file written out earlier waits
    ~1 ms, and a job's scratch directory holds thousands (a 20,000-image job's piece sidecars: ~3 s one
    after another, ~4 times less at once). os.fwalk opens each directory without following a symbolic
    link and unlinks by its descriptor, as shutil.rmtree does; rmtree then removes what is left."""
    if is_remote(prefix):
        delete_files(list_files(prefix))
        return
    try:
        _unlink_files_in_parallel(prefix)
    except OSError:
        pass  # whatever is left goes below, as before
    shutil.rmtree(prefix, ignore_errors=True)


def _unlink_files_in_parallel(directory: str) -> None:
    if (not hasattr(os, "fwalk") or os.unlink not in os.supports_dir_fd  # Windows: rmtree alone
            or not os.path.isdir(directory) or os.path.islink(directory)):
        return
    pool: Optional[ThreadPoolExecutor] = None
    try:
        for _, _, names, directory_fd in os.fwalk(directory, follow_symlinks=False):
            if len(names) < 2 * LOCAL_UNLINKS:
                for name in names:
                    _unlink_at(name, directory_fd)
                continue
            pool = pool or ThreadPoolExecutor(LOCAL_UNLINKS, thread_name_prefix="tfrecorder-unlink")
            for _ in pool.map(lambda name, fd=directory_fd: _unlink_at(name, fd), names):
                pass  # all done before fwalk closes the directory's descriptor
    finally:
        if pool is not None:
            pool.shutdown()


def _unlink_at(name: str, directory_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=directory_fd)
    except OSError:
        pass  # gone already, or not removable: rmtree meets it next


def delete_files(paths: Iterable[str]) -> None:
    paths = list(paths)
    _in_parallel(lambda path: gcs.delete([path]), [p for p in paths if gcs.is_gcs(p)])
    other_remote = [p for p in paths if is_remote(p) and not gcs.is_gcs(p)]
    if other_remote:
        _filesystems().delete(other_remote)
    local = [path for path in paths if not is_remote(path)]
    _in_parallel(_remove_local, local, remote=len(local) >= 2 * LOCAL_UNLINKS)  # many: at once (delete_tree)


def _remove_local(path: str) -> None:
    try:
        os.remove(path)
    except (FileNotFoundError, NotADirectoryError):  # not there (a file where a directory of its path would be)
        pass


def check_writable_dir(path: str) -> None:
    """ValueError unless files can be created under the directory `path` (checked by a real write).

    Locally the probe goes to the nearest existing ancestor (permission bits alone mislead, e.g. for
    root), and a file there (`path` itself or a parent) is refused; on gs:// a probe object is written
    and deleted. Other remote schemes fail when written.
    """
    if gcs.is_gcs(path):
        gcs.check_writable(path, f".tfrecorder-write-check-{os.urandom(4).hex()}")
    elif not is_remote(path):
        ancestor = path
        while not os.path.exists(ancestor):
            ancestor = os.path.dirname(ancestor)
        if not os.path.isdir(ancestor):
            raise ValueError(f"output_dir {path} cannot be a directory: {ancestor} is a file")
        try:
            handle, probe = tempfile.mkstemp(prefix=".tfrecorder-write-check-", dir=ancestor)
            os.close(handle)
            os.remove(probe)
        except OSError as exc:
            raise ValueError(f"output_dir {path} is not writable: {exc.strerror}") from None
