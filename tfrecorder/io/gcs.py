"""Google Cloud Storage access for tfrecorder.io.storage: credentials, retries, error translation.

One google-cloud-storage client per process (per emulator host), shared by the driver and every
pipeline worker thread:
- STORAGE_EMULATOR_HOST set → anonymous credentials, no credential lookup at all. (Beam's own GCS
  filesystem first retries Application Default Credentials for ~30 s when there are none, which
  is why project-owned GCS I/O does not go through it.)
- otherwise → Application Default Credentials, as every Google client does.
Credentials are never logged or put into messages.

Transient failures (HTTP 408/429/5xx, connection resets, timeouts) are retried with exponential
backoff for at most RETRY_TIMEOUT_SECONDS; what remains is raised as the OS exception a local file
would raise (FileNotFoundError, PermissionError, OSError), naming the gs:// URL.
"""
from __future__ import annotations

import contextlib
import errno
import io
import os
import threading
from typing import BinaryIO, Iterator, Optional

import requests
from google.api_core import exceptions as api_exceptions
from google.auth import exceptions as auth_exceptions
from google.cloud import storage as gcs_storage
from google.cloud.storage.exceptions import DataCorruption, InvalidResponse
from google.cloud.storage.fileio import BlobReader, BlobWriter
from google.cloud.storage.retry import DEFAULT_RETRY

EMULATOR_HOST_ENV = "STORAGE_EMULATOR_HOST"
SCHEME = "gs://"
RETRY_TIMEOUT_SECONDS = 60.0
RETRY = DEFAULT_RETRY.with_delay(initial=0.1, maximum=5.0, multiplier=2.0).with_timeout(RETRY_TIMEOUT_SECONDS)
HTTP_POOL_SIZE = 128  # idle connections kept per host: at least the largest fetch_concurrency
STREAM_CHUNK_BYTES = 8 * 1024 * 1024  # buffered per open reader/writer
_SCOPES = ("https://www.googleapis.com/auth/devstorage.read_write",)

_clients: dict[Optional[str], gcs_storage.Client] = {}
_clients_lock = threading.Lock()


def is_gcs(path: str) -> bool:
    return path.startswith(SCHEME)


def split_url(url: str) -> tuple[str, str]:
    """gs://bucket/some/name → ("bucket", "some/name")."""
    bucket, _, name = url[len(SCHEME):].partition("/")
    if not bucket:
        raise ValueError(f"{url!r} is not a gs://BUCKET/... URL")
    return bucket, name


def client() -> gcs_storage.Client:
    """This process's client for the current STORAGE_EMULATOR_HOST (created on first use)."""
    emulator_host = os.environ.get(EMULATOR_HOST_ENV) or None
    with _clients_lock:
        found = _clients.get(emulator_host)
        if found is None:
            found = _clients[emulator_host] = _make_client(emulator_host)
        return found


def _make_client(emulator_host: Optional[str]) -> gcs_storage.Client:
    if emulator_host:
        from google.auth.credentials import AnonymousCredentials

        credentials, project, session = AnonymousCredentials(), "tfrecorder-emulator", requests.Session()
    else:
        import google.auth
        from google.auth.transport.requests import AuthorizedSession

        credentials, project = google.auth.default(scopes=_SCOPES)
        session = AuthorizedSession(credentials)
    adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=HTTP_POOL_SIZE)
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return gcs_storage.Client(project=project, credentials=credentials, _http=session)


@contextlib.contextmanager
def os_errors(url: str) -> Iterator[None]:
    """Raise GCS failures as FileNotFoundError (404), PermissionError (401/403) or OSError (EINVAL for
    400, EIO for the others)."""
    try:
        yield
    except api_exceptions.NotFound:
        raise FileNotFoundError(errno.ENOENT, "no such object", url) from None
    except (api_exceptions.Forbidden, api_exceptions.Unauthorized):
        raise PermissionError(errno.EACCES, "permission denied", url) from None
    except api_exceptions.BadRequest as exc:  # e.g. an object name GCS does not accept
        raise OSError(errno.EINVAL, _describe(exc), url) from None
    except api_exceptions.RetryError as exc:
        raise OSError(errno.EIO, f"gave up retrying: {_describe(exc.cause or exc)}", url) from None
    except (api_exceptions.GoogleAPIError, auth_exceptions.TransportError, InvalidResponse, DataCorruption,
            requests.RequestException, ConnectionError) as exc:
        raise OSError(errno.EIO, _describe(exc), url) from None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, api_exceptions.GoogleAPICallError) and exc.code:
        return f"HTTP {int(exc.code)} {type(exc).__name__}"
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(exc, InvalidResponse) and status:  # downloads report HTTP errors this way
        return f"HTTP {int(status)} {type(api_exceptions.from_http_status(int(status), '')).__name__}"
    return type(exc).__name__


class _Reader(BlobReader):
    """BlobReader whose failures are OS errors naming the URL."""

    def __init__(self, blob: gcs_storage.Blob, url: str) -> None:
        super().__init__(blob, chunk_size=STREAM_CHUNK_BYTES, retry=RETRY)
        self.url = url

    def read(self, size: int = -1) -> bytes:
        with os_errors(self.url):
            return super().read(size)

    def seek(self, pos: int, whence: int = 0) -> int:
        with os_errors(self.url):
            return super().seek(pos, whence)


class _Writer(BlobWriter):
    """BlobWriter (a resumable upload) whose failures are OS errors naming the URL."""

    def __init__(self, blob: gcs_storage.Blob, url: str) -> None:
        super().__init__(blob, chunk_size=STREAM_CHUNK_BYTES, ignore_flush=True, retry=RETRY)
        self.url = url

    def write(self, data) -> int:
        with os_errors(self.url):
            return super().write(data)

    def close(self) -> None:
        with os_errors(self.url):
            super().close()


def _blob(url: str) -> gcs_storage.Blob:
    bucket, name = split_url(url)
    return client().bucket(bucket).blob(name)


class _Enough(Exception):
    """Raised by _Prefix once it holds its limit: stops the download (not an error of the read)."""


class _Prefix(io.BytesIO):
    """A download's destination that keeps its first `limit` bytes and then stops the download."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def write(self, data) -> int:
        room = self.limit - self.tell()
        if len(data) < room:
            return super().write(data)
        super().write(bytes(data[:room]))
        raise _Enough


def read_bytes(url: str, limit: Optional[int] = None) -> bytes:
    """The object's bytes; with `limit`, only its first `limit` bytes when it is larger (the rest is not
    downloaded: the one GET is cut off, no request is added)."""
    if limit is None:
        with os_errors(url):
            return _blob(url).download_as_bytes(retry=RETRY)
    prefix = _Prefix(limit)
    try:
        with os_errors(url):
            _blob(url).download_to_file(prefix, retry=RETRY)
    except _Enough:
        pass
    return prefix.getvalue()


def read_range(url: str, start: int, length: int) -> bytes:
    """`length` bytes of an object from byte `start` (one ranged GET, retried like every other call);
    fewer at its end (`start` must be inside it)."""
    if length <= 0:
        return b""
    with os_errors(url):
        return _blob(url).download_as_bytes(start=start, end=start + length - 1, retry=RETRY)


def _existing_blob(url: str) -> gcs_storage.Blob:
    """The object's blob with its metadata loaded; FileNotFoundError when there is none."""
    bucket, name = split_url(url)
    with os_errors(url):
        blob = client().bucket(bucket).get_blob(name, retry=RETRY)
        if blob is None:
            raise api_exceptions.NotFound(url)
        return blob


def open_read(url: str) -> BinaryIO:
    """A seekable reader; a missing object raises FileNotFoundError here, not on first read."""
    return _Reader(_existing_blob(url), url)


def open_write(url: str) -> BinaryIO:
    """A streaming writer; the object appears when the writer is closed."""
    return _Writer(_blob(url), url)


def exists(url: str) -> bool:
    if not split_url(url)[1]:
        return False  # a bucket root is a "directory", not an object
    with os_errors(url):
        return _blob(url).exists(retry=RETRY)


def size(url: str) -> int:
    return int(_existing_blob(url).size)


def generation(url: str) -> tuple[int, int]:
    """(generation, size) of an existing object: a new generation for every overwrite."""
    blob = _existing_blob(url)
    return int(blob.generation), int(blob.size)


def create_exclusive(url: str, data: bytes) -> bool:
    """Create the object holding `data` only if it does not exist (a generation precondition of 0):
    True if this call created it, False if it was there already."""
    with os_errors(url):
        try:
            _blob(url).upload_from_string(data, if_generation_match=0, retry=RETRY)
        except api_exceptions.PreconditionFailed:
            return False
    return True


def list_files(prefix_url: str) -> list[str]:
    """Every object under the "directory" prefix_url, sorted (folder placeholder objects excluded)."""
    bucket, name = split_url(prefix_url.rstrip("/") + "/")
    with os_errors(prefix_url):
        blobs = client().list_blobs(bucket, prefix=name, retry=RETRY)
        return sorted(f"{SCHEME}{bucket}/{b.name}" for b in blobs if not b.name.endswith("/"))


def list_dirs(prefix_url: str) -> list[str]:
    """The "directories" directly under prefix_url (one listing with a delimiter: not every object below)."""
    bucket, name = split_url(prefix_url.rstrip("/") + "/")
    with os_errors(prefix_url):
        blobs = client().list_blobs(bucket, prefix=name, delimiter="/", retry=RETRY)
        for _page in blobs.pages:  # prefixes are collected page by page
            pass
        return sorted(f"{SCHEME}{bucket}/{prefix.rstrip('/')}" for prefix in blobs.prefixes)


def holds_objects(prefix_url: str) -> bool:
    """Whether the "directory" prefix_url holds any object (one listing call for at most a page: not
    the whole folder)."""
    bucket, name = split_url(prefix_url.rstrip("/") + "/")
    with os_errors(prefix_url):
        blobs = client().list_blobs(bucket, prefix=name, max_results=2, retry=RETRY)
        return any(not b.name.endswith("/") for b in blobs)


def copy(source_url: str, destination_url: str) -> None:
    """Server-side copy (rewrite: one request unless the object is large or changes location)."""
    source = _blob(source_url)
    destination = _blob(destination_url)
    with os_errors(source_url):
        token, _, _ = destination.rewrite(source, retry=RETRY)
        while token is not None:
            token, _, _ = destination.rewrite(source, token=token, retry=RETRY)


def delete(urls: list[str]) -> None:
    """Delete objects; already missing ones are fine."""
    for url in urls:
        with contextlib.suppress(FileNotFoundError), os_errors(url):
            _blob(url).delete(retry=RETRY)


def check_writable(directory_url: str, probe_name: str) -> None:
    """Write and delete a small probe object; ValueError if the bucket is missing or not writable."""
    bucket, _ = split_url(directory_url)
    probe = directory_url.rstrip("/") + "/" + probe_name
    try:
        with os_errors(probe):
            _blob(probe).upload_from_string(b"", retry=RETRY)
        delete([probe])
    except FileNotFoundError:
        raise ValueError(f"output_dir {directory_url}: bucket {bucket!r} does not exist") from None
    except PermissionError:
        raise ValueError(f"output_dir {directory_url} is not writable (permission denied)") from None
    except OSError as exc:
        raise ValueError(f"output_dir {directory_url} cannot be written: {exc.strerror}") from None
