"""Ports and wire-level probes (stdlib only: the service manager uses them too).

Every probe has a deadline: a service that accepts a connection and never
answers makes the probe fail, not hang.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Callable
from urllib.parse import urlsplit


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(host: str, port: int, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def reachable(url: str, timeout: float = 2.0) -> bool:
    """True if the URL's host:port accepts a TCP connection (URLs without one: True)."""
    parts = urlsplit(url)
    if not parts.hostname or not parts.port:
        return True
    return port_open(parts.hostname, parts.port, timeout)


def wait_until(predicate: Callable[[], bool], timeout: float, what: str,
               interval: float = 0.05) -> float:
    """Poll ``predicate`` until true; return the seconds it took, or raise AssertionError.

    Only for state in *another process* (a broker, a child, the database):
    there is no event to wait on there.
    """
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)
    return time.monotonic() - started


def _recv_until(s: socket.socket, done: Callable[[bytes], bool]) -> bytes:
    data = b""
    while not done(data):
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def stomp_probe(port: int, login: str, passcode: str, *, host: str = "127.0.0.1",
                vhost: str = "/", timeout: float = 3.0) -> str:
    """STOMP CONNECT with raw frames; the reply's command ('CONNECTED', 'ERROR', '' if none)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(f"CONNECT\naccept-version:1.2\nhost:{vhost}\nlogin:{login}\n"
                      f"passcode:{passcode}\nheart-beat:0,0\n\n\0".encode())
            data = _recv_until(s, lambda d: b"\0" in d).lstrip(b"\r\n")
            command = data.split(b"\n", 1)[0].decode(errors="replace").strip()
            if command == "CONNECTED":
                with contextlib.suppress(OSError):
                    s.sendall(b"DISCONNECT\n\n\0")
            return command
    except OSError:
        return ""


def kafka_probe(host: str, port: int, timeout: float = 3.0) -> bool:
    """Metadata v0 request; True on a well-formed reply naming at least one broker."""
    client = b"pn-services-probe"
    # RequestHeader v1: api_key=3 (Metadata), api_version=0, correlation_id, client_id;
    # body: topics=[] (all).
    body = struct.pack(">hhih", 3, 0, 4242, len(client)) + client + struct.pack(">i", 0)
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(struct.pack(">i", len(body)) + body)
            head = _recv_until(s, lambda d: len(d) >= 4)
            if len(head) < 4:
                return False
            size = struct.unpack(">i", head[:4])[0]
            reply = _recv_until(s, lambda d: len(head) + len(d) >= 4 + size)
            payload = (head + reply)[4:]
    except OSError:
        return False
    if len(payload) < 8:
        return False
    correlation, brokers = struct.unpack(">ii", payload[:8])
    return bool(correlation == 4242 and brokers >= 1)


def postgres_probe(host: str, port: int, timeout: float = 3.0) -> bool:
    """Does PostgreSQL accept connections? (What ``pg_isready`` answers.)

    Sends a startup message: an authentication request, or any error but
    "cannot connect now" (SQLSTATE 57P03, starting up or shutting down),
    means the server accepts connections.
    """
    params = b"user\0postgres\0database\0postgres\0\0"
    startup = struct.pack(">ii", 8 + len(params), 196608) + params  # protocol 3.0
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(startup)
            reply = _recv_until(s, lambda d: len(d) >= 5 and len(d) >= 1 + struct.unpack(
                ">i", d[1:5])[0])
            if reply[:1] == b"R":
                with contextlib.suppress(OSError):
                    s.sendall(b"X\0\0\0\4")  # Terminate: leave no half-open session
    except OSError:
        return False
    if reply[:1] == b"R":
        return True
    return reply[:1] == b"E" and b"C57P03\0" not in reply
