"""tfrecorder.io.gcs against a real GCS emulator on loopback; GCS failures raised as OS errors naming the URL."""
from __future__ import annotations

import errno
import gzip
import json
import os

import pytest
from google.api_core import exceptions as api_exceptions

import tfrecorder.io.gcs as gcs_io
from tfrecorder.format.metadata_file import JobMetadata
from tfrecorder.io import storage

BUCKET = "tfr-gcs-unit"


def test_urls_split_into_bucket_and_name():
    assert gcs_io.is_gcs("gs://b/x") and not gcs_io.is_gcs("/b/x") and not gcs_io.is_gcs("s3://b/x")
    assert gcs_io.split_url("gs://bucket/some/name.jpg") == ("bucket", "some/name.jpg")
    assert gcs_io.split_url("gs://bucket") == ("bucket", "")
    with pytest.raises(ValueError, match=r"is not a gs://BUCKET/\.\.\. URL"):
        gcs_io.split_url("gs:///name")


def test_one_client_per_process_and_emulator_host(gcs, monkeypatch):
    first = gcs_io.client()
    assert gcs_io.client() is first
    monkeypatch.setenv(gcs_io.EMULATOR_HOST_ENV, "http://127.0.0.1:9")  # another emulator: its own client
    other = gcs_io.client()
    assert other is not first and other is gcs_io.client()
    monkeypatch.undo()
    assert gcs_io.client() is first


def test_objects_read_whole_in_ranges_and_streamed(gcs):
    url = f"gs://{BUCKET}/read/data.bin"
    payload = os.urandom(3000)
    gcs.upload(url, payload)
    assert gcs_io.read_bytes(url) == payload and gcs_io.size(url) == 3000
    assert gcs_io.read_range(url, 100, 50) == payload[100:150]
    assert gcs_io.read_range(url, 2990, 50) == payload[2990:]  # fewer at the end
    assert gcs_io.read_range(url, 10, 0) == b""
    with gcs_io.open_read(url) as stream:
        assert stream.read(10) == payload[:10]
        stream.seek(-5, os.SEEK_END)
        assert stream.read() == payload[-5:]
    with gcs_io.open_write(f"gs://{BUCKET}/read/written.bin") as stream:
        stream.write(b"first ")
        assert not gcs_io.exists(f"gs://{BUCKET}/read/written.bin")  # appears when closed
        stream.write(b"second")
    assert gcs.download(f"gs://{BUCKET}/read/written.bin") == b"first second"


def test_missing_objects_are_file_not_found_naming_the_url(gcs):
    gcs.bucket(BUCKET)
    missing = f"gs://{BUCKET}/missing/a.jpg"
    for call in (gcs_io.read_bytes, gcs_io.open_read, gcs_io.size, lambda url: gcs_io.read_range(url, 0, 1)):
        with pytest.raises(FileNotFoundError) as raised:
            call(missing)
        assert raised.value.filename == missing
    assert not gcs_io.exists(missing) and not gcs_io.exists(f"gs://{BUCKET}")  # a bucket root is no object


def test_listing_copy_and_delete(gcs):
    for name in ("list/b.txt", "list/a/c.txt", "list/folder/", "listed-not/d.txt"):
        gcs.upload(f"gs://{BUCKET}/{name}", name.encode())
    assert gcs_io.list_files(f"gs://{BUCKET}/list") == gcs_io.list_files(f"gs://{BUCKET}/list/") == [
        f"gs://{BUCKET}/list/a/c.txt", f"gs://{BUCKET}/list/b.txt"]  # sorted, placeholders and siblings left out
    gcs_io.copy(f"gs://{BUCKET}/list/b.txt", f"gs://{BUCKET}/copied/b.txt")
    assert gcs.download(f"gs://{BUCKET}/copied/b.txt") == b"list/b.txt"
    gcs_io.delete([f"gs://{BUCKET}/copied/b.txt", f"gs://{BUCKET}/copied/never-there.txt"])  # missing is fine
    assert gcs.list(f"gs://{BUCKET}/copied/") == []
    with pytest.raises(FileNotFoundError):
        gcs_io.copy(f"gs://{BUCKET}/list/absent.txt", f"gs://{BUCKET}/copied/x.txt")


def test_check_writable_leaves_no_probe_and_names_a_missing_bucket(gcs):
    gcs.bucket(BUCKET)
    gcs_io.check_writable(f"gs://{BUCKET}/out", ".probe")
    assert gcs.list(f"gs://{BUCKET}/out/") == []
    with pytest.raises(ValueError, match="output_dir gs://no-such-gcs-bucket/out: bucket 'no-such-gcs-bucket' does not exist"):
        gcs_io.check_writable("gs://no-such-gcs-bucket/out", ".probe")


def test_storage_reads_gzip_metadata_and_listings_on_gs(gcs):
    gcs.bucket("tfr-store")
    job = "gs://tfr-store/job-1"
    payload = os.urandom(100_000)
    with storage.open_write(f"{job}/data.bin.gz") as raw, gzip.GzipFile(fileobj=raw, mode="wb") as out:
        out.write(payload)
    with storage.open_read(f"{job}/data.bin.gz") as raw, gzip.GzipFile(fileobj=raw) as stream:
        assert stream.read() == payload
    with pytest.raises(ValueError, match="not a finished"):
        JobMetadata.read(job)
    JobMetadata({"rows_in": 3}).write(job)
    assert JobMetadata.read(job).document == {"rows_in": 3}
    assert storage.list_files(job) == [f"{job}/data.bin.gz", f"{job}/metadata.json"]
    assert storage.is_dir(job) and storage.is_dir(job + "/") and not storage.is_dir(f"{job}/metadata.json")
    assert storage.size(f"{job}/metadata.json") == len(json.dumps({"rows_in": 3}, indent=2))
    with pytest.raises(FileNotFoundError):
        storage.read_bytes(f"{job}/absent")
    with pytest.raises(FileNotFoundError):
        storage.open_read(f"{job}/absent")


@pytest.mark.parametrize("error, expected_type, message", [
    (api_exceptions.NotFound("x"), FileNotFoundError, "no such object"),
    (api_exceptions.Forbidden("x"), PermissionError, "permission denied"),
    (api_exceptions.Unauthorized("x"), PermissionError, "permission denied"),
    (api_exceptions.RetryError("Timeout of 60.0s exceeded", api_exceptions.ServiceUnavailable("x")), OSError,
     "gave up retrying: HTTP 503 ServiceUnavailable"),
    (api_exceptions.BadRequest("x"), OSError, "HTTP 400 BadRequest"),
    (ConnectionResetError(), OSError, "ConnectionResetError"),
])
def test_gcs_failures_become_os_errors_naming_the_url(error, expected_type, message):
    with pytest.raises(expected_type) as raised:
        with gcs_io.os_errors("gs://bucket/a.jpg"):
            raise error
    assert (type(raised.value), raised.value.strerror, raised.value.filename) == (expected_type, message, "gs://bucket/a.jpg")
    io_errno = errno.EINVAL if isinstance(error, api_exceptions.BadRequest) else errno.EIO  # a bad name is the row's
    assert raised.value.errno == {FileNotFoundError: errno.ENOENT, PermissionError: errno.EACCES}.get(expected_type, io_errno)


def test_exclusive_creation_is_a_generation_precondition_and_identity_a_generation(gcs, monkeypatch):
    from support.gcs_proxy import FaultProxy

    gcs.bucket("tfr-exclusive")
    proxy = FaultProxy(gcs.host, preconditions=True).start()  # the emulator ignores ifGenerationMatch
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.url)
    url = "gs://tfr-exclusive/job/_parts/k.json"
    assert storage.create_exclusive(url, b"first") is True
    assert storage.create_exclusive(url, b"second") is False  # if_generation_match=0: the first one stays
    assert gcs.download(url) == b"first"
    generation, size = storage.identity(url)
    assert size == 5 and generation > 0
    gcs.upload(url, b"changed")
    assert storage.identity(url) != (generation, size)
    proxy.stop()


def test_directories_are_listed_one_level_deep(gcs, tmp_path):
    gcs.bucket("tfr-dirs")
    for name in ("out/job-a/x.tfrecord", "out/job-a/index/x.index", "out/.incomplete-b/_parts/k.json", "out/file"):
        gcs.upload(f"gs://tfr-dirs/{name}", b"1")
    assert storage.list_dirs("gs://tfr-dirs/out") == ["gs://tfr-dirs/out/.incomplete-b", "gs://tfr-dirs/out/job-a"]
    (tmp_path / "a").mkdir()
    (tmp_path / "f").write_text("")
    assert storage.list_dirs(str(tmp_path)) == [str(tmp_path / "a")]
    assert storage.list_dirs(str(tmp_path / "missing")) == []


def test_a_prefix_holds_objects_without_listing_it_all(gcs):
    for name in ("held/folder/", "held/folder/a.txt", "held/placeholder-only/"):
        gcs.upload(f"gs://{BUCKET}/{name}", b"x")
    assert gcs_io.holds_objects(f"gs://{BUCKET}/held/folder") and storage.holds_files(f"gs://{BUCKET}/held/folder/")
    assert not gcs_io.holds_objects(f"gs://{BUCKET}/held/placeholder-only")
    assert not storage.holds_files(f"gs://{BUCKET}/held/fold")  # a prefix of a name is no folder
