"""The Airflow push sink of ``partition-notify serve``: set-done → partitioned asset event.

Each set-done of a mapped table becomes ``POST /api/v2/assets/events`` with
``asset_id``, ``partition_key`` (the spec's values in partition-key order,
``|``-joined; a coarser set-done gives a shorter key, see docs/schedulers.md)
and ``extra`` = messageId, eventId, revision, spec and ``key``, the delivery key
(:mod:`partition_notify.contract.keys`): an earlier send is found by it.

**One cursor per table.** Airflow does not de-duplicate asset events, so each
mapped table has a cursor in our store (``airflow-push:<url>#<db.table>``)
and an intent (the event id) written before each POST; after a crash the sink
asks Airflow whether that event went out (:meth:`AirflowClient.was_sent`)
before sending it again. A table that fails (Airflow down, an answer that
cannot be read yet) waits on its own; the others go on.

**Refusals for good** (:data:`~.push_client.PERMANENT_STATUSES`; a 404 only
after the asset's name was looked up again, since a re-created asset has a new
id) are dead-lettered at once (:mod:`partition_notify.store.push_letters`, this sink's table):
an ERROR log line naming the event, ``pn_airflow_push_dead_lettered`` counted,
the table moves on. ``partition-notify dead-letters --source airflow-push``
lists, redrives and discards them.

**One sink at a time.** The lease on the cursor ``airflow-push:<url>`` lets one
``serve`` push; a ``serve`` restarted on the same host takes over the lease of
its dead predecessor at once, another host waits for it to expire
(:attr:`AirflowPushSink.lease_seconds`).

Auth: a JWT from the auth manager's ``POST /auth/token`` (the simple auth
manager and FAB both serve it), renewed once on a 401. Only the standard
library is used: ``serve`` does not need Airflow installed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from partition_notify.integrations.airflow.push_client import AirflowClient
from partition_notify.integrations.airflow.push_owner import lease_owner, owner_is_gone
from partition_notify.integrations.airflow.push_settings import (
    ASSETS_EXAMPLE,
    AirflowPushSettings,
    load_push_settings,
    unregistered,
)
from partition_notify.integrations.shared import payload
from partition_notify.integrations.withdrawn import taken_back
from partition_notify.store import LoggedEvent, Store, TableInfo
from partition_notify.store.cursors import Cursor, Cursors
from partition_notify.store.push_letters import PushLetter, PushLetters

from partition_notify.contract import SetDoneMessage, decode
from partition_notify.contract.keys import delivery_key
from partition_notify.contract.messages import HCAT_EVENT, PARTITION_DONE, PN_MESSAGE_ID, PN_TABLE
from partition_notify.core.errors import (
    ConfigurationError,
    ConflictError,
    MalformedMessageError,
    PartitionNotifyError,
    PushRefused,
)

__all__ = ["AirflowClient", "AirflowPushSettings", "AirflowPushSink", "push_job"]

log = logging.getLogger(__name__)

#: A table that keeps failing logs one WARNING per this many seconds, not one per run.
WARN_EVERY_SECONDS = 60.0
#: Clock skew allowed between us and Airflow when looking for an earlier send.
SKEW_SECONDS = 300.0


class AirflowPushSink:
    """Pushes each mapped table's set-dones after its own cursor."""

    def __init__(self, store: Store, config: AirflowPushSettings,
                 client: AirflowClient | None = None) -> None:
        if not config.url:
            raise ConfigurationError("PN_AIRFLOW_URL is not set")
        self.store = store
        self.config = config
        pw = config.password.get_secret_value() if config.password else None
        self.client = client or AirflowClient(config.url, config.username, pw,
                                              config.timeout_seconds)
        self.cursors = Cursors(store)
        self.letters = PushLetters(store)
        self.cursor = f"airflow-push:{config.url.rstrip('/')}"
        self.owner = lease_owner()
        # Long enough for one POST and a settle look-up, renewed before each send.
        self.lease_seconds = 3 * config.timeout_seconds + 5
        self._assets: dict[str, int] = {}
        self._tables: dict[str, TableInfo] = {}
        self.sent = self.recovered = self.dead_lettered = 0
        #: Tables whose push failed in the last run, with the error (they retry next run).
        self.failures: dict[str, str] = {}
        self._warned: dict[str, float] = {}  # table -> when its last WARNING was logged

    def table_cursor(self, table: str) -> str:
        return f"{self.cursor}#{table}"

    def _asset(self, table: str) -> int:
        if table not in self._assets:
            ref = self.config.assets[table]
            self._assets[table] = ref if isinstance(ref, int) else (
                int(ref) if ref.isdigit() else self.client.asset_id(ref))
        return self._assets[table]

    def _table(self, qualified: str) -> TableInfo:
        if qualified not in self._tables:
            db, name = qualified.split(".", 1)
            self._tables[qualified] = self.store.catalog.get_table(db, name)
        return self._tables[qualified]

    # -- one run ---------------------------------------------------------------
    def run_once(self) -> int:
        """Push what is after each table's cursor (one batch each); returns events sent.

        Returns 0 at once while another live process holds the lease.
        """
        self.cursors.open(self.cursor)
        if not self._claim():
            return 0
        try:
            end = self._open_table_cursors()
            self.client.token()  # wrong credentials fail the run, not each table
            self.failures = {}
            sent = sum(self._guarded(t, self._run_table, t, end) for t in self.config.assets)
            sent += self._redrive()
            self.sent += sent
            return sent
        finally:
            self.cursors.release(self.cursor, self.owner)

    def _guarded(self, table: str, fn: Callable[..., int], *args: object) -> int:
        """``fn(*args)``; a failure is logged and recorded for ``table`` alone."""
        try:
            return fn(*args)
        except ConflictError:
            raise  # the lease was lost: this process must stop sending
        except PartitionNotifyError as exc:
            self.failures[table] = str(exc)
            if self._due_warning(table):
                log.warning("Airflow push of %s failed (retried every run, logged once a "
                            "minute; other tables go on): %s", table, exc,
                            extra={"pn_event": "airflow_push.failed", "table": table})
            return 0

    def _due_warning(self, table: str) -> bool:
        """At most one WARNING a minute per table while it keeps failing or waiting."""
        now = self.store.clock()
        if now - self._warned.get(table, -WARN_EVERY_SECONDS) < WARN_EVERY_SECONDS:
            return False
        self._warned[table] = now
        return True

    def _open_table_cursors(self) -> int:
        """Create missing table cursors where the sink-wide cursor stands.

        The sink-wide cursor then moves to the log's end: a table mapped later
        starts there. A sink of an older version (one cursor for all tables)
        hands its position and its intent to the tables here. Returns the
        log's end as read first.
        """
        top = self.cursors.open(self.cursor)
        end = self.store.log.max_event_id()
        for table in self.config.assets:
            self.cursors.open(self.table_cursor(table), start=top.event_id)
        if top.pending_event_id is not None and top.pending_since is not None:
            ev = self._logged(top.pending_event_id)
            owner = str(ev.headers.get(PN_TABLE, "")) if ev is not None else ""
            if owner in self.config.assets:
                self.cursors.mark_pending(self.table_cursor(owner), top.pending_event_id,
                                          since=top.pending_since)
        self.cursors.advance(self.cursor, end)
        return end

    def _run_table(self, table: str, end: int) -> int:
        """Push one batch of ``table``; a table with nothing more up to ``end`` moves there.

        Moving a quiet table's cursor to ``end`` keeps its next read a short
        range of the event-id index instead of a scan from long ago.
        """
        name = self.table_cursor(table)
        cur = self.cursors.open(name)
        if cur.pending_event_id is not None and not self._settle(table, cur):
            return 0
        cur = self.cursors.open(name)
        info = self._table(table)
        events = self.store.log.table_events_after(info.id, cur.event_id, self.config.batch_size)
        sent, undone = 0, taken_back(events)  # withdrawn later in this read: no run
        for ev in events:
            msg = None if ev.event_id in undone else _set_done(ev)
            if msg is None:
                continue
            self._renew()
            self.cursors.mark_pending(name, ev.event_id)
            try:
                self._send(table, msg)
                sent += 1
            except PushRefused as exc:
                self._dead_letter(table, ev.event_id, str(exc))
            self.cursors.advance(name, ev.event_id)
        last = events[-1].event_id if events else cur.event_id
        target = max(end, last) if len(events) < self.config.batch_size else last
        if target > cur.event_id:
            self.cursors.advance(name, target)
        return sent

    def _send(self, table: str, msg: SetDoneMessage) -> None:
        info = self._table(table)
        key = str(payload(msg, info.partition_keys)["partition_key"])
        extra = {"messageId": msg.message_id, "eventId": msg.event_id,
                 "revision": msg.revision, "spec": msg.spec, "key": delivery_key(msg)}
        try:
            self.client.post_event(self._resolved(table), key, extra)
        except PushRefused as exc:
            if exc.status != 404 or not self._refresh(table):
                raise
            self.client.post_event(self._resolved(table), key, extra)

    def _resolved(self, table: str) -> int:
        """The asset id; an asset name Airflow does not know (any more) is a refusal."""
        try:
            return self._asset(table)
        except ConfigurationError as exc:
            raise PushRefused(str(exc), 404) from exc

    def _refresh(self, table: str) -> bool:
        """Look a named asset up again after a 404: True if its id changed."""
        ref = self.config.assets[table]
        if isinstance(ref, int) or ref.isdigit():
            return False
        old = self._assets.pop(table, None)
        new = self._resolved(table)
        log.info("Airflow push: asset %r of %s is now id %d (was %s)", ref, table, new, old)
        return new != old

    def _dead_letter(self, table: str, event_id: int, error: str) -> None:
        self.letters.record(self.cursor, event_id, table, error)
        self.dead_lettered += 1
        log.error("Airflow push: dead-lettered event %d of table %s: %s (list, redrive or "
                  "discard it: partition-notify dead-letters list --source airflow-push)",
                  event_id, table, error,
                  extra={"pn_event": "airflow_push.dead_lettered", "event_id": event_id,
                         "table": table})

    # -- leases ----------------------------------------------------------------
    def _claim(self) -> bool:
        if self.cursors.claim(self.cursor, self.owner, self.lease_seconds):
            return True
        holder = self.cursors.open(self.cursor).lease_owner
        if holder is None or holder == self.owner or not owner_is_gone(holder):
            return False
        log.info("Airflow push: taking over the lease of %s (that process is gone)", holder)
        return self.cursors.take_over(self.cursor, holder, self.owner, self.lease_seconds)

    def _renew(self) -> None:
        if not self.cursors.claim(self.cursor, self.owner, self.lease_seconds):
            raise ConflictError(f"cursor {self.cursor!r}: lease lost to another process")

    # -- recovery --------------------------------------------------------------
    def _logged(self, event_id: int) -> LoggedEvent | None:
        logged = self.store.log.events_after(event_id - 1, 1)
        return logged[0] if logged and logged[0].event_id == event_id else None

    def _was_sent(self, table: str, ev: LoggedEvent, since: float) -> bool | None:
        """Matched by the delivery key (or, for events an older sink sent, the messageId)."""
        message_id = str(ev.headers.get(PN_MESSAGE_ID, ""))
        msg = _set_done(ev)
        key = delivery_key(msg) if msg is not None else None
        return self.client.was_sent(self._resolved(table), message_id, since - SKEW_SECONDS,
                                    self.store.clock() + SKEW_SECONDS, key=key)

    def _settle(self, table: str, cur: Cursor) -> bool:
        """A crash left ``cur``'s pending event maybe-sent; False: this table waits."""
        assert cur.pending_event_id is not None and cur.pending_since is not None
        event_id, name = cur.pending_event_id, cur.name
        ev = self._logged(event_id)
        found = None if ev is None else self._was_sent(table, ev, cur.pending_since)
        if ev is None or found:
            if found:
                log.info("push sink: event %d already reached Airflow before the restart",
                         event_id)
                self.recovered += 1
            self.cursors.advance(name, event_id)
            return True
        if found is False:
            return True  # not sent: the batch sends it
        waited = self.store.clock() - cur.pending_since
        if waited < self.config.settle_timeout_seconds:
            self.failures[table] = f"cannot tell yet whether event {event_id} reached Airflow"
            if self._due_warning(table):
                log.warning("Airflow push of %s waits: Airflow cannot list event %d's asset "
                            "events yet (HTTP 500 while a DAG run they created is queued, "
                            "Airflow 3.3.2); %.0f s of %.0f s", table, event_id, waited,
                            self.config.settle_timeout_seconds,
                            extra={"pn_event": "airflow_push.unsettled", "table": table})
            return False
        self._dead_letter(table, event_id, (
            f"Airflow could not say within {self.config.settle_timeout_seconds:.0f} s whether "
            "this event reached it (its asset events answer HTTP 500): redrive it to send it "
            "again, discard it if Airflow has it"))
        self.cursors.advance(name, event_id)
        return True

    def _redrive(self) -> int:
        """Send the letters an operator redrove; each failure stays with its letter."""
        due = [d for d in self.letters.due(self.cursor, self.config.batch_size)
               if d.table in self.config.assets and d.table not in self.failures]
        return sum(self._guarded(d.table, self._send_letter, d) for d in due)

    def _send_letter(self, letter: PushLetter) -> int:
        ev = self._logged(letter.event_id)
        msg = None if ev is None else _set_done(ev)
        if ev is None or msg is None:
            self.letters.delivered(self.cursor, letter.event_id)  # gone from the log
            return 0
        # Always asked, not only after a cut redrive: a letter dead-lettered as "could
        # not say" may well be in Airflow, and a redrive must not start a second run.
        since = letter.sending_since if letter.sending_since is not None else msg.timestamp
        try:
            found = self._was_sent(letter.table, ev, since)
        except PushRefused:
            found = False  # the asset is gone: the send below dead-letters it again
        if found is None:
            return 0
        if found:
            self.recovered += 1
            self.letters.delivered(self.cursor, letter.event_id)
            return 0
        self._renew()
        self.letters.sending(self.cursor, letter.event_id)
        try:
            self._send(letter.table, msg)
        except PushRefused as exc:
            self._dead_letter(letter.table, letter.event_id, str(exc))
            return 0
        self.letters.delivered(self.cursor, letter.event_id)
        return 1


def _set_done(ev: LoggedEvent) -> SetDoneMessage | None:
    if ev.headers.get(HCAT_EVENT) != PARTITION_DONE:
        return None
    try:
        msg = decode(ev.body)
    except MalformedMessageError as exc:
        log.warning("push sink: skipping malformed event %d: %s", ev.event_id, exc)
        return None
    return msg if isinstance(msg, SetDoneMessage) else None


def push_job(store: Store, count_dead: Callable[[int], None],
             failed: Callable[[str, BaseException, str | None], None],
             count_unregistered: Callable[[int], None] | None = None,
             ) -> tuple[Callable[[], None], float] | None:
    """``serve``'s job (and its interval) when ``PN_AIRFLOW_URL`` is set, else None.

    ``count_dead(n)`` is told how many events each run dead-lettered,
    ``count_unregistered(n)`` how many mapped tables are not registered (metrics);
    ``failed`` is told of a failed run (``Runtime.failed``: the WARNING line and the
    record ``serve --once`` exits on). The run is retried at the next interval.
    """
    config = load_push_settings()
    if not config.url:
        return None
    if not config.assets:
        raise ConfigurationError(
            f"PN_AIRFLOW_URL is set but PN_AIRFLOW_ASSETS is empty: expected JSON like "
            f"{ASSETS_EXAMPLE}")
    sink = AirflowPushSink(store, config)
    try:
        missing, warn = unregistered(store, list(config.assets), warn=True), False
    except ConfigurationError:
        raise
    except PartitionNotifyError:  # the store is down at start: the first run checks
        missing, warn = list(config.assets), True

    def job() -> None:
        nonlocal missing, warn
        before = sink.dead_lettered
        try:
            if missing:  # read again only while some are missing: one query a run
                missing, warn = unregistered(store, missing, warn=warn), False
            if count_unregistered is not None:
                count_unregistered(len(missing))
            sink.run_once()
        except PartitionNotifyError as exc:
            failed("Airflow push failed (retried next run)", exc, "airflow_push.failed")
        finally:
            if sink.dead_lettered > before:
                count_dead(sink.dead_lettered - before)

    return job, config.interval_seconds
