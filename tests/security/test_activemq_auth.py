"""The shipped ActiveMQ configuration (scripts/activemq/activemq.xml) enforces who
may write what, on the broker scripts/services.sh runs from it.

Raw STOMP frames over a socket — exactly what any client could send — so the
broker's decision is observed directly, not a client library's.
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from pathlib import Path

import pytest

from tests.faults.support import Collector, read_frames, stomp_app
from tests.support.accounts import (
    ADMIN_PASSWORD,
    READER_PASSWORD,
    READER_USER,
    ROOT,
    SERVICE_PASSWORD,
    SERVICE_USER,
    bus_specs,
)
from tests.support.ci import require

STOMP_URL = bus_specs()["activemq"].url
PORT = int(STOMP_URL.rsplit(":", 1)[1])


@pytest.fixture(scope="module", autouse=True)
def shipped_broker(activemq_url: str) -> None:
    conf = Path(os.environ.get("PN_TEST_ACTIVEMQ_DIR", "/tmp/partition-notify-services/activemq"))
    running = conf / "conf/activemq.xml"
    require(running.is_file(), f"{running} missing: is the broker the one services.sh started?")
    assert running.read_text() == (ROOT / "scripts/activemq/activemq.xml").read_text(), (
        "the broker under test does not run the shipped configuration")


def exchange(login: str | None, passcode: str | None, frame: str | None) -> tuple[str, str]:
    """CONNECT (optionally anonymous), then one frame with a receipt; (reply command, message)."""
    creds = f"login:{login}\npasscode:{passcode}\n" if login is not None else ""
    with socket.create_connection(("127.0.0.1", PORT), timeout=10) as s:
        s.settimeout(10)
        s.sendall(f"CONNECT\naccept-version:1.2\nhost:/\n{creds}heart-beat:0,0\n\n\0".encode())
        (command, headers), = read_frames(s, 1) or [("", {})]
        if command != "CONNECTED" or frame is None:
            return command, headers.get("message", "")
        s.sendall(frame.encode() + b"\0")
        replies = read_frames(s, 1)
        with contextlib.suppress(OSError):
            s.sendall(b"DISCONNECT\n\n\0")
    if not replies:
        return "", ""
    return replies[0][0], replies[0][1].get("message", "")


def send(dest: str) -> str:
    return f"SEND\ndestination:{dest}\nreceipt:r1\npersistent:true\n\n{{}}"


def subscribe(dest: str) -> str:
    return f"SUBSCRIBE\ndestination:{dest}\nid:1\nack:auto\nreceipt:r1\n\n"


T = f"hcat.sec{uuid.uuid4().hex[:8]}.events"
CASES = [
    # who, password, frame, expected reply
    ("anonymous CONNECT", None, None, None, "ERROR"),
    ("service, wrong password", SERVICE_USER, "not-the-password", None, "ERROR"),
    ("reader, wrong password", READER_USER, "not-the-password", None, "ERROR"),
    ("unknown user", "mallory", SERVICE_PASSWORD, None, "ERROR"),
    ("service SEND hcat topic", SERVICE_USER, SERVICE_PASSWORD, send(f"/topic/{T}"), "RECEIPT"),
    ("reader SEND hcat topic", READER_USER, READER_PASSWORD, send(f"/topic/{T}"), "ERROR"),
    ("service SEND other topic", SERVICE_USER, SERVICE_PASSWORD, send("/topic/other.x"), "ERROR"),
    ("service SEND queue", SERVICE_USER, SERVICE_PASSWORD, send("/queue/hcat.x"), "ERROR"),
    ("reader SEND queue", READER_USER, READER_PASSWORD, send("/queue/hcat.x"), "ERROR"),
    ("reader SUBSCRIBE hcat topic", READER_USER, READER_PASSWORD, subscribe(f"/topic/{T}"),
     "RECEIPT"),
    ("reader SUBSCRIBE other topic", READER_USER, READER_PASSWORD, subscribe("/topic/other.x"),
     "ERROR"),
    ("admin SEND other topic", "admin", ADMIN_PASSWORD, send("/topic/other.x"), "RECEIPT"),
]


@pytest.mark.parametrize(("who", "login", "passcode", "frame", "expected"), CASES,
                         ids=[c[0] for c in CASES])
def test_authorization_matrix(who: str, login: str | None, passcode: str | None,
                              frame: str | None, expected: str) -> None:
    command, message = exchange(login, passcode, frame)
    if frame is None and expected == "ERROR":
        assert command == "ERROR", f"{who}: CONNECT answered {command!r}"
        return
    assert command == expected, f"{who}: got {command!r} {message!r}"


def test_reader_subscriber_receives_what_the_service_publishes(sqlite_url: str) -> None:
    db = f"sec{uuid.uuid4().hex[:8]}"
    pub = stomp_app(sqlite_url, STOMP_URL)
    sub_app = stomp_app(sqlite_url, STOMP_URL, user=READER_USER, password=READER_PASSWORD)
    try:
        pub.publisher.register_table(db, "events", ["ds"])
        collect = Collector()
        with sub_app.subscriber() as sub:
            sub.subscribe(f"{db}.events", collect)
            sent = pub.publisher.announce_partitions(db, "events", ["ds=1", "ds=2"])
            assert collect.wait_for({m.message_id for m in sent}, 10)
    finally:
        sub_app.close()
        pub.close()
