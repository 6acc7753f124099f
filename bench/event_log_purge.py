"""One event-log purge run on a grown log: does its cost follow the log or the purge?

    PYTHONPATH=. python bench/event_log_purge.py [--rows 300000] [--tail 1000]
        [--rounds 5] [--backend sqlite|postgresql|both]

``serve`` purges every minute; in steady state a minute's worth of events has
passed the horizon and the rest of the log is retained. The log holds --rows
published events of 1,000 topics inside the horizon; before each round
--tail events past it are added, with lower ids (ids follow the clock: an append
takes its id under the write lock and reads the clock after it; since migration
0023 the purge relies on that to bound its read, store/housekeeping.py). Each
round, alternating:

* **previous first statement**: the newest purgeable id (``max(event_id)``
  over the purge's condition), which the purge asked for before its first
  batch until 2026-11-29, sent as SQL on a pooled connection;
* **ours**: ``Store.housekeeping.purge_events`` (the serve job's call), the
  whole run: it deletes the tail and raises the 410 mark batch by batch.

Both are printed without planner statistics (a new store, autovacuum off) and
after ANALYZE. Medians of --rounds.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from core_common import analyze, backends, machine_note, scratch_store_url
from sqlalchemy import text

TOPICS = 1000
#: Ids of the retained log start here, far above every added tail's.
RETAINED_BASE = 10**9
_FILL = """
WITH RECURSIVE g(x) AS (SELECT CAST(:lo AS BIGINT) UNION ALL SELECT x + 1 FROM g WHERE x < :hi)
INSERT INTO pn_events (event_id, topic, topic_seq, event_type, table_id, message_id,
                       headers, body, created_at, published_at, attempts, rejections)
SELECT x, 'hcat.b.t' || (x % 1000), :seq_sign * x, 'ADD_PARTITION', x % 1000, 'm' || x,
       '{}', 'x', :created + (x - :lo) * :step, :now, 0, 0 FROM g
"""
#: The previous code's first statement, as it compiled (no cursor, no rule: no floor).
PREVIOUS = """
SELECT max(e.event_id) FROM pn_events e
WHERE e.created_at < :before AND e.event_id <= 4611686018427387904
  AND (e.event_id <= 4611686018427387904 OR e.created_at < 0)
  AND (e.published_at IS NOT NULL OR e.discarded_at IS NOT NULL)
  AND EXISTS (SELECT 1 FROM pn_events l WHERE l.topic = e.topic AND l.topic_seq > e.topic_seq)
"""


def fill(store: Any, lo: int, hi: int, created: float, step: float, seq_sign: int) -> None:
    with store.engine.begin() as conn:
        conn.execute(text(_FILL), {"lo": lo, "hi": hi, "created": created, "step": step,
                                   "now": time.time(), "seq_sign": seq_sign})


def rounds(store: Any, n: int, tail: int, before: float, first: int) -> tuple[list[float], ...]:
    """``n`` alternating rounds; each adds a tail (older than ``before``, never its
    topic's last: negative topic sequences) for ours to purge."""
    prev: list[float] = []
    ours: list[float] = []
    for r in range(n):
        lo = 1 + (first + r) * tail
        fill(store, lo, lo + tail - 1, before - 3600, 1.0 / tail, -1)
        t = time.perf_counter()
        with store.engine.connect() as conn:
            top = conn.execute(text(PREVIOUS), {"before": before}).scalar()
        prev.append(time.perf_counter() - t)
        assert top == lo + tail - 1, (top, lo)
        t = time.perf_counter()
        gone = store.housekeeping.purge_events(before, batch_size=5000)
        ours.append(time.perf_counter() - t)
        assert gone == tail, gone
        assert store.housekeeping.purged_below() == lo + tail
    return prev, ours


def run(backend: str, rows: int, tail: int, n: int) -> None:
    from partition_notify.store import Store

    print(f"\n== {backend}: a log of {rows:,} retained events, {tail:,} past the horizon "
          f"per round, {n} rounds ==")
    with scratch_store_url(backend) as url:
        store = Store.open(url)
        try:
            now = time.time()
            fill(store, RETAINED_BASE, RETAINED_BASE + rows - 1, now - rows * 0.01, 0.01,
                 1)  # inside the horizon
            for label, first in (("no statistics", 0), ("after ANALYZE", n)):
                if first:
                    analyze(store, "pn_events")
                prev, ours = rounds(store, n, tail, now - rows * 0.01 - 1, first)
                p, o = statistics.median(prev) * 1000, statistics.median(ours) * 1000
                print(f"  {label:14} previous first statement p50 {p:8.2f} ms | ours, "
                      f"whole run p50 {o:8.2f} ms | ours / previous first {o / p:5.2f}x")
        finally:
            store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--tail", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    args = ap.parse_args()
    print(machine_note())
    for backend in backends(args.backend):
        run(backend, args.rows, args.tail, args.rounds)
    print(machine_note())


if __name__ == "__main__":
    main()
