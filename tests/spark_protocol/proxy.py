"""A TCP relay in front of a real ``serve``: counts the driver's connections, injects one fault.

Not a stand-in for serve: every byte goes to and comes from the real one. The
faults: ``drop_reuse``, a second request on a connection that already had an
answer is not forwarded; the connection is closed instead. That is what the
driver sees when serve closes a kept-alive connection (its idle timeout, a
restart) just as the driver sends the next commit on it. ``hold_answer_seconds``,
serve's answer reaches the driver that much later: a serve slowed by a loaded
machine.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading

#: How often a relay thread checks that the proxy was closed.
STOP_CHECK_SECONDS = 0.2
#: Connecting to serve (on this machine) may take no longer than this.
CONNECT_TIMEOUT_SECONDS = 5.0


class Relay:
    def __init__(self, upstream_port: int, *, drop_reuse: bool = False,
                 hold_answer_seconds: float = 0.0) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.drop_reuse = drop_reuse
        self.hold_answer_seconds = hold_answer_seconds
        self.accepted = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(STOP_CHECK_SECONDS)
        self.base = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._thread = threading.Thread(target=self._accept, name="relay", daemon=True)
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
            with self._lock:
                self.accepted += 1
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        """Relay one driver connection. serve closing its side while idle (uvicorn's
        keep-alive timeout, 5 s) does not close the driver's: the next request gets a
        new upstream connection, so ``accepted`` counts the driver's connections only."""
        up: socket.socket | None = None
        answered = False
        try:
            while not self._stop.is_set():
                watched = [client] if up is None else [client, up]
                ready, _, _ = select.select(watched, [], [], STOP_CHECK_SECONDS)
                # serve's side first: if it closed its idle connection just as the driver
                # sent a request, the request must go to a new connection, not the dead one.
                for s in sorted(ready, key=lambda r: r is not up):
                    data = s.recv(65536)
                    if s is up:
                        if not data:
                            up.close()
                            up = None
                            continue
                        if not answered and self.hold_answer_seconds:
                            self._stop.wait(self.hold_answer_seconds)
                        client.sendall(data)
                        answered = True
                    elif not data:
                        return
                    elif answered and self.drop_reuse:
                        with self._lock:
                            self.dropped += 1
                        with contextlib.suppress(OSError):
                            client.shutdown(socket.SHUT_RDWR)
                        return
                    else:
                        if up is None:
                            up = socket.create_connection(self.upstream, CONNECT_TIMEOUT_SECONDS)
                        up.sendall(data)
        finally:
            client.close()
            if up is not None:
                up.close()
