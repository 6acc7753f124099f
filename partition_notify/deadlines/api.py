"""The Python API of expectations: ``app.deadlines.add(...)`` (CLI and HTTP call it too)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from partition_notify.contract import (
    PartitionLateMessage,
    SetDoneMessage,
    decode,
    names,
    spec,
)
from partition_notify.core.errors import (
    HistoryTimeout,
    InvalidSpecError,
    PartitionLateError,
    ValidationError,
    WaitTimeout,
)
from partition_notify.core.limits import excerpt
from partition_notify.deadlines.checker import DeadlineChecker, DeadlineMetrics
from partition_notify.deadlines.schedule import Deadline, Schedule, check_template, render
from partition_notify.deadlines.store import CheckInfo, DeadlineStore, ExpectationInfo
from partition_notify.publisher import Publisher
from partition_notify.store import Store, TableInfo
from partition_notify.subscriber import Subscriber

_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,127}")


@dataclass(frozen=True, slots=True)
class ExpectationView:
    table: str
    name: str
    spec_template: str
    cron: str
    timezone: str
    deadline: str
    next_deadline: str | None
    next_spec: str | None

    def to_json(self) -> dict[str, object]:
        return {
            "table": self.table, "name": self.name, "specTemplate": self.spec_template,
            "cron": self.cron, "timezone": self.timezone, "deadline": self.deadline,
            "nextDeadline": self.next_deadline, "nextSpec": self.next_spec,
        }


def check_json(c: CheckInfo) -> dict[str, object]:
    return {
        "logicalDate": c.logical_date, "spec": c.spec,
        "deadline": datetime.fromtimestamp(c.deadline_at, UTC).isoformat(),
        "outcome": c.outcome, "lateEventId": c.late_event_id,
        "recoveredEventId": c.recovered_event_id,
    }


class Deadlines:
    """Declare, list and remove expectations; run a check."""

    def __init__(self, store: Store, publisher: Publisher,
                 subscriber: Callable[[], Subscriber], *, lookback_seconds: float) -> None:
        """``subscriber`` opens a new Subscriber (the App's factory)."""
        self.log_store = store
        self.publisher = publisher
        self.subscriber = subscriber
        self.lookback_seconds = lookback_seconds
        self.store = DeadlineStore(store)

    def _table(self, db: str, table: str) -> TableInfo:
        return self.publisher.table(db, table)

    def add(self, db: str, table: str, *, name: str, spec_template: str, cron: str,
            timezone: str = "UTC", deadline: str) -> ExpectationView:
        """Validate everything (nothing is stored on bad input), then store."""
        info = self._table(db, table)
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValidationError(
                f"expectation name {name!r}: expected 1 to 128 of lower-case letters, digits "
                "and '_.-', starting with a letter or digit"
            )
        check_template(spec_template)
        schedule = Schedule(cron, timezone, Deadline.parse(deadline))
        # Render the next instance: the template must give a spec of this table.
        inst = next(schedule.instances(_now(self.log_store), _now(self.log_store, days=400)), None)
        if inst is None:
            raise ValidationError(f"schedule {excerpt(cron)} has no deadline in the next 400 days")
        rendered = render(spec_template, inst.logical_date, inst.interval_end)
        try:
            s = spec.parse(rendered)
            spec.check_against(s, info.partition_keys, full=False, table=info.qualified)
        except InvalidSpecError as exc:
            raise InvalidSpecError(
                f"spec template {excerpt(spec_template)} renders to {excerpt(rendered)}: "
                f"{exc}"
            ) from exc
        exp = self.store.add(info, name, spec_template, cron, timezone,
                             schedule.deadline.to_json())
        return self._view(info, exp)

    def expectations(
        self, db: str | None = None, table: str | None = None
    ) -> list[ExpectationView]:
        if db is not None and table is not None:
            # One table asked: read that one, not the whole catalog (the /ui board
            # asks on every render; 10,000 tables took 200 ms, bench/ui_render.py).
            info = self._table(db, table)
            return [self._view(info, e) for e in self.store.expectations([info.id])]
        tables = {t.id: t for t in self.log_store.catalog.tables()}
        return [self._view(tables[e.table_id], e) for e in self.store.expectations(None)]

    def remove(self, db: str, table: str, name: str) -> ExpectationView:
        info = self._table(db, table)
        return self._view(info, self.store.remove(info, name))

    def status(self, db: str, table: str, name: str, limit: int = 20) -> list[dict[str, object]]:
        """The latest verdicts of one expectation, newest first."""
        exp = self.store.get(self._table(db, table), name)
        return [check_json(c) for c in self.store.recent([exp.id], limit)]

    def open_late(self, db: str, table: str) -> list[CheckInfo]:
        """Instances of ``table`` that are late and not yet covered."""
        info = self._table(db, table)
        ids = {e.id for e in self.store.expectations([info.id])}
        return [c for c in self.store.open_late() if c.expectation_id in ids]

    def wait_for_set_done(self, db: str, table: str, partial_spec: str,
                          timeout: float) -> SetDoneMessage:
        """Like ``Subscriber.wait_for_set_done``, but a late spec ends the wait.

        Raises :class:`PartitionLateError` when an open ``PARTITION_LATE``
        covers or is covered by the spec (already, or arriving while waiting),
        :class:`WaitTimeout` at the deadline. Subscribes first, then reads
        the store, then follows live (the late-subscriber protocol).
        """
        deadline = time.monotonic() + timeout
        with self.subscriber() as sub:
            # A table not registered yet is waited for, within the timeout.
            info = sub.wait_for_tables([(db, table)], timeout)[0]
            wanted = spec.coerce(partial_spec)
            spec.check_against(wanted, info.partition_keys, full=False, table=info.qualified)
            canon = spec.canonical(wanted)
            try:
                live = sub.subscribe((info.db, info.name), history=False)
            except HistoryTimeout as late:  # open still: answers within this deadline
                live = late.subscription
            # The newest: a set done again carries the newer revision.
            body = self.log_store.retention.newest_covering(info, spec.covering_specs(wanted))
            if body is not None:
                done = decode(body.encode())
                assert isinstance(done, SetDoneMessage)
                return done
            for c in self.open_late(info.db, info.name):
                if _related(spec.parse(c.spec), wanted):
                    raise PartitionLateError(
                        f"{info.qualified} {c.spec} is late (deadline "
                        f"{datetime.fromtimestamp(c.deadline_at, UTC).isoformat()}, logical date "
                        f"{c.logical_date}); waiting for {canon!r}", c)
            while (left := deadline - time.monotonic()) > 0:
                msg = live.get(timeout=left)
                if isinstance(msg, SetDoneMessage) and spec.covers(msg.partition_spec, wanted):
                    return msg
                if isinstance(msg, PartitionLateMessage) and _related(msg.partition_spec, wanted):
                    raise PartitionLateError(
                        f"{info.qualified} {msg.spec} is late (deadline "
                        f"{datetime.fromtimestamp(msg.deadline, UTC).isoformat()}, logical date "
                        f"{msg.logical_date}); waiting for {canon!r}", msg)
        raise WaitTimeout(f"no set-done covering {canon!r} for {info.qualified} "
                          f"within {timeout:g} s")

    def checker(self, *, clock: Callable[[], float] | None = None,
                metrics: DeadlineMetrics | None = None,
                lookback_seconds: float | None = None) -> DeadlineChecker:
        """A checker (``serve`` runs one); ``clock`` lets tests move time."""
        return DeadlineChecker(self.log_store, self.publisher, clock=clock, metrics=metrics,
                               lookback_seconds=lookback_seconds or self.lookback_seconds)

    def _view(self, info: TableInfo, e: ExpectationInfo) -> ExpectationView:
        schedule = Schedule(e.cron, e.timezone, Deadline.from_json(e.deadline))
        inst = next(schedule.instances(_now(self.log_store), _now(self.log_store, days=400)), None)
        return ExpectationView(
            info.qualified, e.name, e.spec_template, e.cron, e.timezone,
            schedule.deadline.text() if schedule.deadline.at is None else
            schedule.deadline.at.strftime("%H:%M"),
            inst.deadline.isoformat() if inst else None,
            render(e.spec_template, inst.logical_date, inst.interval_end) if inst else None,
        )


def _now(store: Store, days: int = 0) -> datetime:
    return datetime.fromtimestamp(store.clock() + days * 86400, UTC)


def _related(late: dict[str, str], wanted: dict[str, str]) -> bool:
    """A late spec concerns a wait when either covers the other."""
    return spec.covers(late, wanted) or spec.covers(wanted, late)


def table_ref(ref: str) -> tuple[str, str]:
    db, sep, name = ref.partition(".")
    if not sep:
        raise ValidationError(f"table {ref!r} must be written db.table")
    return names.db_name(db), names.table_name(name)
