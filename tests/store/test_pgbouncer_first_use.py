"""The wake-up listener as the first use of an engine behind a real PgBouncer.

The engine learns that it is behind a pooler (store/pg_pooler.py) when it first
connects. A subscriber process may start its wake-up listener
(store/wakeups.py, which connects on its own) before any store query: the
listener must not decide on LISTEN before that detection and the pooler's probe.
"""

from __future__ import annotations

import logging
import threading

import psycopg
import pytest
from partition_notify.store import make_engine
from partition_notify.store.wakeups import (
    CHANNEL,
    REPROBE_SECONDS,
    PostgresWaker,
    cross_process_waker,
)

from tests.store.test_pgbouncer import MISSING, WAIT, _plain, bouncer, database  # noqa: F401
from tests.support import pgbouncer
from tests.support.ci import require
from tests.support.net import free_port
from tests.support.postgres import PG_ADMIN_URL


def test_a_wakeup_listener_that_is_the_engines_first_use_waits_for_pooler_detection(
        database: str, bouncer: pgbouncer.PgBouncer,  # noqa: F811
        caplog: pytest.LogCaptureFixture) -> None:
    # Transaction mode: LISTEN would stay on a server connection handed to others and
    # hear nothing, so there must be no listener (readers poll at their poll interval).
    # Session mode: a listener that hears another client's NOTIFY.
    caplog.set_level(logging.INFO)
    url = bouncer.url(database)
    engine = make_engine(url)
    woken = threading.Event()
    try:
        waker = cross_process_waker(engine, woken.set)  # the engine's first connection
        try:
            if bouncer.pool_mode == "transaction":
                assert waker is None, "a LISTEN in PgBouncer transaction mode hears nothing"
            else:
                assert isinstance(waker, PostgresWaker), waker
                assert woken.wait(WAIT), "the listener never listened"
                woken.clear()
                _notify_until(url, woken)
        finally:
            if waker is not None:
                waker.close(5.0)
    finally:
        engine.dispose()
    failed = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING
              and "wake-ups failed" in r.getMessage()]
    assert failed == []
    warned = [r.getMessage() for r in caplog.records if "PN_CROSS_PROCESS_WAKEUPS" in
              r.getMessage()]
    assert len(warned) == (1 if bouncer.pool_mode == "transaction" else 0), warned


def _notify_until(url: str, woken: threading.Event) -> None:
    """Another client's commit notifies; the listener must hear it (one NOTIFY
    suffices once it listens, which it did before reading the log the first time)."""
    conn: psycopg.Connection[tuple[object, ...]]
    with _plain(url) as conn:
        conn.execute(f"NOTIFY {CHANNEL}")
    assert woken.wait(WAIT), "another client's NOTIFY never reached the listener"


def test_a_first_use_listener_behind_a_pgbouncer_that_drops_startup_options_polls(
        database: str, caplog: pytest.LogCaptureFixture) -> None:  # noqa: F811
    # ignore_startup_parameters = options: the pooler accepts the connection and drops
    # the options without a word; detection tells by their marker setting.
    require(pgbouncer.binary() is not None, MISSING)
    with pgbouncer.running(PG_ADMIN_URL, pool_mode="transaction", ignore="options") as dropping:
        engine = make_engine(dropping.url(database))
        try:
            assert cross_process_waker(engine, lambda: None) is None
        finally:
            engine.dispose()
    assert any("PN_CROSS_PROCESS_WAKEUPS" in r.getMessage() for r in caplog.records)


def test_a_first_use_listener_that_cannot_connect_leaves_readers_polling_in_one_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    # Nothing listens on the port: the detection's connect fails; the reader must start
    # (polling), not fail, and the log says why in one line, however often the listener
    # asks again meanwhile (test_a_listener_that_could_not_connect_listens_once_...).
    port = free_port()
    engine = make_engine(f"postgresql+psycopg://pn@127.0.0.1:{port}/pn",
                         connect_timeout_seconds=2)
    waker = None
    try:
        waker = cross_process_waker(engine, lambda: None)
        assert isinstance(waker, PostgresWaker) and not waker.hears()
        assert not waker.settled.wait(2 * REPROBE_SECONDS + 1.0)  # asked again, in vain
    finally:
        if waker is not None:
            waker.close(5.0)
        engine.dispose()
    said = [r.getMessage() for r in caplog.records if "readers poll" in r.getMessage()]
    assert len(said) == 1 and f"127.0.0.1:{port}" in said[0], said


@pytest.mark.parametrize("pool_mode", ["session", "transaction"])
def test_a_listener_that_could_not_connect_listens_once_the_pooler_answers(
        database: str, pool_mode: str, caplog: pytest.LogCaptureFixture) -> None:  # noqa: F811
    # The listener is the engine's first use while its PgBouncer's port still refuses
    # (the PgBouncer is configured, not started). Before: one warning, then readers
    # polled for the life of the process. Required: it asks again (bounded backoff,
    # each attempt within the engine's connect deadline) and, once the pooler answers,
    # listens (session mode: another client's NOTIFY wakes it; reading the log once at
    # the start of listening catches up what committed meanwhile) or, in transaction
    # mode, leaves readers polling with that mode's one warning.
    require(pgbouncer.binary() is not None, MISSING)
    caplog.set_level(logging.INFO)
    late = pgbouncer.PgBouncer(PG_ADMIN_URL, pool_mode=pool_mode, pool_size=10)
    url = late.url(database)
    engine = make_engine(url, connect_timeout_seconds=2)
    woken = threading.Event()
    waker = None
    try:
        waker = cross_process_waker(engine, woken.set)
        assert isinstance(waker, PostgresWaker), "no listener: readers poll for good"
        assert not waker.hears()  # readers poll meanwhile
        assert not woken.is_set()
        late.start()
        assert waker.settled.wait(WAIT), "the listener never asked the pooler again"
        if pool_mode == "session":
            assert woken.wait(WAIT), "the listener never listened once the pooler answered"
            assert waker.hears()
            woken.clear()
            _notify_until(url, woken)
        else:
            assert not waker.hears()  # LISTEN would hear nothing: readers keep polling
    finally:
        if waker is not None:
            waker.close(5.0)
        engine.dispose()
        late.stop()
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    cannot = [m for m in said if "cannot connect" in m]
    assert len(cannot) == 1, said  # once, not once per attempt
    warned = [m for m in said if "PN_CROSS_PROCESS_WAKEUPS" in m]
    assert len(warned) == (1 if pool_mode == "transaction" else 0), said
