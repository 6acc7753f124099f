"""Dead letters at the store level, SQLite and PostgreSQL: the lease around a refused
event, quarantine after the bounded attempts, redrive and discard, and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from partition_notify.store import Store
from partition_notify.store.dead_letters import DeadLetters

from partition_notify.app import App, build_app
from partition_notify.core.errors import ConflictError, NotFoundError
from tests.support.accounts import ROOT


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def logged(store_url: str) -> Iterator[tuple[App, Store, Clock, list[int]]]:
    """Events of two tables logged unpublished: a1 a2 b1 a3 b2 (ids 1..5)."""
    clock = Clock()
    app = build_app(store_url=store_url, transport_url="embedded://")
    store = Store(app.store.engine, clock=clock)
    for t in ("a", "b"):
        app.publisher.register_table("dl", t, ["n"])
    ids = []
    for t, n in (("a", 1), ("a", 2), ("b", 1), ("a", 3), ("b", 2)):
        info = app.store.catalog.get_table("dl", t)
        draft = app.publisher._partition_draft(info, {"n": str(n)}, None, None)
        ids += [m.event_id for m in store.log.append([draft])]  # published=False: broker down
    yield app, store, clock, ids
    app.close()


def _lease(store: Store) -> list[int]:
    return [e.event_id for e in store.log.lease_unpublished("r", 100, 30)]


def _reject(store: Store, event_id: int, max_attempts: int = 3) -> list[int]:
    dead = DeadLetters(store).record_rejections({event_id: "not authorized"},
                                                max_attempts=max_attempts, backoff=lambda n: 10.0)
    return [d.event_id for d in dead]


def test_refused_event_holds_back_its_topic_only(
        logged: tuple[App, Store, Clock, list[int]]) -> None:
    _, store, clock, (a1, _a2, b1, _a3, b2) = logged
    assert _reject(store, a1) == []
    # Not due: a1 waits, and its topic's later events wait behind it; table b flows.
    assert _lease(store) == [b1, b2]
    store.log.mark_published([b1, b2])
    clock.now += 10
    # Due: a1 alone is tried again; a2 and a3 still wait behind it.
    assert _lease(store) == [a1]
    assert store.log.relay_lag()[0] == 3


def test_quarantine_after_max_attempts_then_topic_flows(
        logged: tuple[App, Store, Clock, list[int]]) -> None:
    _, store, clock, (a1, a2, b1, a3, b2) = logged
    for attempt in range(1, 3):
        assert _reject(store, a1) == [], attempt
        clock.now += 10
    assert _reject(store, a1) == [a1]
    dead = DeadLetters(store).find()
    assert [(d.event_id, d.table, d.attempts, d.discarded) for d in dead] == [
        (a1, "dl.a", 3, False)]
    assert "not authorized" in dead[0].error
    assert _lease(store) == [a2, b1, a3, b2]
    assert store.log.relay_lag()[0] == 4  # the dead letter is not lag
    assert DeadLetters(store).find(("dl", "b")) == []


def test_redrive_and_discard(logged: tuple[App, Store, Clock, list[int]]) -> None:
    _, store, _clock, (a1, a2, b1, _a3, _b2) = logged
    letters = DeadLetters(store)
    for eid in (a1, b1):
        assert _reject(store, eid, max_attempts=1) == [eid]
    assert [d.event_id for d in letters.redrive([a1])] == [a1]
    assert [d.event_id for d in letters.find()] == [b1]
    assert _lease(store)[0] == a1  # pending again, first in line, counts reset
    assert letters.discard([b1])[0].event_id == b1
    assert letters.find()[0].discarded
    with pytest.raises(ConflictError, match="discarded"):
        letters.redrive([b1])
    assert letters.redrive(None) == []  # --all skips discarded ones
    with pytest.raises(NotFoundError, match=str(a2)):
        letters.discard([a2])
    assert b1 not in _lease(store)


def _cli(store_url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "partition_notify.cli", "--store-url",
                           store_url, "dead-letters", *argv], capture_output=True, text=True,
                          env=env, timeout=60, cwd=ROOT)


def test_cli(store_url: str, logged: tuple[App, Store, Clock, list[int]]) -> None:
    _, store, _, (a1, a2, b1, _a3, _b2) = logged
    for eid in (a1, b1):
        _reject(store, eid, max_attempts=1)
    out = _cli(store_url, "list", "--table", "dl.a")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["event_id"], r["table"], r["topic"]) for r in rows] == [(a1, "dl.a", "hcat.dl.a")]
    out = _cli(store_url, "discard", str(b1))
    assert out.returncode == 0 and json.loads(out.stdout)["action"] == "discarded"
    out = _cli(store_url, "redrive", "--all")
    assert out.returncode == 0 and [json.loads(x)["event_id"] for x in out.stdout.splitlines()] \
        == [a1]
    for argv, code, text in ((("redrive",), 2, "EVENT_IDs or --all"),
                             (("discard", "x1"), 2, "positive integer"),
                             (("discard", str(a2)), 1, "not dead letters"),
                             (("redrive", str(b1)), 1, "discarded")):
        out = _cli(store_url, *argv)
        assert out.returncode == code, (argv, out.stderr)
        assert text in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
