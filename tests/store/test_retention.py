"""Set-done retention: expiry after the table's period, and batched purge.

Time is a controllable clock handed to the Store (the store's only source of
"now"); the database, publisher and subscriber are the real ones.
"""

from __future__ import annotations

import random

import pytest
from partition_notify.publisher import Publisher, PublisherConfig
from partition_notify.store import Store
from partition_notify.subscriber import Subscriber
from partition_notify.transports.embedded import EmbeddedTransport
from sqlalchemy import event, text

from partition_notify.core.errors import WaitTimeout
from tests.store.helpers import snapshot

T0 = 1_700_000_000.0
SHORT, LONG = 100, 1000


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Rig:
    def __init__(self, url: str) -> None:
        self.clock = Clock(T0)
        self.store = Store.open(url, clock=self.clock)
        self.transport = EmbeddedTransport(self.store)
        self.publisher = Publisher(self.store, self.transport, PublisherConfig())
        self.publisher.register_table("db", "short", ["ds", "region"], retention_seconds=SHORT)
        self.publisher.register_table("db", "long", ["ds", "region"], retention_seconds=LONG)
        self.short = self.store.catalog.get_table("db", "short")
        self.long = self.store.catalog.get_table("db", "long")
        self.deletes: list[int] = []
        event.listen(self.store.engine, "after_cursor_execute", self._count)

    def _count(self, conn, cursor, statement, params, context, executemany) -> None:
        if statement.lstrip().upper().startswith("DELETE FROM PN_SET_DONE"):
            self.deletes.append(cursor.rowcount)

    def done(self, table: str, spec: str):
        return self.publisher.send_mark_set_done("db", table, spec)

    def rows(self) -> list[tuple[int, str, float]]:
        with self.store.engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(
                "SELECT table_id, spec, expires_at FROM pn_set_done ORDER BY id"))]

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def rig(store_url):
    r = Rig(store_url)
    yield r
    r.close()


def history_specs(rig: Rig, table) -> list[str]:
    from partition_notify.contract import decode

    return [decode(b.encode()).spec for b in rig.store.retention.set_done_history([table], 0.0)]


def test_rows_expire_after_their_tables_period(rig):
    short = rig.done("short", "ds=1")
    rig.done("long", "ds=1")
    assert short.expires_at == int(T0 + SHORT)
    rig.clock.now = T0 + SHORT - 0.5
    assert history_specs(rig, rig.short) == ["ds=1"]
    assert len(rig.store.retention.set_done_covering(rig.short, ["ds=1"])) == 1

    rig.clock.now = T0 + SHORT  # expires_at is exclusive: gone at exactly T0 + period
    assert history_specs(rig, rig.short) == []
    assert rig.store.retention.set_done_covering(rig.short, ["ds=1", "region=us"]) == []
    assert history_specs(rig, rig.long) == ["ds=1"]
    assert len(rig.store.retention.set_done_covering(rig.long, ["ds=1"])) == 1
    # Expired rows are invisible before any purge has run.
    assert len(rig.rows()) == 2

    with Subscriber(rig.store, rig.transport) as sub:
        assert sub.set_done_history("db", "short") == []
        with pytest.raises(WaitTimeout):
            sub.wait_for_set_done("db", "short", "ds=1/region=us", timeout=0.3)
        found = sub.wait_for_set_done("db", "long", "ds=1/region=us", timeout=5)
        assert found.spec == "ds=1"

    rig.clock.now = T0 + LONG
    assert history_specs(rig, rig.long) == []


def test_purge_removes_only_expired_rows_in_batches(rig):
    for i in range(25):
        rig.done("short", f"ds={i}")
    for i in range(5):
        rig.done("long", f"ds={i}")
    rig.clock.now = T0 + 50
    for i in range(5):
        rig.done("short", f"ds=late{i}")
    events_before = snapshot(rig.store.engine)["pn_events"]

    rig.clock.now = T0 + SHORT
    unexpired = [r for r in rig.rows() if r[2] > rig.clock.now]
    assert len(unexpired) == 10

    assert rig.store.retention.purge_expired(batch_size=10, max_batches=1) == 10
    assert rig.deletes == [10]
    assert len(rig.rows()) == 25

    between = []
    purged = rig.store.retention.purge_expired(
        batch_size=10, between_batches=lambda: between.append(1)
    )
    assert purged == 15
    assert rig.deletes == [10, 10, 5], "one DELETE per batch, each at most batch_size rows"
    assert len(between) == 1
    assert rig.rows() == unexpired
    # Nothing else is touched: the event log keeps every set-done.
    assert snapshot(rig.store.engine)["pn_events"] == events_before

    # Nothing expired: one empty batch, nothing removed.
    assert rig.store.retention.purge_expired(batch_size=10) == 0
    assert rig.rows() == unexpired

    rig.clock.now = T0 + 50 + SHORT
    assert rig.store.retention.purge_expired(batch_size=2) == 5
    assert rig.deletes[-3:] == [2, 2, 1]
    assert [r[0] for r in rig.rows()] == [rig.long.id] * 5


def test_purge_never_removes_unexpired_rows_randomised(rig):
    rnd = random.Random(20110228)
    published: list[tuple[str, float]] = []
    for i in range(120):
        rig.clock.now = T0 + rnd.uniform(0, 2000)
        table = rnd.choice(["short", "long"])
        rig.done(table, f"ds={i}")
        published.append((table, rig.clock.now))
    for _ in range(8):
        rig.clock.now = T0 + rnd.uniform(0, 3500)
        before = rig.rows()
        removed = rig.store.retention.purge_expired(batch_size=rnd.randint(1, 7))
        after = rig.rows()
        assert after == [r for r in before if r[2] > rig.clock.now]
        assert removed == len(before) - len(after)
        assert all(n <= 7 for n in rig.deletes)
