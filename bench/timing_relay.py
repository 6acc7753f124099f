"""A transparent TCP relay in front of ``serve`` that times each request of the Spark driver.

Used by bench/spark_commit_split.py to split "commit -> logged" into the
driver's part (commit -> the request's first byte here) and serve's part
(first byte -> logged, first byte -> answer). Transparent on purpose: one
upstream connection per driver connection, and when serve closes its side
(uvicorn's keep-alive timeout) the driver's side is closed too, so the driver
sees exactly what it would see talking to serve directly; the relay only adds
one local hop (tens of microseconds) each way.
"""

from __future__ import annotations

import contextlib
import re
import select
import socket
import threading
import time

#: How often a relay thread checks that the relay was closed.
STOP_CHECK_SECONDS = 0.2
#: Connecting to serve (on this machine) may take no longer than this.
CONNECT_TIMEOUT_SECONDS = 5.0
_COMMITTED = re.compile(rb'"committedAtMs"\s*:\s*(\d+)')


class TimingRelay:
    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        #: committedAtMs -> {"first", "answer": epoch s; "conn": connection number;
        #: "nth": the request's number on that connection (1 = a new connection)}
        self.got: dict[int, dict[str, float]] = {}
        self.connections = 0
        self.closed_by_serve = 0
        self.cond = threading.Condition()
        self._stop = threading.Event()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(STOP_CHECK_SECONDS)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._thread = threading.Thread(target=self._accept, name="timing-relay", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(STOP_CHECK_SECONDS * 5)
        self._sock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._sock.accept()
            except TimeoutError:
                continue
            with self.cond:
                self.connections += 1
                n = self.connections
            threading.Thread(target=self._relay, args=(client, n), daemon=True).start()

    def _relay(self, client: socket.socket, conn_no: int) -> None:
        up = socket.create_connection(self.upstream, CONNECT_TIMEOUT_SECONDS)
        # Forward each piece at once, as the peers themselves do (the JDK client and
        # uvicorn both set TCP_NODELAY): with Nagle on, a request's body written while
        # its headers were unacknowledged waited for serve's delayed ACK (~40 ms).
        for s in (client, up):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        nth = 0
        pending: dict[str, float] | None = None  # the request in flight: not answered yet
        head = b""
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([client, up], [], [], STOP_CHECK_SECONDS)
                for s in ready:
                    data = s.recv(65536)
                    now = time.time()
                    if not data:
                        if s is up:
                            with self.cond:
                                self.closed_by_serve += 1
                        return
                    if s is client:
                        if pending is None:
                            nth += 1
                            pending, head = {"first": now, "conn": conn_no, "nth": nth}, b""
                        head += data
                        up.sendall(data)
                        continue
                    client.sendall(data)
                    if pending is not None:
                        self._record(pending, head, now)
                        pending = None
        finally:
            with contextlib.suppress(OSError):
                client.close()
            with contextlib.suppress(OSError):
                up.close()

    def _record(self, req: dict[str, float], body: bytes, answered: float) -> None:
        m = _COMMITTED.search(body)
        if m is None:  # not a manifest (e.g. a health check)
            return
        with self.cond:
            self.got[int(m.group(1))] = {**req, "answer": answered}
            self.cond.notify_all()
