"""serve bounds open connections and long-lived requests; over a cap: 503 problem + Retry-After.

Measured on a real ``serve`` (PN_HTTP_MAX_CONNECTIONS=4, PN_HTTP_MAX_STREAMS=2):
the third SSE stream (or long-poll) is refused while short requests still pass,
then a fifth open connection is refused; once the clients close, requests and
streams are served again. uvicorn's own limit_concurrency would answer a plain
text 503; ours is the API's problem document.
"""

from __future__ import annotations

import json
import resource
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from partition_notify.core.errors import ConfigurationError
from partition_notify.settings import load_settings
from tests.http.support import HttpServe, capped_serve
from tests.support.net import wait_until

MAX_CONNECTIONS, MAX_STREAMS = 4, 2
TABLE = "capdb.orders"


@pytest.fixture
def capped(tmp_path: Path) -> Iterator[HttpServe]:
    yield from capped_serve(tmp_path, TABLE, MAX_CONNECTIONS, MAX_STREAMS)


def assert_refused(r: httpx.Response, slug: str) -> None:
    assert r.status_code == 503, (r.status_code, r.headers.get("content-type"))
    assert r.headers["content-type"] == "application/problem+json"
    assert int(r.headers["retry-after"]) >= 1
    body = json.loads(r.read())
    assert body["type"] == f"urn:partition-notify:problem:{slug}", body
    assert body["status"] == 503 and body["detail"], body


def open_stream(stack: ExitStack, base: str) -> httpx.Response:
    client = stack.enter_context(httpx.Client(base_url=base, timeout=30))
    return stack.enter_context(client.stream("GET", f"/v1/tables/{TABLE}/stream"))


def idle_connection(stack: ExitStack, port: int) -> socket.socket:
    """A connection that made one request and stays open (keep-alive)."""
    s = stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=30))
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += s.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    return s


def test_over_the_caps_requests_get_a_503_problem_then_succeed_once_freed(
        capped: HttpServe) -> None:
    base = capped.base
    with ExitStack() as stack:
        probe = stack.enter_context(httpx.Client(base_url=base, timeout=30))  # connection 1
        streams = [open_stream(stack, base) for _ in range(MAX_STREAMS)]  # connections 2, 3
        assert [r.status_code for r in streams] == [200] * MAX_STREAMS
        with httpx.Client(base_url=base, timeout=30) as extra:  # connection 4
            with extra.stream("GET", f"/v1/tables/{TABLE}/stream") as r:
                assert_refused(r, "too-many-streams")
            assert_refused(extra.get(f"/v1/tables/{TABLE}/wait",
                                     params={"spec": "datestamp=1", "timeout": 1}),
                           "too-many-streams")
        # Streams at their cap do not starve short requests.
        assert probe.get(f"/v1/tables/{TABLE}/set-done").status_code == 200
        idle_connection(stack, capped.port)  # connection 4 of 4
        assert probe.get("/readyz").status_code == 200
        with httpx.Client(base_url=base, timeout=30) as fifth:
            r = fifth.get("/readyz")
            assert_refused(r, "too-many-connections")
            assert r.headers["connection"] == "close"
    # All closed: serve sees the connections go (asynchronously), then serves again.
    wait_until(lambda: httpx.get(base + "/readyz", timeout=5).status_code == 200, 15,
               "serve to answer once the clients closed", 0.05)
    with ExitStack() as stack:
        streams = [open_stream(stack, base) for _ in range(MAX_STREAMS)]
        assert [r.status_code for r in streams] == [200] * MAX_STREAMS


def test_stream_cap_must_leave_room_for_other_requests() -> None:
    with pytest.raises(ConfigurationError) as err:
        load_settings(http_max_connections=8, http_max_streams=8)
    assert "http_max_streams=8: " in str(err.value)
    assert "less than PN_HTTP_MAX_CONNECTIONS (8)" in str(err.value)
    with pytest.raises(ConfigurationError, match="http_max_connections=1: "):
        load_settings(http_max_connections=1)


def test_stream_cap_defaults_to_three_quarters_of_the_connection_cap() -> None:
    assert load_settings().stream_cap == 768
    assert load_settings(http_max_connections=4).stream_cap == 3
    assert load_settings(http_max_connections=2).stream_cap == 1
    assert load_settings(http_max_connections=100, http_max_streams=10).stream_cap == 10


FIT = """
import resource
from partition_notify.http.server import fit_descriptor_limit
resource.setrlimit(resource.RLIMIT_NOFILE, (300, {hard}))
print(fit_descriptor_limit(1024), resource.getrlimit(resource.RLIMIT_NOFILE)[0])
resource.setrlimit(resource.RLIMIT_NOFILE, (300, 600))
print(fit_descriptor_limit(1024), resource.getrlimit(resource.RLIMIT_NOFILE)[0])
"""


def test_serve_raises_the_open_files_limit_to_hold_its_connection_cap() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 2000:
        pytest.skip(f"hard open-files limit {hard} < 2000")
    # In a child: limits lowered here could not be raised again.
    run = subprocess.run([sys.executable, "-c", FIT.format(hard=2000)], capture_output=True,
                         text=True, timeout=60, check=True)
    assert run.stdout.split("\n")[:2] == ["1280 1280", "600 600"], run.stdout
    assert "is below PN_HTTP_MAX_CONNECTIONS=1024" in run.stderr, run.stderr
    assert run.stderr.count("open-files limit") == 1, run.stderr  # the raised one is silent
