"""Airflow triggers: one set-done for a deferred sensor, and a forward-reading event trigger.

Our Subscriber and Store block (sockets, SQL), so nothing of theirs runs on
the triggerer's event loop: set-up runs in a worker thread with a deadline
(``asyncio.to_thread``), and messages come back from the subscriber's
dispatcher or the log follower thread through ``loop.call_soon_threadsafe``.
Every trigger of a process shares one connection per partition-notify
connection (:mod:`partition_notify.integrations.shared`).

Airflow imports a trigger's module on the triggerer's event loop (3.3.2:
``TriggerRunner.get_trigger_by_classpath``), so this module imports only
Airflow's trigger base and our errors at load time; the store, subscriber,
settings and contract modules (over a second under load) are imported by the
first set-up, in its worker thread (tests/integrations/test_airflow_trigger_import.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, TypeVar

from partition_notify.integrations.airflow._compat import (
    BaseEventTrigger,
    BaseTrigger,
    TriggerEvent,
)
from partition_notify.integrations.airflow.connection import aget_settings

from partition_notify.core import limits
from partition_notify.core.errors import HistoryTimeout, PartitionNotifyError, UnknownTableError

if TYPE_CHECKING:
    from partition_notify.integrations.follow import LogFollower, Watch
    from partition_notify.store import TableInfo
    from partition_notify.subscriber.subscription import Subscription

    from partition_notify.contract import AnyMessage, SetDoneMessage

DONE = "done"
TIMEOUT = "timeout"
ERROR = "error"
_Armed = TypeVar("_Armed")


async def _when_registered(arm: Callable[[], _Armed], deadline: float | None,
                           on_cancel: Callable[[asyncio.Future[_Armed]], None] | None = None,
                           ) -> _Armed | None:
    """``arm()`` in a worker thread once its table is registered; None at ``deadline``.

    A DAG may be deployed before its producer's first run registers the table, as
    ``wait`` and ``tail`` allow: the catalog is read again every
    ``REGISTRATION_POLL_SECONDS`` (the subscriber's), each read one short hop to a
    worker thread, the wait in between on the loop. ``on_cancel``: given the arming
    still running when the trigger is cancelled (to close what it opens)."""
    while True:
        arming = asyncio.ensure_future(asyncio.to_thread(arm))
        try:
            return await asyncio.shield(arming)
        except asyncio.CancelledError:
            if on_cancel is not None:
                arming.add_done_callback(on_cancel)
            raise
        except UnknownTableError:
            # arm() loaded the subscriber module: a look-up, not an import on the loop.
            from partition_notify.subscriber.subscriber import REGISTRATION_POLL_SECONDS

            left = REGISTRATION_POLL_SECONDS if deadline is None else deadline - time.time()
            if left <= 0:
                return None
            await asyncio.sleep(min(left, REGISTRATION_POLL_SECONDS))


def _number_or_as_is(value: object) -> object:
    """A deadline as a float when it reads as one (text included), else as given."""
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        try:
            return float(value)
        except ValueError:
            pass
    return value


def _resolve(fut: asyncio.Future[AnyMessage], msg: AnyMessage) -> None:
    if not fut.done():
        fut.set_result(msg)


def _close_when_armed(done: asyncio.Future[tuple[TableInfo, Subscription, str]]) -> None:
    if not done.cancelled() and done.exception() is None:
        done.result()[1].close()


class PartitionSetDoneTrigger(BaseTrigger):  # type: ignore[misc]
    """Fires once a set-done covering ``spec`` of ``table`` exists, or at ``deadline``.

    Runs the late-subscriber protocol (subscribe, history, de-dup); a coarser
    set-done satisfies the wait. ``deadline`` is absolute (epoch seconds), so a
    trigger moved to another triggerer keeps the sensor's timeout.
    """

    def __init__(
        self, table: str, spec: str, deadline: float, conn_id: str | None = None, **kwargs: object
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.spec = spec
        # Checked by run(), which can answer an error event: raising here fails the
        # triggerer's set-up with a traceback (and NaN or inf would never time out).
        self.deadline = _number_or_as_is(deadline)
        self.conn_id = conn_id

    def serialize(self) -> tuple[str, dict[str, object]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"table": self.table, "spec": self.spec, "deadline": self.deadline,
             "conn_id": self.conn_id},
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            result = await self._wait()
        except PartitionNotifyError as exc:
            yield TriggerEvent({"status": ERROR, "error": f"{type(exc).__name__}: {exc}"})
            return
        yield TriggerEvent(result)

    async def _wait(self) -> dict[str, object]:
        deadline = limits.epoch_seconds(self.deadline, field="deadline")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[AnyMessage] = loop.create_future()

        def on_message(msg: AnyMessage) -> None:  # the subscriber's dispatcher thread
            loop.call_soon_threadsafe(_resolve, fut, msg)

        settings = await aget_settings(self.conn_id)

        def arm() -> tuple[TableInfo, Subscription, str]:  # blocking: one worker-thread hop
            from partition_notify.integrations import shared

            from partition_notify.contract import spec

            db, name = shared.split_table(self.table)
            wanted = spec.coerce(self.spec)
            subscriber = shared.subscriber(settings)
            info = subscriber.store.catalog.get_table(db, name)
            try:
                sub = subscriber.watch_set_done(
                    db, name, wanted, on_message, timeout=settings.connect_timeout_seconds,
                    newest=True,  # history: the newest retained one, not the first done
                )
            except HistoryTimeout as late:  # still open: on_message gets it once merged
                sub = late.subscription
            return info, sub, spec.canonical(wanted)

        # Cancelled mid-subscribe: the subscription is closed once it exists.
        armed = await _when_registered(arm, deadline, _close_when_armed)
        if armed is None:
            return {"status": TIMEOUT, "table": self.table, "spec": self.spec,
                    "registered": False}
        info, sub, canonical = armed
        # Loaded by arm(): these are look-ups now, not imports on the loop.
        from partition_notify.integrations import shared

        from partition_notify.contract import SetDoneMessage

        shared.armed.add(1)
        try:
            left = max(deadline - time.time(), 0.0)
            msg = await asyncio.wait_for(fut, timeout=left)
            assert isinstance(msg, SetDoneMessage)  # watch_set_done accepts only those
        except TimeoutError:
            return {"status": TIMEOUT, "table": info.qualified, "spec": canonical}
        finally:
            shared.armed.add(-1)
            sub.close()  # no I/O: marks it closed and forgets it
        return {"status": DONE, "message": shared.payload(msg, info.partition_keys)}


class PartitionSetDoneEventTrigger(BaseEventTrigger):  # type: ignore[misc]
    """One TriggerEvent per set-done of ``table`` after a durable cursor (for ``AssetWatcher``).

    Never asks "is X done?": it reads the event log forward from the cursor
    ``cursor`` kept in the partition-notify store (table of migration 0006),
    so a restarted triggerer resumes after the last event it handed over.
    ``spec`` optionally keeps only set-dones relevant to it (every key both
    name has the same value). A new cursor starts at the end of the log.
    """

    def __init__(
        self,
        table: str,
        spec: str | None = None,
        cursor: str | None = None,
        conn_id: str | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.spec = spec
        self.cursor = cursor or f"airflow:{table}:{spec or '*'}"
        self.conn_id = conn_id

    def serialize(self) -> tuple[str, dict[str, object]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"table": self.table, "spec": self.spec, "cursor": self.cursor,
             "conn_id": self.conn_id},
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[SetDoneMessage] = asyncio.Queue()

        # The log follower's thread, after this trigger's cursor moved past msg durably
        # (integrations/follow.py). The triggerer takes an event at the ``yield`` and
        # persists the asset event later, so no point of ours follows the persisting:
        # moved before the hand-over, the cursor never lets the same set-done out twice
        # (a triggerer killed before the generator resumed, a trigger reassigned while
        # its first triggerer still ran it); a triggerer dying between the move and
        # Airflow's commit loses that one event.
        def on_message(msg: SetDoneMessage) -> None:
            loop.call_soon_threadsafe(inbox.put_nowait, msg)
        settings = await aget_settings(self.conn_id)

        def arm() -> tuple[TableInfo, Watch, LogFollower]:  # blocking: one hop
            from partition_notify.integrations import shared
            from partition_notify.integrations.follow import Watch
            from partition_notify.store.cursors import Cursors

            from partition_notify.contract import spec

            db, name = shared.split_table(self.table)
            wanted = spec.coerce(self.spec) if self.spec else None
            store = shared.entry(settings).app.store
            # Opened first: a new cursor starts at the log's end, so the set-dones of a
            # table registered while this trigger waited for it are after it.
            start = Cursors(store).open(self.cursor)
            info = store.catalog.get_table(db, name)
            if wanted is not None:
                spec.check_against(wanted, info.partition_keys, full=False, table=info.qualified)
            watch = Watch(frozenset({info.qualified}), start.event_id, on_message, wanted,
                          cursor=self.cursor)
            return info, watch, shared.follower(settings)

        armed = await _when_registered(arm, None)
        assert armed is not None  # no deadline: it waits for the table as long as it runs
        info, watch, follower = armed
        from partition_notify.integrations import shared  # loaded by arm(): a look-up

        follower.add(watch)
        shared.armed.add(1)
        try:
            while True:
                msg = await inbox.get()
                yield TriggerEvent({"status": DONE, **shared.payload(msg, info.partition_keys)})
                follower.resume(watch)  # the triggerer took it: the next may be taken
        finally:
            shared.armed.add(-1)
            follower.remove(watch)
