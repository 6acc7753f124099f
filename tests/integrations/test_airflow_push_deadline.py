"""The Airflow push client: one deadline per request and a cap on the answer's size.

Defect (audit 22): ``AirflowClient`` passed its timeout to ``urlopen``, which
applies it to each socket read, and read the answer with an unbounded
``resp.read()``. A server sending a byte at a time held a push (and the sink
thread) for as long as it kept sending; a huge answer was read into memory.
A real local HTTP server, started here, trickles bytes / sends 9 MiB.
"""

from __future__ import annotations

import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from partition_notify.integrations.airflow.push_client import (
    MAX_RESPONSE_BYTES,
    AirflowClient,
)

from partition_notify.core.errors import PushError

TRICKLE_SECONDS = 6.0
HUGE = MAX_RESPONSE_BYTES + (1 << 20)


class _Handler(BaseHTTPRequestHandler):
    stop: threading.Event

    def log_message(self, *args: object) -> None:  # keep the test output clean
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/auth/token":
            self._send(b'{"access_token": "t"}')
        elif self.path.startswith("/api/v2/assets/events"):
            self._trickle()

    def do_GET(self) -> None:
        if self.path.startswith("/api/v2/assets/events"):
            self._send(b'{"asset_events": [], "pad": "' + b"x" * HUGE + b'"}')

    def _send(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _trickle(self) -> None:
        """A valid answer, one byte every 0.1 s: each read gets a byte well in time."""
        body = b'{"id": 1, "pad": "' + b" " * 200 + b'"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        end = time.monotonic() + TRICKLE_SECONDS
        for byte in body:
            if time.monotonic() > end or self.stop.is_set():
                return
            try:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
            except OSError:
                return  # the client gave up
            self.stop.wait(0.1)


def _tls(server: ThreadingHTTPServer, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Serve TLS with a self-signed certificate the client is made to trust."""
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))


@pytest.fixture(params=["http", "https"])
def airflow(request: pytest.FixtureRequest, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    stop = threading.Event()
    handler = type("Handler", (_Handler,), {"stop": stop})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if request.param == "https":
        _tls(server, tmp_path, monkeypatch)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"{request.param}://127.0.0.1:{server.server_address[1]}"
    stop.set()
    server.shutdown()
    server.server_close()
    thread.join(10)


def test_a_trickling_server_cannot_hold_a_push_past_the_request_deadline(airflow: str) -> None:
    client = AirflowClient(airflow, "u", "p", 1.0)
    started = time.monotonic()
    with pytest.raises(PushError, match=r"within 1 s"):
        client.post_event(1, "ds=1", {})
    took = time.monotonic() - started
    assert took < 2.5, f"the push took {took:.1f} s with a 1 s timeout"


def test_an_answer_larger_than_the_cap_is_refused_not_read_into_memory(airflow: str) -> None:
    client = AirflowClient(airflow, "u", "p", 10.0)
    with pytest.raises(PushError, match=rf"more than {MAX_RESPONSE_BYTES} bytes"):
        client.sent_since(1, 0.0)
