"""Fault: the database is unavailable when a writer publishes.

The writer must get a clear StoreError (nothing is sent to the broker: the log
commit comes first), and nothing may be left half-written: no partition row,
event or set-done row of the failed calls. Three ways to lose the database:

* ``pg-refused``  — PostgreSQL behind a proxy that cuts every connection and
  refuses new ones (server gone);
* ``pg-readonly`` — the database switched to read-only and its sessions
  terminated (failover to a replica, disk full protection);
* ``sqlite-locked`` — another process holds SQLite's write lock past the busy
  timeout.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from partition_notify.core.errors import StoreError
from tests.contract.faults import FaultProxy
from tests.faults.support import Collector, stomp_app, tally
from tests.support.accounts import READER_PASSWORD, READER_USER
from tests.support.activemq import ActiveMQ
from tests.support.ci import require
from tests.support.postgres import PostgresDatabases

CONNECT_TIMEOUT = 1.0


class Outage:
    """Breaks and restores one store; ``url`` is what the writer uses."""

    url: str
    direct_url: str
    expect: tuple[str, ...]

    def break_(self) -> None: ...

    def restore(self) -> None: ...


class PgRefused(Outage):
    expect = ("refused", "closed", "connection", "terminat")

    def __init__(self, direct_url: str) -> None:
        self.direct_url = direct_url
        self.proxy = FaultProxy("127.0.0.1", 5432)
        self.url = direct_url.replace("127.0.0.1:5432", f"127.0.0.1:{self.proxy.port}")

    def break_(self) -> None:
        self.proxy.cut(refuse_new=True)

    def restore(self) -> None:
        self.proxy.accept_again()


class PgReadOnly(Outage):
    expect = ("read-only",)

    def __init__(self, direct_url: str, admin: PostgresDatabases) -> None:
        self.url = self.direct_url = direct_url
        self.admin = admin
        self.name = direct_url.rsplit("/", 1)[1]

    def _set(self, on: bool) -> None:
        with self.admin.admin.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{self.name}" SET default_transaction_read_only '
                              f"= {'on' if on else 'off'}"))
            # Existing sessions keep their setting; end them like a failover would.
            conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE datname = :d AND pid <> pg_backend_pid()"), {"d": self.name})

    def break_(self) -> None:
        self._set(True)

    def restore(self) -> None:
        self._set(False)


class SqliteLocked(Outage):
    expect = ("locked",)

    def __init__(self, path: Path) -> None:
        self.url = self.direct_url = f"sqlite:///{path}"
        self.path = path
        self.holder: sqlite3.Connection | None = None

    def break_(self) -> None:
        self.holder = sqlite3.connect(self.path, isolation_level=None, timeout=1)
        self.holder.execute("BEGIN IMMEDIATE")

    def restore(self) -> None:
        if self.holder is not None:
            self.holder.execute("ROLLBACK")
            self.holder.close()
            self.holder = None


@pytest.fixture(params=["pg-refused", "pg-readonly", "sqlite-locked"])
def outage(request: pytest.FixtureRequest, tmp_path: Path,
           postgres: PostgresDatabases | None) -> Iterator[Outage]:
    if request.param == "sqlite-locked":
        o: Outage = SqliteLocked(tmp_path / "store.db")
        yield o
        o.restore()
        return
    require(postgres is not None, "PostgreSQL is not reachable")
    assert postgres is not None
    url = postgres.new()
    o = PgRefused(url) if request.param == "pg-refused" else PgReadOnly(url, postgres)
    try:
        yield o
    finally:
        o.restore()
        if isinstance(o, PgRefused):
            o.proxy.close()
        postgres.drop(url)


def _counts(url: str, db: str) -> dict[str, int]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            tid = conn.execute(text("SELECT id FROM pn_tables WHERE db = :d"), {"d": db}).scalar()
            return {
                t: int(conn.execute(text(f"SELECT count(*) FROM {t} WHERE table_id = :t"),
                                    {"t": tid}).scalar() or 0)
                for t in ("pn_partitions", "pn_events", "pn_set_done")
            } | {"pn_tables": int(conn.execute(text("SELECT count(*) FROM pn_tables")).scalar()
                                   or 0)}
    finally:
        engine.dispose()


def test_database_unavailable_gives_store_error_and_no_partial_state(
    broker: ActiveMQ, outage: Outage, db_name: str
) -> None:
    pub = stomp_app(outage.url, broker.url, connect_timeout=CONNECT_TIMEOUT)
    sub_app = stomp_app(outage.direct_url, broker.url, user=READER_USER,
                        password=READER_PASSWORD)
    try:
        pub.publisher.register_table(db_name, "events", ["ds", "n"])
        collect = Collector()
        subscription = sub_app.subscriber().subscribe(f"{db_name}.events", collect)
        ok = pub.publisher.announce_partitions(db_name, "events", ["ds=a/n=0", "ds=a/n=1"])
        ok.append(pub.publisher.send_mark_set_done(db_name, "events", "ds=a"))
        before = _counts(outage.direct_url, db_name)

        outage.break_()
        failures: list[str] = []
        slowest = 0.0
        try:
            calls = [
                lambda: pub.publisher.announce_partitions(
                    db_name, "events", [f"ds=b/n={n}" for n in range(5)]),
                lambda: pub.publisher.send_mark_set_done(db_name, "events", "ds=b"),
                lambda: pub.publisher.announce_partitions(db_name, "events", ["ds=c/n=0"],
                                                          replace=True),
                lambda: pub.publisher.register_table(db_name, "other", ["ds"]),
            ]
            for call in calls:
                started = time.monotonic()
                with pytest.raises(StoreError) as info:
                    call()
                slowest = max(slowest, time.monotonic() - started)
                message = str(info.value)
                failures.append(message)
                assert any(word in message.lower() for word in outage.expect), message
                assert "[SQL" not in message and "FROM pn_" not in message, "SQL leaked"
        finally:
            outage.restore()

        after = _counts(outage.direct_url, db_name)
        assert after == before, f"partial state after failed writes: {before} -> {after}"
        pub.publisher.flush_marks()  # marks of confirmed events are written in batches
        assert pub.store.log.relay_lag()[0] == 0, "a failed write left an entry for the relay"
        # The store is back: the next write works and is delivered; nothing from the
        # failed calls reached the broker (the sentinel follows on the same connection).
        sentinel = pub.publisher.announce_partitions(db_name, "events", ["ds=z/n=0"])
        ok += sentinel
        acked = {m.message_id for m in ok}
        assert collect.wait_for(acked, 15)
        extra = set(collect.seen) - acked
        tally(
            f"database-down[{type(outage).__name__}]",
            acknowledged=len(acked),
            delivered=collect.delivered(acked),
            duplicates_suppressed=subscription.duplicates,
            store_errors=len(failures),
            slowest_error_s=f"{slowest:.1f}",
            sent_for_failed_writes=len(extra),
        )
        assert not extra, "a message was sent for a write that failed"
        assert slowest < 10 * CONNECT_TIMEOUT
    finally:
        sub_app.close()
        pub.close()


def test_postgres_lock_held_gives_store_error_within_deadline(
    postgres: PostgresDatabases | None, db_name: str
) -> None:
    """A transaction holding the event counter must not stall writers without a deadline."""
    import threading

    from partition_notify.app import build_app

    require(postgres is not None, "PostgreSQL is not reachable")
    assert postgres is not None
    url = postgres.new()
    app = build_app(store_url=url, transport_url="embedded://",
                    connect_timeout_seconds=CONNECT_TIMEOUT)
    holder = create_engine(url).connect()
    try:
        app.publisher.register_table(db_name, "events", ["ds"])
        tx = holder.begin()
        holder.execute(text("SELECT next_value FROM pn_sequence WHERE name = 'event' FOR UPDATE"))
        outcome: list[BaseException | None] = []

        def write() -> None:
            try:
                app.publisher.announce_partitions(db_name, "events", ["ds=x"])
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        worker = threading.Thread(target=write, daemon=True)
        worker.start()
        worker.join(10)
        tx.rollback()  # let a hung writer finish either way
        worker.join(30)
        assert outcome and isinstance(outcome[0], StoreError), (
            f"writer behind a held lock: {outcome or 'still blocked'}")
    finally:
        holder.close()
        app.close()
        postgres.drop(url)
