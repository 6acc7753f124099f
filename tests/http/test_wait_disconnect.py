"""A long-poll whose client leaves frees its stream slot and its waiter at once.

Before, three clients of ``curl -m 1`` against PN_HTTP_MAX_CONNECTIONS=4 (stream
cap 3) held every stream slot for their whole ``timeout=300``: later waits and
SSE streams got 503 too-many-streams for 5 minutes with no connection open.
Measured on a real ``serve``: raw sockets start long-polls, then close.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from tests.http.support import HttpServe, capped_serve
from tests.support.net import wait_until

MAX_CONNECTIONS, MAX_STREAMS = 4, 3
TABLE = "waitdb.orders"
WAIT = f"/v1/tables/{TABLE}/wait?spec=datestamp%3D1&timeout=300"
#: "Promptly": the slot must be free well before the long-polls' 300 s.
FREED_WITHIN_SECONDS = 3.0


@pytest.fixture
def capped(tmp_path: Path) -> Iterator[HttpServe]:
    yield from capped_serve(tmp_path, TABLE, MAX_CONNECTIONS, MAX_STREAMS)


def waits(serve: HttpServe) -> float:
    text = httpx.get(serve.base + "/metrics", timeout=10).text
    found = re.search(r"^pn_http_waits (\S+)$", text, re.M)
    assert found, text[:500]
    return float(found.group(1))


def served_a_long_poll(serve: HttpServe) -> bool:
    r = httpx.get(f"{serve.base}/v1/tables/{TABLE}/wait",
                  params={"spec": "datestamp=1", "timeout": 0}, timeout=10)
    assert r.status_code in (204, 503), (r.status_code, r.text)
    return r.status_code == 204


def test_a_long_poll_whose_client_leaves_frees_its_slot_and_waiter(capped: HttpServe) -> None:
    with ExitStack() as stack:
        for _ in range(MAX_STREAMS):
            s = stack.enter_context(socket.create_connection(("127.0.0.1", capped.port), 10))
            s.sendall(f"GET {WAIT} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        wait_until(lambda: waits(capped) == MAX_STREAMS, 10, "the long-polls to be waiting")
        assert not served_a_long_poll(capped)  # every stream slot is taken
    # The clients closed their sockets: the slots and waiters must go with them.
    wait_until(lambda: served_a_long_poll(capped), FREED_WITHIN_SECONDS,
               "a new long-poll to be served once the clients left")
    wait_until(lambda: waits(capped) == 0, FREED_WITHIN_SECONDS, "pn_http_waits to be 0")
