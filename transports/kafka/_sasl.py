"""Ask the broker whether it speaks our SASL mechanism before kafka-python connects.

kafka-python treats a refused SaslHandshake (e.g. UNSUPPORTED_SASL_MECHANISM
from a listener without SASL) as a transient connection failure and retries
until its bootstrap deadline, then reports only "Unable to bootstrap". One
SaslHandshake request on a socket of our own answers in milliseconds; a
refusal becomes an :class:`AuthenticationError` naming the mechanism. Anything
inconclusive (host down, TLS failure, garbage) is left to kafka-python, which
reports it as before.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
import time

from partition_notify.transports.kafka.config import KafkaEndpoint

from partition_notify.core.errors import AuthenticationError

SASL_HANDSHAKE, VERSION = 17, 1
#: Kafka protocol error codes a SaslHandshake can return.
ERROR_NAMES = {
    33: "UNSUPPORTED_SASL_MECHANISM",
    34: "ILLEGAL_SASL_STATE",  # Apache Kafka on a listener without SASL
    58: "SASL_AUTHENTICATION_FAILED",
}
_MAX_RESPONSE = 1 << 16


def check_sasl(endpoint: KafkaEndpoint, deadline: float) -> None:
    """Raise :class:`AuthenticationError` if a broker refuses our SASL mechanism."""
    if not endpoint.security_protocol.startswith("SASL"):
        return
    for address in endpoint.bootstrap:
        left = min(deadline - time.monotonic(), endpoint.connect_timeout)
        if left <= 0:
            return
        answer = _handshake(endpoint, address, left)
        if answer is None:
            continue  # unreachable or inconclusive: try the next host
        code, offered = answer
        if code != 0:
            name = ERROR_NAMES.get(code, f"error {code}")
            raise AuthenticationError(
                f"kafka: SASL authentication with mechanism {endpoint.sasl_mechanism} is "
                f"unsupported by the broker at {address} (SaslHandshake: {name}; mechanisms "
                f"it lists: {', '.join(offered) or 'none'}) - the listener may have no SASL "
                f"enabled: check security_protocol ({endpoint.security_protocol}) and "
                "sasl_mechanism in the kafka:// URL against the broker's listeners"
            )
        return


def _handshake(
    endpoint: KafkaEndpoint, address: str, timeout: float
) -> tuple[int, list[str]] | None:
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    try:
        with contextlib.closing(socket.create_connection((host, int(port)), timeout)) as raw:
            raw.settimeout(timeout)
            sock: socket.socket = raw
            if endpoint.security_protocol == "SASL_SSL":
                context = ssl.create_default_context(cafile=endpoint.ssl_cafile)
                sock = context.wrap_socket(raw, server_hostname=host)
            sock.sendall(_request(endpoint.client_id, endpoint.sasl_mechanism))
            return _response(sock)
    except (OSError, ValueError, struct.error):
        return None


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return struct.pack(">h", len(data)) + data


def _request(client_id: str, mechanism: str) -> bytes:
    # Request header v1 (api key, version, correlation id, client id), then the body.
    payload = (struct.pack(">hhi", SASL_HANDSHAKE, VERSION, 1) + _string(client_id)
               + _string(mechanism))
    return struct.pack(">i", len(payload)) + payload


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ValueError("connection closed mid-response")
        data += chunk
    return data


def _response(sock: socket.socket) -> tuple[int, list[str]]:
    (size,) = struct.unpack(">i", _read(sock, 4))
    if not 10 <= size <= _MAX_RESPONSE:
        raise ValueError(f"unexpected response size {size}")
    body = _read(sock, size)
    correlation, code, count = struct.unpack_from(">ihi", body)
    if correlation != 1:
        raise ValueError("response to another request")
    offered, at = [], 10
    for _ in range(max(0, min(count, 64))):
        (length,) = struct.unpack_from(">h", body, at)
        offered.append(body[at + 2 : at + 2 + length].decode("utf-8", "replace"))
        at += 2 + length
    return code, offered
