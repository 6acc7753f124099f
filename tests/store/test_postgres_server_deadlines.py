"""A statement the store gave up on ends on the PostgreSQL server too, and frees its locks.

Before: the reply deadline (tests/store/test_postgres_deadlines.py) was the
client's alone. The client closed its connection, but the server went on
running the statement, holding its locks, until it next wrote to the socket (a
``pg_sleep(30)`` for 30 s); behind a frozen network it never learnt the client
had gone. Real PostgreSQL, watched from a separate connection through
pg_stat_activity and pg_locks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from partition_notify.store import Store, pg_deadlines
from sqlalchemy import text
from sqlalchemy.engine import make_url

from partition_notify.core.errors import StoreError
from tests.contract.faults import FaultProxy
from tests.store.test_postgres_deadlines import outcome, pg_url, proxy, via  # noqa: F401
from tests.support.net import wait_until

REPLY = 0.5  # PN_STORE_REPLY_TIMEOUT_SECONDS in these tests
BOUND = 6.0  # the server must have let go by then; the statements sleep 30 s
MARK = "pn-server-deadline-test"
SLEEPER = f"SELECT count(*) /* {MARK} */ FROM pn_tables, pg_sleep(30)"


@pytest.fixture
def admin(pg_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:  # noqa: F811
    conninfo = make_url(pg_url).set(drivername="postgresql").render_as_string(
        hide_password=False)
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=5) as conn:
        yield conn


def sleepers(admin: psycopg.Connection[tuple[object, ...]], state: str = "%") -> int:
    """Server sessions running (or last ran) SLEEPER in ``state``."""
    row = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE %s "
                        "AND state LIKE %s AND pid <> pg_backend_pid()",
                        (f"%{MARK}%FROM pn_tables%", state)).fetchone()
    return int(row[0]) if row else 0


def table_locks(admin: psycopg.Connection[tuple[object, ...]]) -> int:
    """Locks other sessions hold or wait for on pn_tables."""
    row = admin.execute("SELECT count(*) FROM pg_locks l JOIN pg_class c ON l.relation = "
                        "c.oid WHERE c.relname = 'pn_tables' AND l.pid <> pg_backend_pid()"
                        ).fetchone()
    return int(row[0]) if row else 0


def test_a_statement_the_client_gave_up_on_ends_on_the_server(
        pg_url: str, admin: psycopg.Connection[tuple[object, ...]]) -> None:  # noqa: F811
    store = Store.open(pg_url, store_reply_timeout_seconds=REPLY)
    try:
        exc, _ = outcome(lambda: store.read(SLEEPER, []))
        assert isinstance(exc, StoreError), repr(exc)
        wait_until(lambda: sleepers(admin) == 0, BOUND, "the server to end the statement")
        assert table_locks(admin) == 0
    finally:
        store.close()


def test_with_the_urls_statement_timeout_off_the_server_still_notices_the_client_left(
        pg_url: str, admin: psycopg.Connection[tuple[object, ...]]) -> None:  # noqa: F811
    # client_connection_check_interval: the server polls the client's socket while
    # a statement runs, whatever statement_timeout the URL asks for.
    store = Store.open(f"{pg_url}?options=-c%20statement_timeout%3D0",
                       store_reply_timeout_seconds=REPLY)
    try:
        exc, _ = outcome(lambda: store.read(SLEEPER, []))
        assert isinstance(exc, StoreError), repr(exc)
        wait_until(lambda: sleepers(admin) == 0, BOUND, "the server to end the statement")
        assert table_locks(admin) == 0
    finally:
        store.close()


def test_behind_a_frozen_network_the_server_stops_the_statement_and_frees_its_locks(
        pg_url: str, proxy: FaultProxy,  # noqa: F811
        admin: psycopg.Connection[tuple[object, ...]]) -> None:
    # The client's close never reaches the server: statement_timeout must end it.
    store = Store.open(via(pg_url, proxy.port), store_reply_timeout_seconds=REPLY * 4)
    try:
        failed: list[BaseException] = []
        done = threading.Event()

        def run() -> None:
            try:
                store.read(SLEEPER, [])
            except BaseException as exc:
                failed.append(exc)
            done.set()

        threading.Thread(target=run, daemon=True).start()
        wait_until(lambda: sleepers(admin, "active") == 1, BOUND, "the statement to run")
        proxy.freeze()
        assert done.wait(BOUND) and isinstance(failed[0], StoreError), failed
        wait_until(lambda: sleepers(admin, "active") == 0, BOUND,
                   "the server to stop the statement")
        assert table_locks(admin) == 0
    finally:
        store.close()


def test_store_sessions_tell_the_server_their_deadlines(pg_url: str) -> None:  # noqa: F811
    store = Store.open(pg_url, store_reply_timeout_seconds=REPLY)
    try:
        with store.engine.connect() as conn:
            shown = {name: conn.execute(text(f"SHOW {name}")).scalar() for name in (
                "statement_timeout", "tcp_keepalives_idle", "tcp_keepalives_interval",
                "tcp_keepalives_count", "tcp_user_timeout", "client_connection_check_interval")}
    finally:
        store.close()
    margin = pg_deadlines.STATEMENT_MARGIN_MS
    assert shown == {
        "statement_timeout": f"{int(REPLY * 1000) + margin}ms",
        "tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5",
        "tcp_keepalives_count": "4", "tcp_user_timeout": "30000",
        "client_connection_check_interval": f"{pg_deadlines.CLIENT_CHECK_MS // 1000}s"}


def test_a_migration_is_not_cut_by_the_statement_timeout(
        pg_url: str, admin: psycopg.Connection[tuple[object, ...]]) -> None:  # noqa: F811
    # migrate waits for its advisory lock like a long DDL: past statement_timeout.
    admin.execute("SELECT pg_advisory_lock(7244917)")
    opened: list[object] = []
    done = threading.Event()

    def run() -> None:
        try:
            opened.append(Store.open(pg_url, store_reply_timeout_seconds=REPLY))
        except BaseException as exc:
            opened.append(exc)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    wait_until(lambda: admin.execute("SELECT count(*) FROM pg_locks WHERE locktype = "
                                     "'advisory' AND NOT granted").fetchone() == (1,),
               BOUND, "the migration to wait for its lock")
    # Held past the statement timeout: a duration to outlast, not a synchronisation.
    time.sleep((REPLY * 1000 + pg_deadlines.STATEMENT_MARGIN_MS) / 1000 + 1)
    admin.execute("SELECT pg_advisory_unlock(7244917)")
    assert done.wait(BOUND)
    assert isinstance(opened[0], Store), repr(opened[0])
    opened[0].close()


@pytest.mark.parametrize(("version", "names"), [
    (150004, {"tcp_user_timeout", "client_connection_check_interval"}),
    (140000, {"tcp_user_timeout", "client_connection_check_interval"}),
    (130012, {"tcp_user_timeout"}), (110000, set())])
def test_settings_a_server_does_not_know_are_not_sent(version: int, names: set[str]) -> None:
    assert {name for name, _ in pg_deadlines.versioned_settings(version)} == names


def test_a_reply_deadline_past_the_servers_largest_timeout_still_connects(
        pg_url: str) -> None:  # noqa: F811
    # 10**7 s is 10**10 ms: statement_timeout takes at most 2**31 - 1 ms (24.8 days).
    store = Store.open(pg_url, store_reply_timeout_seconds=10.0**7)
    try:
        assert store.read("SHOW statement_timeout", []) == [("2147483647ms",)]
    finally:
        store.close()
