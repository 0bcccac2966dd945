"""A small HTTP proxy on 127.0.0.1 in front of the GCS emulator: adds latency and injects faults.

Clients reach it by pointing STORAGE_EMULATOR_HOST at `proxy.url`. Every request is forwarded to
the emulator unchanged (Host header included, so resumable-upload URLs still point at the proxy),
after `delay_seconds`. `fail(fragment, status, times)` makes the next `times` requests whose decoded
path contains `fragment` answer `status` instead (status None: close the connection without an
answer, like a reset). Used by tests (retries, 403) and by benchmarks/gcs_fetch_bench.py (latency).

`preconditions=True` makes it honour `ifGenerationMatch=0` on uploads (create only if absent: 412
otherwise), which the emulator ignores: tests of exclusive creation (issue 27's part manifests and
locks) run against it.

Run as a script to serve a delaying proxy from a separate process:
`python tests/support/gcs_proxy.py --upstream http://127.0.0.1:PORT --delay-ms 20` prints the proxy URL and
serves until stdin closes.
"""
from __future__ import annotations

import argparse
import collections
import http.client
import json
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade", "content-length"}


class FaultProxy:
    def __init__(self, upstream: str, delay_seconds: float = 0.0, preconditions: bool = False) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        self.preconditions = preconditions
        self._creating = threading.Lock()  # one conditional create at a time: check and write are one step
        self.upstream = (parsed.hostname, parsed.port)
        self.delay_seconds = delay_seconds
        self._faults: list[list] = []  # [fragment, status, remaining]
        self._lock = threading.Lock()
        self.requests: collections.Counter = collections.Counter()  # decoded path → count
        self._spans: list[tuple[str, float, float]] = []  # (decoded path, start, end) of answered requests
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.proxy = self
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> "FaultProxy":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def fail(self, fragment: str, status: Optional[int], times: int) -> None:
        with self._lock:
            self._faults.append([fragment, status, times])

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()
            self.requests.clear()
            self._spans.clear()

    def count(self, fragment: str) -> int:
        """How many requests so far had `fragment` in their decoded path."""
        with self._lock:
            return sum(n for path, n in self.requests.items() if fragment in path)

    def answered(self, fragment: str) -> list[tuple[str, float, float]]:
        """(decoded path, start, end) of the forwarded requests with `fragment` in their path, by start."""
        with self._lock:
            return sorted((s for s in self._spans if fragment in s[0]), key=lambda s: s[1])

    def peak_in_flight(self, fragment: str) -> int:
        """The most requests with `fragment` in their path that were being served at the same time."""
        with self._lock:
            events = sorted(e for path, start, end in self._spans if fragment in path for e in ((start, 1), (end, -1)))
        peak = current = 0
        for _time, step in events:
            current += step
            peak = max(peak, current)
        return peak

    def _record(self, path: str, start: float) -> None:
        with self._lock:
            self._spans.append((path, start, time.monotonic()))

    def _fault_for(self, path: str) -> tuple[bool, Optional[int]]:
        with self._lock:
            self.requests[path] += 1
            for fault in self._faults:
                if fault[0] in path and fault[2] > 0:
                    fault[2] -= 1
                    return True, fault[1]
        return False, None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # many clients connect at once; the default backlog of 5 would drop SYNs

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # clients hanging up are normal
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes

    def log_message(self, format, *args) -> None:  # quiet
        pass

    def _forward(self) -> None:
        proxy: FaultProxy = self.server.proxy
        started = time.monotonic()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        if proxy.delay_seconds:
            time.sleep(proxy.delay_seconds)
        path = urllib.parse.unquote(self.path)
        injected, status = proxy._fault_for(path)
        if injected and status is None:
            self.close_connection = True  # drop the connection without an answer
            return
        if injected:
            payload = json.dumps({"error": {"code": status, "message": "injected by FaultProxy"}}).encode()
            self._answer(status, [("Content-Type", "application/json")], payload)
            return
        if proxy.preconditions and self.command == "POST" and "ifGenerationMatch=0" in self.path:
            with proxy._creating:
                if _object_exists(proxy.upstream, self.path, body):
                    payload = json.dumps({"error": {"code": 412, "message": "conditionNotMet"}}).encode()
                    self._answer(412, [("Content-Type", "application/json")], payload)
                    proxy._record(path, started)
                    return
                self._send_upstream(proxy, path, body, started)
            return
        self._send_upstream(proxy, path, body, started)

    def _send_upstream(self, proxy: "FaultProxy", path: str, body: Optional[bytes], started: float) -> None:
        upstream = http.client.HTTPConnection(*proxy.upstream, timeout=60)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            payload = response.read()
            self._answer(response.status, [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP], payload)
        finally:
            upstream.close()
            proxy._record(path, started)

    def _answer(self, status: int, headers: list[tuple[str, str]], payload: bytes) -> None:
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _forward


def _object_exists(upstream: tuple, path: str, body: Optional[bytes]) -> bool:
    """Whether the object an upload request names exists (its name in the query or the multipart metadata)."""
    parsed = urllib.parse.urlsplit(path)
    bucket = parsed.path.split("/b/", 1)[1].split("/", 1)[0]
    name = urllib.parse.parse_qs(parsed.query).get("name", [None])[0]
    if name is None and body:
        start = body.find(b"{")
        metadata, _ = json.JSONDecoder().raw_decode(body[start:].decode("utf-8", "replace"))
        name = metadata.get("name")
    connection = http.client.HTTPConnection(*upstream, timeout=60)
    try:
        connection.request("GET", f"/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}")
        response = connection.getresponse()
        response.read()
        return response.status == 200
    finally:
        connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="the emulator's URL")
    parser.add_argument("--delay-ms", type=float, default=20.0)
    args = parser.parse_args()
    proxy = FaultProxy(args.upstream, args.delay_ms / 1000).start()
    print(proxy.url, flush=True)
    sys.stdin.read()  # serve until the parent closes our stdin
    proxy.stop()


if __name__ == "__main__":
    main()
