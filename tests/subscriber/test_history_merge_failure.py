"""A history merge that fails in the dispatcher ends the waits on it with its error.

Defect (session 26): ``tail --timeout N`` and ``Subscription.messages(N)`` wait past N
for a late history (``Subscription.history_merged``). If the merge raised inside the
dispatcher (which logs and goes on), the history was never merged: those waits never
ended, and ``subscribe`` itself waited its whole timeout for a merge that would not come.

How the merge is made to fail: a *store* failure during the merge's read of the event
log (a dropped table, a lock, an unreachable server) does not do it: the sequencer
catches the StoreError, logs it and merges anyway (subscriber/sequencer.py
catch_up_new). What escapes is anything else, e.g. a ``headers`` value of the log
that is not JSON (json.JSONDecodeError from store/log_reads.py). That is made here
by patching the store's ``events_after`` on the dispatcher thread only to raise it:
a unit test of our own control flow, on real SQLite and PostgreSQL stores.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from partition_notify.store.event_log import EventLog
from partition_notify.subscriber import Subscriber

from partition_notify.app import App
from partition_notify.cli.entry import main
from partition_notify.contract import AnyMessage
from partition_notify.core.errors import HistoryMergeError, HistoryTimeout

TIMEOUT = 5.0
BOUND = 30.0


def _failing_on_the_dispatcher(real: Callable[..., Any]) -> Callable[..., Any]:
    def events_after(self: EventLog, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == "pn-dispatcher":
            raise json.JSONDecodeError("Expecting value", "{", 1)
        return real(self, *args, **kwargs)
    return events_after


@pytest.fixture
def fail_merges(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Call it to make every later merge on a dispatcher fail."""
    return lambda: monkeypatch.setattr(EventLog, "events_after",
                                       _failing_on_the_dispatcher(EventLog.events_after))


@pytest.fixture
def subscriber(app: App) -> Iterator[Subscriber]:
    app.publisher.register_table("db", "busy", ["ds"])
    app.publisher.register_table("db", "t", ["ds"])
    app.publisher.send_mark_set_done("db", "t", {"ds": "old"})
    s = Subscriber(app.store, app.transport, timeout_seconds=TIMEOUT)
    yield s
    s.close()


def _says_merge_failed(err: BaseException) -> None:
    assert isinstance(err, HistoryMergeError), repr(err)
    text = str(err)
    assert text.startswith("history of db.t could not be merged: "), text
    assert err.tables == ("db.t",)
    assert "JSONDecodeError" in text and "subscribe again" in text, text


def test_subscribe_whose_merge_fails_raises_the_merge_error_not_a_timeout(
        app: App, subscriber: Subscriber, fail_merges: Callable[[], None]) -> None:
    fail_merges()
    with pytest.raises((HistoryMergeError, HistoryTimeout)) as raised:
        subscriber.subscribe("db.t")
    _says_merge_failed(raised.value)


def test_messages_after_a_history_timeout_ends_with_the_merge_error(
        app: App, subscriber: Subscriber, fail_merges: Callable[[], None]) -> None:
    entered, release = threading.Event(), threading.Event()

    def slow(_msg: AnyMessage) -> None:  # holds the dispatcher: the history is late
        entered.set()
        release.wait(BOUND)

    subscriber.subscribe("db.busy", slow, history=False)
    app.publisher.send_mark_set_done("db", "busy", {"ds": "x"})
    assert entered.wait(BOUND), "the busy callback never ran"
    fail_merges()  # db.busy's own (empty) history is merged by now
    outcome: list[object] = []
    try:
        with pytest.raises(HistoryTimeout) as late:
            _subscribe_late(subscriber)
        sub = late.value.subscription

        def read() -> None:
            try:
                outcome.append([m.spec for m in sub.messages(timeout=0)])
            except Exception as exc:
                outcome.append(exc)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()  # waits past its deadline for the late history
    finally:
        release.set()
    reader.join(BOUND)
    assert not reader.is_alive(), "messages(0) never ended: the failed merge was waited for"
    assert sub.history_merged
    assert isinstance(outcome[0], BaseException), outcome
    _says_merge_failed(outcome[0])
    assert sub.error is outcome[0]


def _subscribe_late(subscriber: Subscriber) -> object:
    subscriber.timeout = 0.2  # the dispatcher is busy: HistoryTimeout after 0.2 s
    try:
        return subscriber.subscribe("db.t")
    finally:
        subscriber.timeout = TIMEOUT


def test_tail_whose_merge_fails_exits_1_in_one_line(
        store_url: str, fail_merges: Callable[[], None], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from partition_notify import build_app

    with build_app(store_url=store_url) as app:
        app.publisher.register_table("db", "t", ["ds"])
        app.publisher.send_mark_set_done("db", "t", {"ds": "old"})
    fail_merges()
    monkeypatch.setenv("PN_CONNECT_TIMEOUT_SECONDS", "1")  # its subscribe's timeout
    code: list[int] = []
    tail = threading.Thread(target=lambda: code.append(main(
        ["--store-url", store_url, "tail", "db.t", "--history", "--timeout", "1"])),
        daemon=True)
    tail.start()
    tail.join(BOUND)
    assert not tail.is_alive(), "tail --timeout 1 never ended: the failed merge was waited for"
    err = capsys.readouterr().err.splitlines()
    assert code == [1], err
    assert err[-1].startswith("partition-notify tail: error: history of db.t could not be "
                              "merged: JSONDecodeError"), err
