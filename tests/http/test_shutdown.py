"""SIGTERM with an open SSE stream and a pending long-poll: both end, serve exits 0 in time."""

from __future__ import annotations

import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from partition_notify.app import build_app
from partition_notify.http.store import HttpStore
from tests.http.support import HttpServe
from tests.http.test_reads import waits_in_progress
from tests.support.net import wait_until


def gauge(base: str, name: str) -> float:
    import re
    m = re.search(rf"^{name} (\S+)$", httpx.get(base + "/metrics", timeout=10).text, re.M)
    return float(m.group(1)) if m else 0.0


def test_sigterm_ends_streams_and_waits_and_exits_0() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="pn-http-stop-"))
    url = f"sqlite:///{tmp}/store.db"
    app = build_app(store_url=url, transport_url="embedded://")
    app.publisher.register_table("db", "t", ["ds"])
    token = HttpStore(app.store).create_token("r", "read")[1]
    app.close()
    serve = HttpServe(url, tmp / "serve.log",
                      env_extra={"PN_HTTP_SHUTDOWN_TIMEOUT_SECONDS": "5"}).start()
    headers = {"Authorization": f"Bearer {token}"}
    out: dict[str, Any] = {}

    def stream() -> None:
        with httpx.stream("GET", serve.base + "/v1/tables/db.t/stream", headers=headers,
                          timeout=60) as r:
            out["lines"] = list(r.iter_lines())

    def poll() -> None:
        out["poll"] = httpx.get(serve.base + "/v1/tables/db.t/wait",
                                params={"spec": "ds=1", "timeout": 120}, headers=headers,
                                timeout=60)

    threads = [threading.Thread(target=stream), threading.Thread(target=poll)]
    for t in threads:
        t.start()
    wait_until(lambda: gauge(serve.base, "pn_http_streams") >= 1
               and waits_in_progress(serve) >= 1, 30, "a stream and a long-poll")
    assert serve.proc is not None
    started = time.monotonic()
    serve.proc.send_signal(signal.SIGTERM)
    code = serve.proc.wait(30)
    took = time.monotonic() - started
    for t in threads:
        t.join(30)
    assert code == 0, serve.text()[-2000:]
    assert took < 5 + 10, f"serve took {took:.1f} s to stop"
    assert out["poll"].status_code == 503
    assert out["poll"].json()["title"] == "Shutting down"
    assert "lines" in out  # the stream ended rather than hanging
    assert "stopped" in serve.text()
