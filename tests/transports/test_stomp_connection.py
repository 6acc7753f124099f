"""Connecting: refusals and deadlines are clear errors, secrets stay out of logs."""

from __future__ import annotations

import logging
import socket
import threading
import time

import psutil
import pytest
from partition_notify.transports.stomp import StompTransport

from partition_notify.core.errors import ConnectError, PublishError
from tests.support.markers import uses
from tests.support.net import free_port
from tests.transports.stomp_helpers import STOMP_BROKERS, build, host_port, stomp_spec


@pytest.fixture(params=STOMP_BROKERS)
@uses("broker")
def spec(request):
    return stomp_spec(request.param)


def test_wrong_password_is_a_connect_error_without_the_password(spec, sqlite_url, caplog):
    secret = "wrong-but-secret-Pa55"
    app = build(spec, sqlite_url, password=secret)
    try:
        app.publisher.register_table("conn", "events", ["d"])
        with caplog.at_level(logging.DEBUG):
            started = time.monotonic()
            with pytest.raises(PublishError) as err:
                app.publisher.send_mark_set_done("conn", "events", "d=1")
        assert time.monotonic() - started < 5
        cause = err.value.__cause__
        assert isinstance(cause, ConnectError)
        assert "refused the connection" in str(cause) or "closed" in str(cause)
        assert secret not in str(err.value)
        assert not [r for r in caplog.records if secret in r.getMessage()]
        assert any("passcode:********" in r.getMessage() for r in caplog.records)
    finally:
        app.close()


def test_credentials_are_not_logged_on_success(spec, sqlite_url, caplog):
    app = build(spec, sqlite_url)
    try:
        with caplog.at_level(logging.DEBUG):
            app.publisher.register_table("conn", "events", ["d"])
            app.publisher.send_mark_set_done("conn", "events", "d=1")
        messages = [r.getMessage() for r in caplog.records]
        assert any("connected to" in m for m in messages)
        frames = [m for m in messages if "passcode:" in m]
        assert frames, "stomp.py logs the CONNECT frame at DEBUG"
        assert all("passcode:********" in m for m in frames)
        if spec.password != spec.username:  # RabbitMQ's guest/guest cannot tell them apart
            assert not [m for m in messages if spec.password in m]
        assert "password=" not in repr(app.transport.endpoint)
    finally:
        app.close()


def test_nothing_listening_fails_within_the_connect_timeout():
    port = free_port()  # nothing listens there
    transport = StompTransport.from_url(f"stomp://127.0.0.1:{port}", connect_timeout=1.0)
    started = time.monotonic()
    with pytest.raises(ConnectError, match=f"127.0.0.1:{port}"):
        transport.consumer(lambda raw: None).subscribe(["hcat.x.y"], timeout=1.0)
    assert time.monotonic() - started < 3
    transport.close(1)


def test_a_silent_server_fails_within_the_connect_timeout():
    """Accepts TCP but never answers CONNECT: stomp.py would wait forever, we do not."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(server.accept()[0]), daemon=True).start()
    transport = StompTransport.from_url(f"stomp://127.0.0.1:{server.getsockname()[1]}",
                                        connect_timeout=1.0)
    try:
        started = time.monotonic()
        with pytest.raises(ConnectError, match="no CONNECTED frame"):
            transport.link.connection(time.monotonic() + 1.0)
        assert time.monotonic() - started < 3
    finally:
        transport.close(1)
        for c in accepted:
            c.close()
        server.close()


def test_publisher_and_consumers_share_one_connection(spec, sqlite_url):
    _, port = host_port(spec)
    before = _sockets_to(port)
    app = build(spec, sqlite_url)
    try:
        for i in range(3):
            app.publisher.register_table("conn", f"t{i}", ["d"])
        with app.subscriber() as sub1, app.subscriber() as sub2:
            sub1.subscribe(("conn", "t0"))
            sub2.subscribe([("conn", "t1"), ("conn", "t2")])
            app.publisher.send_mark_set_done("conn", "t2", "d=1")
            assert _sockets_to(port) - before == 1
            assert app.transport.link.connects == 1
    finally:
        app.close()
    assert _sockets_to(port) == before


def _sockets_to(port: int) -> int:
    return sum(1 for c in psutil.Process().net_connections("tcp")
               if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED)
