"""``serve`` stops within a purge batch, not after the whole purge.

A backlog of expired rows (the first run after a long outage, a retention made
shorter) takes housekeeping many batches; SIGTERM waited for all of them
(``Service.stop`` waits for the job in hand), so an orchestrator's grace period
ran out and the process was killed before its stop hooks (lease hand-over, the
publish marks) ran. The rest of the backlog is the next run's work.
Real SQLite and PostgreSQL, the real ``Service`` with its housekeeping job.
"""

from __future__ import annotations

import time

from sqlalchemy import text

from partition_notify.app import App, build_app
from partition_notify.serve.jobs import JOBS
from partition_notify.serve.service import Service
from tests.support.clock import FakeClock

T0 = 1_800_000_000.0
#: Expired idempotency keys: many batches of deletes on either store (~10 s whole).
BACKLOG = 1_000_000
#: Longest a stop may take once the purge is under way: a batch or two.
STOP_SECONDS = 3.0

_SQLITE_SEED = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :count) "
    "INSERT INTO pn_idempotency (principal, key, fingerprint, status, response, created_at, "
    "expires_at) SELECT 'p', 'k' || i, 'f', 201, '{}', :t, :t + i FROM n")
_PG_SEED = (
    "INSERT INTO pn_idempotency (principal, key, fingerprint, status, response, created_at, "
    "expires_at) SELECT 'p', 'k' || i, 'f', 201, '{}', :t, :t + i "
    "FROM generate_series(1, :count) AS i")


def rows(app: App) -> int:
    with app.store.engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM pn_idempotency")).scalar_one())


def test_stop_ends_a_long_purge_after_the_batch_in_hand(store_url: str) -> None:
    clock = FakeClock(T0)
    app = build_app(store_url=store_url, transport_url="embedded://", clock=clock)
    try:
        seed = _SQLITE_SEED if app.store.dialect == "sqlite" else _PG_SEED
        with app.store.engine.begin() as conn:
            conn.execute(text(seed), {"count": BACKLOG, "t": T0})
        clock.advance(BACKLOG + 1.0)  # every key expired
        svc = Service(app, jobs=[j for j in JOBS if j.id == "housekeeping"])
        svc.start()  # the job's first run starts at once
        deadline = time.monotonic() + 60
        while rows(app) == BACKLOG:  # no event to await: the purge shows in the table
            assert time.monotonic() < deadline, "the purge did not start"
            time.sleep(0.01)
        started = time.monotonic()
        svc.stop()
        took = time.monotonic() - started
        left = rows(app)
        assert took < STOP_SECONDS and left > 0, (
            f"stop took {took:.1f} s; {left} of {BACKLOG} rows left to purge")
        # The next run purges the rest.
        Service(app, jobs=[j for j in JOBS if j.id == "housekeeping"]).run_once()
        assert rows(app) == 0
    finally:
        app.close()
