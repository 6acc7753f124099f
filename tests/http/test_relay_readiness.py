"""A relay that cannot reach the broker shows on ``/readyz`` and fails
``/readyz/relay`` (issue 24). Real serve, a broker URL on a closed port."""

from __future__ import annotations

import tempfile
from pathlib import Path

import httpx
import pytest

from partition_notify import build_app
from partition_notify.core.errors import PublishError
from partition_notify.http.routes_ops import RELAY_FAILING_AFTER
from tests.http.support import HttpServe
from tests.support.net import free_port, wait_until


def test_relay_that_cannot_reach_the_broker_is_not_ready(sqlite_url: str) -> None:
    down = f"stomp://127.0.0.1:{free_port()}"  # nothing listens there
    serve = HttpServe(sqlite_url, Path(tempfile.mkdtemp(prefix="pn-relay-")) / "serve.log",
                      env_extra={"PN_TRANSPORT_URL": down, "PN_CONNECT_TIMEOUT_SECONDS": "1",
                                 "PN_RELAY_WRITER_GRACE_SECONDS": "0",
                                 "PN_RELAY_MAX_BACKOFF_SECONDS": "0.5"}).start()
    try:
        ok = httpx.get(serve.base + "/readyz/relay", timeout=5)
        assert ok.status_code == 200 and ok.json()["status"] == "ok", ok.text
        with build_app(store_url=sqlite_url, transport_url=down,
                       connect_timeout_seconds=1) as writer:
            writer.publisher.register_table("rdy", "t", ["ds"])
            with pytest.raises(PublishError):  # saved; the relay is to deliver it
                writer.publisher.send_mark_set_done("rdy", "t", "ds=1")

        def failing() -> bool:
            return httpx.get(serve.base + "/readyz/relay", timeout=5).status_code == 503

        wait_until(failing, 60, "the relay to count as failing")
        r = httpx.get(serve.base + "/readyz/relay", timeout=5)
        assert r.json()["type"].endswith("relay-failing"), r.text
        assert "127.0.0.1" in r.json()["detail"] or "connect" in r.json()["detail"], r.text
        ready = httpx.get(serve.base + "/readyz", timeout=5)
        relay = ready.json()["relay"]
        assert relay["status"] == "failing", relay
        assert relay["consecutiveFailures"] >= RELAY_FAILING_AFTER and relay["lastError"]
    finally:
        assert serve.stop() == 0, serve.text()[-3000:]
