"""A PostgreSQL server that stops answering fails the store within its deadlines.

Real sockets: the real PostgreSQL behind a proxy (tests/contract/faults.py) that
is then frozen (both sockets kept open, nothing read or forwarded: what a client
sees of a hung server, or of a vanished host before the kernel gives up), and a
listening socket that never answers. Without deadlines of its own the client
waits for the kernel: forever, for a frozen peer whose kernel still acknowledges.
Each blocking call runs on a thread joined with a bound, so a hang fails quickly.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from partition_notify.store import Store
from partition_notify.store.wakeups import cross_process_waker
from sqlalchemy.engine import make_url

from partition_notify.core.errors import StoreError
from tests.contract.faults import FaultProxy
from tests.support.ci import require
from tests.support.net import wait_until
from tests.support.postgres import PG_ADMIN_URL, PostgresDatabases

CONNECT = 1.0  # PN_CONNECT_TIMEOUT_SECONDS in these tests
CONNECT_AT_LEAST = 2.0  # psycopg waits at least 2 s per address to connect
REPLY = 2.0  # PN_STORE_REPLY_TIMEOUT_SECONDS in these tests
BOUND = 10.0  # the test's own deadline: far past both, far below the kernel's


@pytest.fixture
def pg_url(postgres: PostgresDatabases | None) -> Iterator[str]:
    require(postgres is not None, f"PostgreSQL at {PG_ADMIN_URL} is not reachable")
    assert postgres is not None
    url = postgres.new()
    yield url
    postgres.drop(url)


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    url = make_url(PG_ADMIN_URL)
    proxy = FaultProxy(url.host or "127.0.0.1", url.port or 5432)
    yield proxy
    proxy.close()  # thaws and cuts: a thread the test gave up on ends here


PASSWORD = "s3cret-pw"  # trust authentication ignores it; no error may show it


def via(url: str, port: int) -> str:
    return make_url(url).set(host="127.0.0.1", port=port, password=PASSWORD).render_as_string(
        hide_password=False)


def outcome(call: Callable[[], object], bound: float = BOUND) -> tuple[BaseException | None,
                                                                        float]:
    """The exception ``call`` raised and how long it took; fails if it is still
    blocked after ``bound`` seconds (or returned: a frozen server answers nothing)."""
    raised: list[BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            raised.append(exc)
        done.set()

    start = time.monotonic()
    threading.Thread(target=run, name="blocking-call", daemon=True).start()
    assert done.wait(bound), f"still blocked after {bound} s: no deadline"
    assert raised, "returned although the server answered nothing"
    return raised[0], time.monotonic() - start


def open_store(url: str) -> Store:
    return Store.open(url, connect_timeout_seconds=CONNECT, store_reply_timeout_seconds=REPLY)


def test_a_read_and_a_write_to_a_frozen_server_fail_within_the_reply_deadline(
        pg_url: str, proxy: FaultProxy) -> None:
    store = open_store(via(pg_url, proxy.port))
    try:
        register = store.catalog.register_table
        register("sales", "orders", ["ds"], topic="t.orders", retention_seconds=60)
        proxy.freeze()
        for call in (lambda: store.read("SELECT count(*) FROM pn_events", []),
                     lambda: register("sales", "returns", ["ds"], topic="t.returns",
                                      retention_seconds=60)):
            exc, took = outcome(call)
            # The pool's ping finds no reply, then connecting again finds no answer:
            # the error names the deadline that passed last.
            assert isinstance(exc, StoreError), repr(exc)
            assert f"127.0.0.1:{proxy.port}" in str(exc), str(exc)
            assert "no reply" in str(exc) or "no answer" in str(exc), str(exc)
            assert ("PN_STORE_REPLY_TIMEOUT_SECONDS" in str(exc)
                    or "PN_CONNECT_TIMEOUT_SECONDS" in str(exc)), str(exc)
            assert PASSWORD not in str(exc), str(exc)
            assert REPLY <= took < REPLY + 2 * CONNECT_AT_LEAST + 3, took
        proxy.thaw()  # a connection given up on is not reused: the next call works
        assert store.read("SELECT count(*) FROM pn_tables", [])[0][0] == 1
    finally:
        store.close()


def test_the_wakeup_listener_drops_a_frozen_connection_and_dials_again(
        pg_url: str, proxy: FaultProxy) -> None:
    store = open_store(via(pg_url, proxy.port))
    woken = threading.Event()
    waker = cross_process_waker(store.engine, woken.set)
    assert waker is not None
    try:
        assert woken.wait(BOUND)  # listening: it reads once after LISTEN
        dialled = proxy.accepted
        proxy.freeze()
        # Idle on LISTEN, it must notice the silence itself and connect again.
        assert wait_until(lambda: proxy.accepted > dialled, BOUND, "a new listener connection")

    finally:
        waker.close(5.0)
        store.close()


def test_opening_a_store_on_a_server_that_never_answers_fails_within_the_connect_deadline(
        pg_url: str) -> None:
    silent = socket.create_server(("127.0.0.1", 0))  # the kernel accepts; nobody answers
    try:
        url = via(pg_url, silent.getsockname()[1])
        exc, took = outcome(lambda: open_store(url))
        assert isinstance(exc, StoreError), repr(exc)
        assert f"127.0.0.1:{silent.getsockname()[1]}" in str(exc), str(exc)
        assert "PN_CONNECT_TIMEOUT_SECONDS" in str(exc), str(exc)
        assert PASSWORD not in str(exc), str(exc)
        assert took < CONNECT_AT_LEAST + 3, took
    finally:
        silent.close()


def tcp_options(store: Store) -> tuple[int, int, int, int]:
    """(keepalive idle, interval, count, user timeout ms) of a store connection's socket,
    as the kernel holds them."""
    with store.engine.connect() as conn:
        raw = conn.connection.driver_connection
        assert raw is not None
        sock = socket.socket(fileno=os.dup(raw.pgconn.socket))
    try:
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        return tuple(sock.getsockopt(socket.IPPROTO_TCP, opt) for opt in (  # type: ignore[return-value]
            socket.TCP_KEEPIDLE, socket.TCP_KEEPINTVL, socket.TCP_KEEPCNT,
            socket.TCP_USER_TIMEOUT))
    finally:
        sock.close()


def test_store_sockets_give_up_on_a_dead_peer_within_tens_of_seconds(pg_url: str) -> None:
    store = Store.open(pg_url)
    try:
        idle, interval, count, user_ms = tcp_options(store)
        assert (idle, interval, count, user_ms) == (10, 5, 4, 30_000)
        assert idle + interval * count <= 30
    finally:
        store.close()


def test_the_urls_own_libpq_parameters_win(pg_url: str) -> None:
    store = Store.open(f"{pg_url}?keepalives_idle=3&tcp_user_timeout=7000")
    try:
        assert tcp_options(store) == (3, 5, 4, 7000)
    finally:
        store.close()


def test_a_statement_slower_than_the_reply_deadline_fails_and_the_store_goes_on(
        pg_url: str) -> None:
    # The deadline is the client's: a healthy server that takes too long gets it too.
    store = Store.open(pg_url, store_reply_timeout_seconds=0.5)
    try:
        exc, took = outcome(lambda: store.read("SELECT pg_sleep(3)", []))
        assert isinstance(exc, StoreError), repr(exc)
        assert "within 0.5 s (PN_STORE_REPLY_TIMEOUT_SECONDS)" in str(exc), str(exc)
        assert took < 2.5, took
        assert store.read("SELECT 1", []) == [(1,)]
    finally:
        store.close()
