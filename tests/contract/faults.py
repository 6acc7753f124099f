"""A TCP proxy in front of a real broker, to inject network faults.

Traffic goes to the real broker; the proxy only withholds the broker's
replies (``hold_replies``), cuts every connection (``cut``) or freezes them
(``freeze``), which is how the suite shows that a publish waits for the broker's
confirmation, that a lost connection fails it instead of reporting success, and
that a peer which keeps its sockets open but never answers is given up on.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class FaultProxy:
    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._replies = threading.Event()
        self._replies.set()
        self._requests = threading.Event()
        self._requests.set()
        self._refusing = False
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._closed = False
        self.accepted = 0
        threading.Thread(target=self._accept, name="fault-proxy", daemon=True).start()

    def url(self, scheme: str = "stomp") -> str:
        return f"{scheme}://127.0.0.1:{self.port}"

    # -- faults ---------------------------------------------------------------
    def hold_replies(self) -> None:
        """Keep forwarding to the broker but stop passing its answers back."""
        self._replies.clear()

    def release_replies(self) -> None:
        self._replies.set()

    def freeze(self) -> None:
        """Stop reading and forwarding both ways, sockets left open: a hung server
        (or a vanished host, as the client sees it: nothing ever comes back).
        Connections made while frozen are accepted and frozen too."""
        self._requests.clear()
        self._replies.clear()

    def thaw(self) -> None:
        self._requests.set()
        self._replies.set()

    def cut(self, *, refuse_new: bool = False) -> None:
        """Close every proxied connection (both sides), like a broker crash."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
            self._refusing = refuse_new
        for a, b in pairs:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def accept_again(self) -> None:
        with self._lock:
            self._refusing = False

    def close(self) -> None:
        self._closed = True
        self.thaw()
        self.cut()
        self._listener.close()

    # -- plumbing -------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                refusing = self._refusing
            if refusing:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
                self.accepted += 1
            threading.Thread(target=self._pump, args=(client, upstream, self._requests),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, self._replies),
                             daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket,
              gate: threading.Event | None) -> None:
        try:
            while True:
                if gate is not None:
                    gate.wait()
                data = src.recv(65536)
                if not data:
                    break
                if gate is not None:
                    gate.wait()  # data read just before a hold is held too
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
