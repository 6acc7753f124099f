"""The is-set-done look-up sees a set-done the moment another writer commits it.

The look-up keeps raw driver connections open between calls
(store/hot_read.py); a kept connection must never answer from an older
snapshot. Each test warms the reader's connection with a miss first, so the
connection that answers afterwards is the kept one, then a commit made through
another connection or process must be visible on the very next look-up: no
sleep, no retry.
"""

from __future__ import annotations

import multiprocessing
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from partition_notify.store import Store, TableInfo, make_engine
from partition_notify.store.hot_read import MAX_KEPT
from sqlalchemy import create_engine, text

from partition_notify.app import build_app
from partition_notify.contract import spec
from partition_notify.core.errors import StoreError
from tests.store._writer_process import mark_on_request


def covering(store: Store, wanted: str) -> list[str]:
    info = store.catalog.get_table("db", "t")
    return store.retention.set_done_covering(info, spec.covering_specs(spec.parse(wanted)))


def test_commit_through_another_store_is_seen_at_once(store_url: str) -> None:
    with build_app(store_url=store_url, transport_url="embedded://") as writer:
        writer.publisher.register_table("db", "t", ["ds", "region"], retention_seconds=3600)
        reader = Store.open(store_url)
        try:
            for day in range(20):
                wanted = f"ds={day}/region=eu"
                assert covering(reader, wanted) == []  # keeps its connection open
                done = f"ds={day}" if day % 2 else wanted
                writer.publisher.send_mark_set_done("db", "t", done)
                assert len(covering(reader, wanted)) == 1, f"commit of {done} not seen"
        finally:
            reader.close()


def test_commit_in_another_process_is_seen_at_once(store_url: str) -> None:
    with build_app(store_url=store_url, transport_url="embedded://") as app:
        app.publisher.register_table("db", "t", ["ds", "region"], retention_seconds=3600)
        ctx = multiprocessing.get_context("spawn")
        ours, theirs = ctx.Pipe()
        proc = ctx.Process(target=mark_on_request, args=(store_url, theirs))
        proc.start()
        try:
            assert ours.poll(60) and ours.recv() == "ready"
            for day in range(10):
                wanted = f"ds={day}/region=eu"
                assert covering(app.store, wanted) == []
                ours.send(wanted)
                assert ours.poll(30) and ours.recv() == wanted
                assert len(covering(app.store, wanted)) == 1, f"commit of {wanted} not seen"
        finally:
            ours.send(None)
            proc.join(30)
            if proc.is_alive():
                proc.kill()
    assert proc.exitcode == 0


# Only a server can drop the connection under the store: PostgreSQL only (no
# SQLite variant that would show up as a skip in CI).
@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_lookup_survives_the_server_dropping_its_kept_connection(store_url: str) -> None:
    """A kept connection killed while idle (a server restart) is replaced, not reported."""
    with build_app(store_url=store_url, transport_url="embedded://") as app:
        app.publisher.register_table("db", "t", ["ds", "region"], retention_seconds=3600)
        app.publisher.send_mark_set_done("db", "t", "ds=1")
        assert len(covering(app.store, "ds=1/region=eu")) == 1  # opens the kept connection
        admin = create_engine(store_url, isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:
                killed = conn.execute(text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()")).scalar()
        finally:
            admin.dispose()
        assert killed and killed >= 1
        assert len(covering(app.store, "ds=1/region=eu")) == 1
        assert covering(app.store, "ds=2/region=eu") == []


def test_concurrent_lookups_beyond_the_kept_connections_all_answer(store_url: str) -> None:
    """More threads than kept connections: the rest go through the engine's pool."""
    with build_app(store_url=store_url, transport_url="embedded://") as app:
        app.publisher.register_table("db", "t", ["ds", "region"], retention_seconds=3600)
        for day in range(0, 40, 2):
            app.publisher.send_mark_set_done("db", "t", f"ds={day}")
        barrier = threading.Barrier(3 * MAX_KEPT)

        def ask(worker: int) -> list[bool]:
            barrier.wait(30)
            return [bool(covering(app.store, f"ds={day}/region=r{worker}")) for day in range(40)]

        with ThreadPoolExecutor(3 * MAX_KEPT) as pool:
            answers = list(pool.map(ask, range(3 * MAX_KEPT)))
    assert answers == [[day % 2 == 0 for day in range(40)]] * (3 * MAX_KEPT)


def test_lookup_against_an_unreachable_server_is_a_store_error() -> None:
    """Opening a kept connection fails as every other store call does: StoreError."""
    store = Store(make_engine("postgresql+psycopg://postgres@127.0.0.1:1/none",
                              connect_timeout_seconds=1))
    table = TableInfo(1, "db", "t", ("ds",), "topic", 3600)
    try:
        with pytest.raises(StoreError, match="OperationalError"):
            store.retention.set_done_covering(table, ["ds=1"])
    finally:
        store.close()
