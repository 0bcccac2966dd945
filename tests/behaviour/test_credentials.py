"""Credentials and tokens never reach logs, results, metadata or discard files.

Real Application Default Credentials path: a service-account key generated here, whose token_uri is
a loopback token server handing out a canary access token; Cloud Storage calls go to the emulator
through API_ENDPOINT_OVERRIDE (not STORAGE_EMULATOR_HOST, which would switch to anonymous access).
"""
from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from support import imagegen

CANARY_TOKEN = "ya29.CANARY-token-that-must-never-be-printed"
BUCKET = "tfrecorder-credential-test"


class TokenServer(http.server.BaseHTTPRequestHandler):
    requests = 0

    def do_POST(self):  # noqa: N802 - http.server's naming
        type(self).requests += 1
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps({"access_token": CANARY_TOKEN, "expires_in": 3600, "token_type": "Bearer"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def token_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), TokenServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/token"
    server.shutdown()


def service_account_file(directory: Path, token_uri: str) -> tuple[Path, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    path = directory / "service-account.json"
    path.write_text(json.dumps({
        "type": "service_account", "project_id": "tfrecorder-test", "private_key_id": "canary-key-id",
        "private_key": pem, "client_email": "converter@tfrecorder-test.iam.gserviceaccount.com",
        "client_id": "1234567890", "token_uri": token_uri,
    }))
    return path, pem


def test_credentials_stay_out_of_everything_a_user_can_see(gcs, token_server, tmp_path):
    gcs.bucket(BUCKET)
    gcs.upload(f"gs://{BUCKET}/images/a.jpg", imagegen.odd_images()["rgb.jpg"][0])
    gcs.upload(f"gs://{BUCKET}/data.csv",
               b"split,image_uri,label\nTRAIN,images/a.jpg,cat\nTRAIN,images/missing.jpg,dog\n")
    key_file, private_key = service_account_file(tmp_path, token_server)
    script = (
        "import logging, sys, tfrecorder\n"
        "logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)\n"
        f"result = tfrecorder.convert('gs://{BUCKET}/data.csv', 'gs://{BUCKET}/out', verbose=True, progress=False)\n"
        "print(repr(result)); print(result._repr_html_()); print(dict(result))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "STORAGE_EMULATOR_HOST"}
    env.update(GOOGLE_APPLICATION_CREDENTIALS=str(key_file), API_ENDPOINT_OVERRIDE=gcs.host,
               TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=os.getcwd())
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert TokenServer.requests >= 1  # the credentials really were used
    assert "discarded: 1" in done.stdout
    written = {url: gcs.download(url) for url in gcs.list(f"gs://{BUCKET}/out/")}
    assert any(url.endswith("discarded.csv") for url in written)
    secrets = [CANARY_TOKEN, CANARY_TOKEN.split(".", 1)[1], private_key.splitlines()[1], "canary-key-id"]
    for secret in secrets:
        assert secret not in done.stdout and secret not in done.stderr
        for url, data in written.items():
            assert secret.encode() not in data, url
