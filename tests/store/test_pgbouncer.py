"""The PostgreSQL store through a real PgBouncer (1.18), in transaction and session mode.

Before: PgBouncer refused the store's every connection ("unsupported startup
parameter: options": the store sent its deadlines as libpq startup options), so
nothing worked through it. Each test starts its own PgBouncer
(tests/support/pgbouncer.py) in front of the suite's PostgreSQL.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from partition_notify.store import Store, pg_deadlines
from partition_notify.store.wakeups import PostgresWaker, cross_process_waker
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from partition_notify.app import build_app
from partition_notify.core.errors import ConfigurationError, StoreError
from partition_notify.core.limits import CONNECT_TIMEOUT_SECONDS
from tests.serve.test_housekeeping import DAY, T0, counts, run_serve_jobs, seed_old_rows
from tests.store.test_postgres_deadlines import outcome
from tests.store.test_postgres_server_deadlines import SLEEPER, sleepers
from tests.support import pgbouncer
from tests.support.ci import require
from tests.support.clock import FakeClock
from tests.support.net import wait_until
from tests.support.postgres import PG_ADMIN_URL, PostgresDatabases

MODES = ("transaction", "session")
MISSING = "pgbouncer is not installed (apt-get install -y pgbouncer; scripts/bootstrap.sh)"
REPLY = 0.5  # PN_STORE_REPLY_TIMEOUT_SECONDS where a deadline is under test
BOUND = 6.0
WAIT = 30.0
LOCK_SECONDS = int(3 * CONNECT_TIMEOUT_SECONDS)  # the store's lock_timeout


@pytest.fixture
def database(postgres: PostgresDatabases | None) -> Iterator[str]:
    """A new, empty database (no schema: the store migrates it through the pooler)."""
    require(postgres is not None, f"PostgreSQL at {PG_ADMIN_URL} is not reachable")
    assert postgres is not None
    name = f"pn_t_{uuid.uuid4().hex[:12]}"
    with postgres.admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = f"{postgres.base}/{name}"
    yield url
    postgres.drop(url)


def _bouncer(request: pytest.FixtureRequest, pool_size: int) -> Iterator[pgbouncer.PgBouncer]:
    require(pgbouncer.binary() is not None, MISSING)
    with pgbouncer.running(PG_ADMIN_URL, pool_mode=request.param,
                           pool_size=pool_size) as bouncer:
        yield bouncer


@pytest.fixture(params=MODES)
def bouncer(request: pytest.FixtureRequest, database: str) -> Iterator[pgbouncer.PgBouncer]:
    yield from _bouncer(request, 10)


@pytest.fixture(params=MODES)
def one_server(request: pytest.FixtureRequest, database: str) -> Iterator[pgbouncer.PgBouncer]:
    """A PgBouncer with one server connection: every client's statements share it."""
    yield from _bouncer(request, 1)


def _plain(url: str, autocommit: bool = True) -> psycopg.Connection[tuple[object, ...]]:
    """A client of ``url`` that sets nothing itself (libpq, no options)."""
    conninfo = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    return psycopg.connect(conninfo, autocommit=autocommit, connect_timeout=5)


def test_a_store_migrates_and_delivers_every_message_once_through_pgbouncer(
        database: str, bouncer: pgbouncer.PgBouncer) -> None:
    url = bouncer.url(database)
    specs = [{"ds": f"{n:03d}"} for n in range(30)]
    got: list[dict[str, str]] = []
    done = threading.Event()

    def on_message(msg: object) -> None:
        got.append(dict(msg.partition_spec))  # type: ignore[attr-defined]
        if got[-1] == {"ds": "end"}:
            done.set()

    with build_app(store_url=url, transport_url="embedded://") as app:
        app.publisher.register_table("pgb", "t", ["ds"])
        with app.subscriber() as sub:
            sub.subscribe(("pgb", "t"), on_message, history=False)
            for spec in specs:  # more than psycopg's five before it prepares a statement
                app.publisher.send_mark_set_done("pgb", "t", spec)
            # The end mark arrives after the others: a double would be in by then.
            app.publisher.send_mark_set_done("pgb", "t", {"ds": "end"})
            assert done.wait(WAIT), f"the end mark never arrived; got {got}"
    assert got == [*specs, {"ds": "end"}], bouncer.log_text()[-2000:]


def test_every_transaction_through_pgbouncer_carries_the_stores_deadlines(
        database: str, bouncer: pgbouncer.PgBouncer, caplog: pytest.LogCaptureFixture) -> None:
    store = Store.open(bouncer.url(database), store_reply_timeout_seconds=REPLY)
    names = ("statement_timeout", "lock_timeout", "client_connection_check_interval")
    try:
        with store.engine.begin() as conn:
            in_unit = [conn.execute(text(f"SHOW {n}")).scalar() for n in names]
        hot = [store.read(f"SHOW {n}", [])[0][0] for n in names]
    finally:
        store.close()
    statement = f"{int(REPLY * 1000) + pg_deadlines.STATEMENT_MARGIN_MS}ms"
    check = f"{pg_deadlines.CLIENT_CHECK_MS // 1000}s"  # the suite's PostgreSQL is >= 14
    assert in_unit == hot == [statement, f"{LOCK_SECONDS}s", check]
    said = [r.getMessage() for r in caplog.records if "connection pooler" in r.getMessage()]
    assert len(said) == 1 and "per transaction" in said[0], said


def test_the_stores_settings_do_not_leak_to_other_clients_of_pgbouncer(
        database: str, one_server: pgbouncer.PgBouncer) -> None:
    url = one_server.url(database)
    store = Store.open(url, store_reply_timeout_seconds=REPLY)
    try:
        with store.engine.begin() as conn:
            conn.execute(text("SELECT 1"))
        store.read("SELECT 1", [])
    finally:
        store.close()
    # The one server connection the store used, now another client's: it must see
    # what a client connected straight to the server sees.
    with _plain(url) as other, _plain(database) as direct:
        shown, defaults = ([c.execute(f"SHOW {n}").fetchone() for n in SHOWN]
                           for c in (other, direct))
    assert shown == defaults


SHOWN = ("statement_timeout", "lock_timeout", "tcp_keepalives_idle", "tcp_user_timeout")


def test_a_statement_the_store_gave_up_on_ends_on_the_server_through_pgbouncer(
        database: str, bouncer: pgbouncer.PgBouncer, postgres: PostgresDatabases) -> None:
    store = Store.open(bouncer.url(database), store_reply_timeout_seconds=REPLY)
    try:
        with _plain(PG_ADMIN_URL) as admin:
            for read in (lambda: store.read(SLEEPER, []), lambda: _in_unit(store, SLEEPER)):
                exc, _ = outcome(read)
                assert isinstance(exc, (StoreError, DBAPIError)), repr(exc)
                wait_until(lambda: sleepers(admin) == 0, BOUND,
                           "the server to end the statement")
    finally:
        store.close()


def _in_unit(store: Store, sql: str) -> None:
    with store.engine.begin() as conn:
        conn.execute(text(sql))


def test_a_url_with_startup_options_through_pgbouncer_is_refused_in_one_line(
        database: str, bouncer: pgbouncer.PgBouncer) -> None:
    url = bouncer.url(database) + "?options=-c%20work_mem%3D8MB"
    with pytest.raises((ConfigurationError, StoreError)) as caught:
        Store.open(url).close()
    message = str(caught.value)
    assert "\n" not in message
    assert "'options'" in message and "ignore_startup_parameters" not in message, message


def test_a_statement_run_often_survives_another_client_taking_its_server(
        database: str, bouncer: pgbouncer.PgBouncer) -> None:
    # psycopg prepares a statement at its sixth run, on the server connection then
    # at hand; in transaction mode the next transaction may get another one.
    url = bouncer.url(database)
    store = Store.open(url)
    try:
        for _ in range(8):
            with store.engine.begin() as conn:
                conn.execute(text("SELECT count(*) FROM pn_tables"))
                last = conn.execute(text("SELECT pg_backend_pid()")).scalar()
        with _plain(url, autocommit=False) as other:
            # PgBouncer hands out the server connection released last (LIFO): the store's.
            held = other.execute("SELECT pg_backend_pid()").fetchone()
            if bouncer.pool_mode == "transaction":
                assert held == (last,)
            for _ in range(3):
                with store.engine.begin() as conn:
                    assert conn.execute(text("SELECT count(*) FROM pn_tables")).scalar() == 0
    finally:
        store.close()


def test_another_apps_commit_reaches_a_subscriber_through_pgbouncer(
        database: str, bouncer: pgbouncer.PgBouncer, caplog: pytest.LogCaptureFixture) -> None:
    # Session mode: LISTEN wakes the subscriber (its poll is far beyond WAIT). Transaction
    # mode: the LISTEN would stay on a server connection others get and hear nothing
    # (readers would poll only every WAKEUP_FALLBACK_SECONDS); so no waker, one
    # warning naming the setting, and readers poll at the poll interval.
    url = bouncer.url(database)
    session = bouncer.pool_mode == "session"
    arrived = threading.Event()
    with build_app(store_url=url, transport_url="embedded://",
                   poll_interval_seconds=120.0 if session else 0.05) as app:
        app.publisher.register_table("wake", "t", ["ds"])
        with app.subscriber() as sub:
            sub.subscribe(("wake", "t"), lambda _msg: arrived.set(), history=False)
            # Another app (its own store and event log) stands for another process: its
            # commit reaches this one only through the database (a process costs 2 s).
            with build_app(store_url=url, transport_url="embedded://") as other:
                other.publisher.send_mark_set_done("wake", "t", {"ds": "1"})
            assert arrived.wait(WAIT), "the other app's commit never reached the subscriber"
        waker = cross_process_waker(app.store.engine, lambda: None)
        try:
            assert isinstance(waker, PostgresWaker) if session else waker is None
        finally:
            if waker is not None:
                waker.close(5)
    warned = [r.getMessage() for r in caplog.records if "PN_CROSS_PROCESS_WAKEUPS" in
              r.getMessage()]
    assert len(warned) == (0 if session else 1), warned


def test_a_pgbouncer_that_drops_startup_options_gets_the_deadlines_per_transaction(
        database: str) -> None:
    # ignore_startup_parameters = options: PgBouncer accepts the connection and drops
    # the options, with the server-side deadlines in them, without a word.
    require(pgbouncer.binary() is not None, MISSING)
    with pgbouncer.running(PG_ADMIN_URL, pool_mode="transaction", pool_size=1,
                           ignore="options") as bouncer:
        url = bouncer.url(database)
        store = Store.open(url, store_reply_timeout_seconds=REPLY)
        try:
            with store.engine.begin() as conn:
                in_unit = [conn.execute(text(f"SHOW {n}")).scalar() for n in SHOWN[:2]]
            hot = [store.read(f"SHOW {n}", [])[0][0] for n in SHOWN[:2]]
        finally:
            store.close()
        with _plain(url) as other, _plain(database) as direct:
            shown, defaults = ([c.execute(f"SHOW {n}").fetchone() for n in SHOWN]
                               for c in (other, direct))
    statement = f"{int(REPLY * 1000) + pg_deadlines.STATEMENT_MARGIN_MS}ms"
    assert in_unit == hot == [statement, f"{LOCK_SECONDS}s"]
    assert shown == defaults


def test_serves_housekeeping_purges_through_pgbouncer(
        database: str, bouncer: pgbouncer.PgBouncer, tmp_path: Path) -> None:
    # Every job of serve once (tests/serve/test_housekeeping.py), through the pooler.
    clock = FakeClock(T0)
    app = build_app(store_url=bouncer.url(database), transport_url="embedded://", clock=clock)
    spool = tmp_path / "t" / "_partition_notify"
    try:
        seed_old_rows(app, clock, spool)
        clock.advance(100 * DAY)
        app.publisher.send_mark_set_done("db", "t", "ds=new")
        run_serve_jobs(app)
        assert counts(app) == {"pn_events": 2, "pn_set_done": 1, "pn_spark_commits": 0,
                               "pn_expectation_checks": 0, "pn_consumer_cursors": 0,
                               "pn_idempotency": 0}
    finally:
        app.close()


def test_concurrent_publishers_through_a_small_pool_lose_and_double_nothing(
        database: str, bouncer: pgbouncer.PgBouncer) -> None:
    url = bouncer.url(database)
    writers, each = 4, 15
    expected = sorted(f"{w}-{n:02d}" for w in range(writers) for n in range(each))
    got: list[str] = []
    done = threading.Event()

    def on_message(msg: object) -> None:
        got.append(msg.partition_spec["ds"])  # type: ignore[attr-defined]
        if len(got) >= len(expected) + 1:
            done.set()

    with build_app(store_url=url, transport_url="embedded://") as app:
        app.publisher.register_table("pgb", "c", ["ds"])
        with app.subscriber() as sub:
            sub.subscribe(("pgb", "c"), on_message, history=False)

            def publish(w: int) -> None:
                with build_app(store_url=url, transport_url="embedded://") as mine:
                    for n in range(each):
                        mine.publisher.send_mark_set_done("pgb", "c", {"ds": f"{w}-{n:02d}"})

            threads = [threading.Thread(target=publish, args=(w,)) for w in range(writers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(WAIT)
            # The end mark is published after every writer finished: doubles are in by then.
            app.publisher.send_mark_set_done("pgb", "c", {"ds": "end"})
            assert done.wait(WAIT), f"{len(got)} of {len(expected) + 1} arrived"
    assert got[-1] == "end" and sorted(got[:-1]) == expected


def test_two_stores_migrating_one_new_database_at_once_through_pgbouncer(
        database: str, bouncer: pgbouncer.PgBouncer) -> None:
    # migrate's advisory lock lasts its transaction: the pooler keeps the server
    # connection for as long, so the second starter waits, then finds the schema made.
    url = bouncer.url(database)
    opened: list[object] = []
    start = threading.Barrier(2)

    def open_one() -> None:
        start.wait(WAIT)
        try:
            opened.append(Store.open(url))
        except BaseException as exc:
            opened.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    try:
        assert len(opened) == 2 and all(isinstance(s, Store) for s in opened), opened
    finally:
        for s in opened:
            if isinstance(s, Store):
                s.close()
