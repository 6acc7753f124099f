"""The read-only PostgreSQL role (store/sql/readonly_role.sql) on a real PostgreSQL.

A subscriber signed in as ``pn_reader`` can do everything a consumer does
(wait_for_set_done, history, is_partition_present, follow the event log), and
every write — through the store API or raw SQL — is refused by PostgreSQL.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from partition_notify.store import Store
from partition_notify.store.roles import apply_readonly_role, readonly_role_sql
from partition_notify.subscriber import Subscriber
from partition_notify.transports import create_transport
from pydantic import SecretStr
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from partition_notify.app import build_app
from partition_notify.core.errors import ConfigurationError, PartitionNotifyError, StoreError
from tests.support.ci import require
from tests.support.postgres import PostgresDatabases


@pytest.fixture
def pg(postgres: PostgresDatabases | None) -> Iterator[tuple[str, str]]:
    """(owner URL, pn_reader URL) of a fresh migrated database with the role applied."""
    require(postgres is not None, "PostgreSQL is not reachable")
    assert postgres is not None
    url = postgres.new()
    engine = create_engine(url)
    apply_readonly_role(engine)
    engine.dispose()
    reader = make_url(url).set(username="pn_reader").render_as_string(hide_password=False)
    yield url, reader
    postgres.drop(url)


def test_reader_subscriber_reads_everything_a_consumer_needs(pg: tuple[str, str]) -> None:
    owner_url, reader_url = pg
    owner = build_app(store_url=owner_url, transport_url="embedded://")
    reader_store = Store.open(reader_url)  # the schema check at head is read-only
    transport = create_transport("embedded://", store=reader_store, poll_interval_seconds=0.02)
    sub = Subscriber(reader_store, transport, timeout_seconds=10)
    try:
        owner.publisher.register_table("sales", "orders", ["ds", "region"])
        owner.publisher.announce_partitions("sales", "orders", ["ds=1/region=us"])
        owner.publisher.send_mark_set_done("sales", "orders", "ds=1")

        assert sub.wait_for_set_done("sales", "orders", "ds=1/region=us", timeout=10).spec
        assert sub.is_partition_present("sales", "orders", "ds=1/region=us")
        assert not sub.is_partition_present("sales", "orders", "ds=2/region=us")
        assert [m.spec for m in sub.set_done_history("sales", "orders")] == ["ds=1"]

        # A wait that is satisfied later: live, via the event log the reader follows.
        later = threading.Timer(0.5, owner.publisher.send_mark_set_done,
                                ("sales", "orders", "ds=2"))
        later.start()
        assert sub.wait_for_set_done("sales", "orders", {"ds": "2"}, timeout=15).spec == "ds=2"
        later.join()
    finally:
        sub.close()
        transport.close(5)
        reader_store.close()
        owner.close()


@pytest.mark.parametrize("statement", [
    "INSERT INTO pn_partitions (table_id, spec, \"values\", event_id, created_at) "
    "VALUES (1, 'ds=x', '{}', 1, 0)",
    "UPDATE pn_events SET published_at = NULL",
    "DELETE FROM pn_set_done",
    "UPDATE pn_tables SET retention_seconds = 1",
    "TRUNCATE pn_events",
    "INSERT INTO pn_sequence (name, next_value) VALUES ('x', 1)",
    "SELECT * FROM pn_sequence",  # least privilege: nothing beyond what consumers read
    "CREATE TABLE pn_evil (x int)",
    "DROP TABLE pn_set_done",
])
def test_reader_cannot_write(pg: tuple[str, str], statement: str) -> None:
    owner_url, reader_url = pg
    owner = build_app(store_url=owner_url, transport_url="embedded://")
    owner.publisher.register_table("sales", "orders", ["ds"])
    owner.publisher.send_mark_set_done("sales", "orders", "ds=1")
    owner.close()
    engine = create_engine(reader_url)
    try:
        with pytest.raises(DBAPIError) as info, engine.begin() as conn:
            conn.execute(text(statement))
        assert "permission denied" in str(info.value.orig) or "must be owner" in str(
            info.value.orig)
    finally:
        engine.dispose()


def test_reader_store_api_writes_are_store_errors(pg: tuple[str, str]) -> None:
    owner_url, reader_url = pg
    owner = build_app(store_url=owner_url, transport_url="embedded://")
    owner.publisher.register_table("sales", "orders", ["ds"])
    owner.publisher.send_mark_set_done("sales", "orders", "ds=1")
    owner.close()
    app = build_app(store_url=reader_url, transport_url="embedded://")
    # A month later the set-done has expired; the reader must not purge it either.
    later = Store.open(reader_url, clock=lambda: time.time() + 30 * 24 * 3600)
    try:
        for call in (
            lambda: app.publisher.announce_partitions("sales", "orders", ["ds=9"]),
            lambda: app.publisher.send_mark_set_done("sales", "orders", "ds=9"),
            lambda: app.publisher.register_table("sales", "other", ["ds"]),
            lambda: later.retention.purge_expired(),
        ):
            with pytest.raises(StoreError, match="permission denied"):
                call()
        assert app.store.log.max_event_id() == 1
        with app.subscriber() as sub:
            assert len(sub.set_done_history("sales", "orders")) == 1
    finally:
        later.close()
        app.close()


def test_role_sql_is_idempotent_and_sets_password(pg: tuple[str, str]) -> None:
    owner_url, _ = pg
    engine = create_engine(owner_url)
    try:
        apply_readonly_role(engine, password=SecretStr("reader-pw-7f3a"))
        apply_readonly_role(engine)
        with engine.connect() as conn:
            grants = conn.execute(text(
                "SELECT table_name, privilege_type FROM information_schema.role_table_grants "
                "WHERE grantee = 'pn_reader' ORDER BY 1, 2")).all()
            has_pw = conn.execute(text(
                "SELECT rolpassword IS NOT NULL FROM pg_authid WHERE rolname = 'pn_reader'"
            )).scalar()
    finally:
        engine.dispose()
    assert {(t, p) for t, p in grants} == {
        (t, "SELECT")
        for t in ("alembic_version", "pn_events", "pn_partitions", "pn_set_done", "pn_tables")
    } | {("pn_consumer_cursors", p) for p in ("INSERT", "SELECT", "UPDATE")}
    assert has_pw
    from partition_notify.store.cursors import SERVE_CURSOR_PREFIXES

    sql = readonly_role_sql()
    assert all(f"NOT starts_with(name, '{p}')" in sql for p in SERVE_CURSOR_PREFIXES)


def test_role_name_and_dialect_checked(sqlite_url: str) -> None:
    with pytest.raises(ConfigurationError, match="role name"):
        readonly_role_sql("pn_reader; DROP TABLE pn_events")
    engine = create_engine(sqlite_url)
    with pytest.raises(ConfigurationError, match="needs PostgreSQL"):
        apply_readonly_role(engine)
    engine.dispose()


def test_reader_keeps_its_event_trigger_cursor(pg: tuple[str, str]) -> None:
    """Airflow event triggers run as consumers: their cursor is the one thing they write."""
    from partition_notify.store.cursors import Cursors

    _, reader_url = pg
    reader_store = Store.open(reader_url)
    try:
        cursors = Cursors(reader_store)
        start = cursors.open("airflow:sales.orders:*").event_id
        cursors.advance("airflow:sales.orders:*", start + 3)
        assert cursors.get("airflow:sales.orders:*").event_id == start + 3
        with pytest.raises(DBAPIError, match="permission denied"), \
                reader_store.engine.begin() as conn:  # still no deletes
            conn.execute(text("DELETE FROM pn_consumer_cursors"))
    finally:
        reader_store.close()


def test_reader_cannot_move_a_cursor_serve_owns(pg: tuple[str, str]) -> None:
    """The push sink's cursor (``airflow-push:<url>``) is serve's: a reader moving it
    would make serve re-push every set-done (duplicate DAG runs) or skip them."""
    from partition_notify.store.cursors import SERVE_CURSOR_PREFIXES, Cursors

    owner_url, reader_url = pg
    push = SERVE_CURSOR_PREFIXES[0] + "http://airflow:8080"
    owner_store = Store.open(owner_url)
    reader_store = Store.open(reader_url)
    try:
        Cursors(owner_store).open(push, start=7)
        raw = [
            f"UPDATE pn_consumer_cursors SET event_id = 0 WHERE name = '{push}'",
            f"UPDATE pn_consumer_cursors SET event_id = 999, pending_event_id = NULL "
            f"WHERE name = '{push}'",
            "UPDATE pn_consumer_cursors SET lease_owner = 'me', lease_until = 1e12",
            f"INSERT INTO pn_consumer_cursors (name, event_id, updated_at) "
            f"VALUES ('{SERVE_CURSOR_PREFIXES[0]}http://other', 0, 0)",
        ]
        for statement in raw:
            try:
                with reader_store.engine.begin() as conn:
                    conn.execute(text(statement))
            except DBAPIError as exc:
                assert "row-level security" in str(exc.orig), exc
        with pytest.raises(PartitionNotifyError):  # hidden from the reader: "no cursor"
            Cursors(reader_store).advance(push, 1000)
        with pytest.raises(StoreError, match="row-level security"):
            Cursors(reader_store).open(SERVE_CURSOR_PREFIXES[0] + "http://other")
        with owner_store.engine.connect() as conn:
            rows = conn.execute(text(
                "SELECT name, event_id, lease_owner FROM pn_consumer_cursors")).all()
        assert [tuple(r) for r in rows] == [(push, 7, None)]
        # The owner (serve) still moves it.
        Cursors(owner_store).advance(push, 8)
        assert Cursors(owner_store).get(push).event_id == 8
    finally:
        reader_store.close()
        owner_store.close()
