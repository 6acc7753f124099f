"""Leases on the outbox: what lets several ``serve`` processes share one store.

Store level, real processes, SQLite and PostgreSQL: every entry is claimed by
exactly one relay, claims follow the log's order, a live lease blocks others
until it expires, and entries a writer may still be publishing are left alone.
"""

from __future__ import annotations

import multiprocessing as mp
import time

from partition_notify.store import Store

from partition_notify.app import build_app
from tests.serve import _lease_worker

PROCESSES = 4
EVENTS = 400


def _fill(store_url: str, n: int) -> object:
    app = build_app(store_url=store_url, transport_url="embedded://")
    app.publisher.register_table("lease", "events", ["n"])
    table = app.store.catalog.get_table("lease", "events")
    drafts = [app.publisher._partition_draft(table, {"n": str(i)}, None, None) for i in range(n)]
    app.store.log.append(drafts)  # published=False: as after a failed publish
    return app


def test_every_entry_claimed_once_in_log_order(store_url: str) -> None:
    app = _fill(store_url, EVENTS)
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=_lease_worker.claim_all,
                         args=(store_url, f"relay{i}", 7, barrier, out))
             for i in range(PROCESSES)]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    batches = [b for claimed in results.values() for b in claimed]
    ids = sorted(i for b in batches for i in b)
    assert ids == list(range(1, EVENTS + 1)), "an entry was claimed twice or never"
    # Each claim is a contiguous run of the log, and claims never interleave.
    assert all(b == list(range(b[0], b[0] + len(b))) for b in batches)
    print(f"claims per relay: { {o: sum(map(len, c)) for o, c in results.items()} }")
    assert app.store.log.relay_lag()[0] == 0
    app.close()


def test_live_lease_blocks_others_until_it_expires(store_url: str) -> None:
    app = _fill(store_url, 10)
    now = [time.time()]
    store = Store.open(store_url, clock=lambda: now[0])
    first = store.log.lease_unpublished("a", 4, lease_seconds=30)
    assert [e.event_id for e in first] == [1, 2, 3, 4]
    # 'b' may not overtake a's entries: the log's head is held.
    assert store.log.lease_unpublished("b", 10, lease_seconds=30) == []
    now[0] += 31  # a died; its lease ran out
    taken = store.log.lease_unpublished("b", 10, lease_seconds=30)
    assert [e.event_id for e in taken] == list(range(1, 11))
    store.close()
    app.close()


def test_young_entries_left_to_their_writer(store_url: str) -> None:
    app = _fill(store_url, 3)
    assert app.store.log.lease_unpublished("r", 10, 30, min_age_seconds=3600) == []
    assert len(app.store.log.lease_unpublished("r", 10, 30, min_age_seconds=0)) == 3
    app.close()


def test_failed_batch_is_released_for_retry(store_url: str) -> None:
    app = _fill(store_url, 5)
    batch = app.store.log.lease_unpublished("a", 10, 30)
    app.store.log.mark_failed([e.event_id for e in batch], "broker down")
    again = app.store.log.lease_unpublished("b", 10, 30)
    assert [e.event_id for e in again] == [e.event_id for e in batch], "nothing is skipped"
    app.close()
