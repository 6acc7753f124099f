"""subscriber/verify.py's LogCheck on a real store (SQLite and PostgreSQL): what the
event log holds decides, and a writer's burst costs one read, not one per message."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from partition_notify.subscriber import verify
from partition_notify.subscriber.inbox import decode_logged
from partition_notify.subscriber.verify import LogCheck, Verdict

from partition_notify.core.errors import StoreError


@dataclass
class _Errors:
    fill_errors: int = 0


class _CountingLog:
    """The store's own topic reads, counted (and failing on demand)."""

    def __init__(self, store, monkeypatch) -> None:
        self.calls = 0
        self.failing = False
        real = store.log.topic_ids_after

        def reads(*args, **kwargs):
            self.calls += 1
            if self.failing:
                raise StoreError("injected: the store does not answer")
            return real(*args, **kwargs)

        monkeypatch.setattr(store.log, "topic_ids_after", reads)


def _logged(app, db: str, n: int):
    app.publisher.register_table(db, "t", ["ds"])
    app.publisher.announce_partitions(db, "t", [f"ds={i}" for i in range(n)])
    topic = app.store.catalog.get_table(db, "t").topic
    events = app.store.log.topic_events_after(topic, 0, n + 10)
    return topic, [decode_logged(ev) for ev in events]


def test_a_burst_verifies_with_one_read_and_anything_else_is_foreign(app, monkeypatch):
    topic, msgs = _logged(app, "lc" + uuid.uuid4().hex[:8], 200)
    reads = _CountingLog(app.store, monkeypatch)
    check = LogCheck(app.store, _Errors())
    for m in msgs:  # one message a batch, as a quiet dispatcher takes them
        check.prefetch([m], lambda t: 0)
        assert check.verdict(m) is Verdict.GENUINE
    assert reads.calls == 1, "the read-ahead should have covered the whole commit"
    other_id = msgs[0].model_copy(update={"message_id": uuid.uuid4().hex})
    other_kind = msgs[1].model_copy(update={"event_type": "PARTITION_DONE"})
    beyond = msgs[-1].model_copy(update={"topic_seq": 201, "message_id": uuid.uuid4().hex})
    check.prefetch([other_id, other_kind, beyond], lambda t: 0)
    assert [check.verdict(m) for m in (other_id, other_kind, beyond)] == [Verdict.FOREIGN] * 3
    assert reads.calls == 2  # 201 was not known: read once for the batch
    assert topic == msgs[0].topic


def test_a_failed_read_is_unknown_not_foreign_and_counted(app, monkeypatch):
    _, msgs = _logged(app, "lc" + uuid.uuid4().hex[:8], 3)
    reads = _CountingLog(app.store, monkeypatch)
    errors = _Errors()
    check = LogCheck(app.store, errors)
    reads.failing = True
    check.prefetch(msgs, lambda t: 0)
    assert [check.verdict(m) for m in msgs] == [Verdict.UNKNOWN] * 3
    assert errors.fill_errors == 1  # one failed read, however many messages it held up
    reads.failing = False
    check.prefetch(msgs, lambda t: 0)
    assert [check.verdict(m) for m in msgs] == [Verdict.GENUINE] * 3


def test_the_cache_bound_never_drops_what_a_batch_just_read(app, monkeypatch):
    monkeypatch.setattr(verify, "MAX_CACHED", 5)
    db = "lc" + uuid.uuid4().hex[:8]
    _, first = _logged(app, db, 10)
    app.publisher.register_table(db, "u", ["ds"])
    app.publisher.announce_partitions(db, "u", [f"ds={i}" for i in range(10)])
    u = app.store.catalog.get_table(db, "u").topic
    second = [decode_logged(ev) for ev in app.store.log.topic_events_after(u, 0, 20)]
    check = LogCheck(app.store, _Errors())
    for _ in range(2):  # the second round starts over: past the bound, between batches
        check.prefetch(first + second, lambda t: 0)
        assert {check.verdict(m) for m in first + second} == {Verdict.GENUINE}


def test_a_topic_not_followed_reads_only_the_batch(app, monkeypatch):
    _, msgs = _logged(app, "lc" + uuid.uuid4().hex[:8], 20)
    reads = _CountingLog(app.store, monkeypatch)
    check = LogCheck(app.store, _Errors())
    check.prefetch(msgs[5:7], lambda t: None)
    assert [check.verdict(m) for m in msgs[5:7]] == [Verdict.GENUINE] * 2
    assert check.verdict(msgs[8]) is Verdict.FOREIGN  # not read: nothing kept past the batch
    assert reads.calls == 1
