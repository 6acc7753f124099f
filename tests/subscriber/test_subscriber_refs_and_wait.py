"""Which tables ``subscribe`` follows for a tuple, and waits that must read history.

Issue #10 items 8 and 11: a tuple of ``"db.table"`` refs is several tables;
``wait_for_set_done(..., timeout=0)`` still returns a retained covering
set-done (the CLI: ``wait --timeout 0`` exits 0).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from partition_notify.core.errors import InvalidNameError, WaitTimeout
from tests.store.helpers import Collector

ROOT = Path(__file__).resolve().parents[2]


def _two_tables(app) -> None:
    app.publisher.register_table("sales", "orders", ["ds"])
    app.publisher.register_table("sales", "returns", ["ds"])


def test_a_tuple_of_refs_follows_every_table(app):
    _two_tables(app)
    got = Collector()
    with app.subscriber() as sub:
        s = sub.subscribe(("sales.orders", "sales.returns"), got, history=False)
        assert s.tables == {("sales", "orders"), ("sales", "returns")}
        a = app.publisher.send_mark_set_done("sales", "orders", "ds=1")
        b = app.publisher.send_mark_set_done("sales", "returns", "ds=1")
        assert got.wait_for(lambda ms: len(ms) == 2, 10)
        assert [m.message_id for m in got.messages] == [a.message_id, b.message_id]


def test_pairs_and_mixed_iterables_keep_their_meaning(app):
    _two_tables(app)
    with app.subscriber() as sub:
        assert sub.subscribe(("sales", "orders"), history=False).tables == {("sales", "orders")}
        pairs = (("sales", "orders"), ("sales", "returns"))
        assert sub.subscribe(pairs, history=False).tables == {
            ("sales", "orders"), ("sales", "returns")}
        assert sub.subscribe(["sales.orders", ("sales", "returns")], history=False).tables == {
            ("sales", "orders"), ("sales", "returns")}
        assert sub.subscribe(("sales.returns",), history=False).tables == {("sales", "returns")}


@pytest.mark.parametrize("refs, needle", [
    (("sales", "sales.returns"), "('sales', 'sales.returns')"),
    (("sales", "orders", "returns"), "('sales', 'orders', 'returns')"),
    (("sales",), "'sales'"),
    ((), "at least one table"),
    ((("sales", "orders", "x"),), "('sales', 'orders', 'x')"),
    ((42, "orders"), "42"),
])
def test_ambiguous_refs_are_refused(app, refs, needle):
    _two_tables(app)
    with app.subscriber() as sub, pytest.raises(InvalidNameError) as err:
        sub.subscribe(refs, history=False)
    assert needle in str(err.value)


def test_wait_with_zero_timeout_returns_the_retained_set_done(app):
    app.publisher.register_table("w", "t", ["ds", "region"])
    done = app.publisher.send_mark_set_done("w", "t", "ds=1")
    with app.subscriber() as sub:
        got = sub.wait_for_set_done("w", "t", "ds=1/region=us", timeout=0)
        assert got.message_id == done.message_id
        with pytest.raises(WaitTimeout):
            sub.wait_for_set_done("w", "t", "ds=2", timeout=0)


def _cli(store_url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "partition_notify.cli", "--store-url", store_url, *argv],
        capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)


def test_cli_wait_timeout_zero_reads_history(app, store_url):
    app.publisher.register_table("w", "t", ["ds", "region"])
    done = app.publisher.send_mark_set_done("w", "t", "ds=1")
    ok = _cli(store_url, "wait", "w.t", "ds=1/region=us", "--timeout", "0")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout.splitlines()[0])["messageId"] == done.message_id
    missing = _cli(store_url, "wait", "w.t", "ds=2", "--timeout", "0")
    assert missing.returncode == 3, missing.stderr
    assert len(missing.stderr.splitlines()) == 1 and "Traceback" not in missing.stderr


def test_repeats_past_the_window_are_dropped_by_number(app, monkeypatch):
    """Every message of a followed topic arrives again, newest first, long after a
    de-dup window of 5 ids forgot them: none reaches the callback twice."""
    import partition_notify.subscriber.subscription as subscription_module
    from partition_notify.transports import RawMessage

    monkeypatch.setattr(subscription_module, "DEDUP_WINDOW", 5)
    app.publisher.register_table("w", "t", ["ds"])
    got = Collector()
    with app.subscriber() as sub:
        s = sub.subscribe("w.t", got, history=False)
        sent = [app.publisher.send_mark_set_done("w", "t", f"ds={i}") for i in range(30)]
        assert got.wait_for(lambda ms: len(ms) == 30, 10)
        for ev in reversed(app.store.log.events_after(0, 100)):
            sub._on_raw(RawMessage(ev.topic, {k: str(v) for k, v in ev.headers.items()},
                                   ev.body.encode()))
        marker = app.publisher.send_mark_set_done("w", "t", "ds=last")
        assert got.wait_for(lambda ms: ms[-1].message_id == marker.message_id, 10)
        assert [m.message_id for m in got.messages] == [m.message_id for m in [*sent, marker]]
        assert s.duplicates == 30 and sub.stats.duplicates == 30


def test_a_number_the_log_does_not_hold_does_not_move_the_mark(app):
    """A forged (or foreign) message far ahead in the sequence must not make the
    subscriber drop the genuine messages below it as repeats."""
    import uuid

    from partition_notify.transports import RawMessage

    from partition_notify.contract import SetDoneMessage, to_envelope

    app.publisher.register_table("w", "t", ["ds"])
    topic = app.store.catalog.get_table("w", "t").topic
    gaps: list[tuple[str, int, int]] = []
    got = Collector()
    with app.subscriber(on_gap=lambda *g: gaps.append(g)) as sub:
        sub.subscribe("w.t", got, history=False)
        forged = SetDoneMessage.model_validate({
            "server": "s", "db": "w", "table": "t", "timestamp": 1,
            "messageId": uuid.uuid4().hex, "eventId": 10**6, "topic": topic,
            "topicSeq": 10**6, "partitionSpec": {"ds": "x"}, "partitionSpecString": "ds=x"})
        env = to_envelope(forged)
        sub._on_raw(RawMessage(topic, env.headers, env.body))
        genuine = [app.publisher.send_mark_set_done("w", "t", f"ds={i}") for i in range(2)]
        assert got.wait_for(lambda ms: len(ms) == 3, 10)
        # The jump reads the log: a genuine one already committed may come first.
        ids = [m.message_id for m in got.messages]
        assert sorted(ids) == sorted([forged.message_id, *(m.message_id for m in genuine)])
        assert [m.topic_seq for m in got.messages if m.message_id != forged.message_id] == [1, 2]
        assert sub.stats.foreign == 1 and gaps == []
