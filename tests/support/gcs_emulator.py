"""A real GCS emulator (gcp-storage-emulator from PyPI) on a free loopback port, for tests.

`start_emulator()` returns a running `Emulator`; it sets STORAGE_EMULATOR_HOST so google-cloud-storage
and Beam's GCS filesystem talk to it. Only 127.0.0.1 is ever contacted.
Run as a script (`python tests/support/gcs_emulator.py`) it prints its URL and serves until stdin closes.
"""
from __future__ import annotations

import dataclasses
import os
import socket

from google.auth.credentials import AnonymousCredentials
from google.cloud import storage


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclasses.dataclass
class Emulator:
    server: object
    host: str  # http://127.0.0.1:PORT
    client: storage.Client

    def bucket(self, name: str) -> storage.Bucket:
        """The bucket `name`, created if needed (names of 3+ characters, like real ones)."""
        bucket = self.client.bucket(name)
        if not bucket.exists():
            bucket = self.client.create_bucket(name)
        return bucket

    def upload(self, url: str, data: bytes) -> None:
        bucket, _, path = url[len("gs://"):].partition("/")
        self.bucket(bucket).blob(path).upload_from_string(data)

    def download(self, url: str) -> bytes:
        bucket, _, path = url[len("gs://"):].partition("/")
        return self.client.bucket(bucket).blob(path).download_as_bytes()

    def list(self, url_prefix: str) -> list[str]:
        bucket, _, prefix = url_prefix[len("gs://"):].partition("/")
        return sorted(f"gs://{bucket}/{b.name}" for b in self.client.list_blobs(bucket, prefix=prefix))

    def stop(self) -> None:
        self.server.stop()


def start_emulator() -> Emulator:
    from gcp_storage_emulator.server import create_server

    port = free_port()
    server = create_server("127.0.0.1", port, in_memory=True)
    server.start()
    # The emulator answers one request at a time from a listen backlog of 5: concurrent clients beyond
    # that see dropped connection attempts, retried by the kernel only after a second. Listening again
    # just raises the backlog.
    server._api._httpd.socket.listen(128)
    host = f"http://127.0.0.1:{port}"
    os.environ["STORAGE_EMULATOR_HOST"] = host
    client = storage.Client(project="tfrecorder-test", credentials=AnonymousCredentials())
    return Emulator(server, host, client)


if __name__ == "__main__":
    import sys

    emulator = start_emulator()
    print(emulator.host, flush=True)
    sys.stdin.read()
    emulator.stop()
