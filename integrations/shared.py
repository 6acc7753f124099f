"""One App and one Subscriber per connection, shared by everything in a process.

A triggerer runs hundreds of triggers in one process: they must share one
store engine and one broker connection, not open one each. Entries are keyed
by what makes a connection different (store URL, transport URL, user), so
two Airflow connection ids naming the same service share too. Entries live
as long as the process; :func:`close_all` is for tests and benchmarks.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from partition_notify.subscriber import Subscriber

from partition_notify.app import App, build_app
from partition_notify.contract import SetDoneMessage, spec
from partition_notify.contract.keys import delivery_key
from partition_notify.settings import Settings

if TYPE_CHECKING:
    from partition_notify.integrations.follow import LogFollower

_lock = threading.Lock()
_entries: dict[tuple[str, str, str | None], _Entry] = {}


@dataclass
class _Entry:
    app: App
    subscriber: Subscriber | None = None
    follower: LogFollower | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


def _key(settings: Settings) -> tuple[str, str, str | None]:
    return (settings.store_url, settings.transport_url, settings.broker_username)


def entry(settings: Settings) -> _Entry:
    """The process-wide entry for ``settings`` (blocking: opens the store once)."""
    key = _key(settings)
    with _lock:
        found = _entries.get(key)
        if found is None:
            found = _Entry(build_app(settings))
            _entries[key] = found
        return found


def subscriber(settings: Settings) -> Subscriber:
    """The shared Subscriber (one consumer connection) for ``settings``."""
    e = entry(settings)
    with e.lock:
        if e.subscriber is None:
            e.subscriber = e.app.subscriber()
        return e.subscriber


def follower(settings: Settings) -> LogFollower:
    """The shared log follower (one reader thread, one query per poll) for ``settings``."""
    from partition_notify.integrations.follow import LogFollower

    e = entry(settings)
    with e.lock:
        if e.follower is None:
            e.follower = LogFollower(e.app.store, settings.poll_interval_seconds,
                                         settings.cross_process_wakeups)
        return e.follower


def close_all() -> None:
    with _lock:
        entries = list(_entries.values())
        _entries.clear()
    for e in entries:
        if e.follower is not None:
            e.follower.close()
        if e.subscriber is not None:
            e.subscriber.close()
        e.app.close()


def split_table(table: object) -> tuple[str, str]:
    """``"db.table"`` → ``("db", "table")``, with the contract's name checks."""
    from partition_notify.contract import names
    from partition_notify.core.errors import InvalidNameError

    if not isinstance(table, str):  # trigger kwargs and sensor arguments come unchecked
        raise InvalidNameError(f"table must be a string db.table, got {type(table).__name__} "
                               f"{table!r:.80}")
    db, sep, name = table.partition(".")
    if not sep:
        raise InvalidNameError(f"table {table!r} must be written db.table")
    return names.db_name(db), names.table_name(name)


def partition_key(msg: SetDoneMessage, keys: Sequence[str]) -> str:
    """The scheduler-facing partition key: the set-done's values in key order, ``|``-joined.

    Keys the set-done leaves open (a coarser set-done) are left out, so
    ``datestamp=20110228`` done on a ``(datestamp, region)`` table gives
    ``"20110228"`` and ``datestamp=20110228/region=us`` gives ``"20110228|us"``.
    """
    ordered = spec.in_key_order(msg.partition_spec, keys)
    return "|".join(ordered.values())


def payload(msg: SetDoneMessage, keys: Sequence[str]) -> dict[str, object]:
    """What schedulers get for a set-done: JSON-safe, the same in every integration."""
    return {
        "db": msg.db,
        "table": msg.table,
        "spec": msg.spec,
        "partition": spec.in_key_order(msg.partition_spec, keys),
        "partition_key": partition_key(msg, keys),
        "messageId": msg.message_id,
        "eventId": msg.event_id,
        "revision": msg.revision,
        "timestamp": msg.timestamp,
        # The same for every delivery of this set-done: schedulers de-duplicate on it.
        "key": delivery_key(msg),
    }


class Gauge:
    """A count others can wait on: how many scheduler watches are armed right now.

    Tests and the bench wait on it instead of sleeping ("publish once the
    1,000 triggers are subscribed").
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.value = 0

    def add(self, n: int) -> None:
        with self._cond:
            self.value += n
            self._cond.notify_all()

    def wait_for(self, at_least: int, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.value >= at_least, timeout)


armed = Gauge()
