"""The deadline checker: one verdict per expectation instance, across processes.

``check()`` is what ``serve`` runs at every deadline (and on an interval);
tests call it directly with their own clock. Each instance whose deadline
has passed gets exactly one verdict row (unique per expectation and logical
date). A late verdict is inserted in the transaction that appends the
``PARTITION_LATE`` event, under the event counter's lock every writer takes,
after re-checking that no covering set-done committed meanwhile: so two
``serve`` processes publish one late message, and never one for a spec that
was done first.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry, Counter, Gauge

from partition_notify.contract import (
    AnyMessage,
    PartitionLateMessage,
    PartitionLateRecoveredMessage,
    spec,
)
from partition_notify.core.errors import PartitionNotifyError, PublishError
from partition_notify.deadlines.schedule import Deadline, Instance, Schedule, render
from partition_notify.deadlines.store import (
    DONE_LATE,
    LATE,
    ON_TIME,
    AlreadyDecided,
    CheckInfo,
    DeadlineStore,
    ExpectationInfo,
)
from partition_notify.publisher import Publisher
from partition_notify.store import EventDraft, Store, TableInfo
from partition_notify.store.uow import UnitOfWork

log = logging.getLogger(__name__)


class DeadlineMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry or CollectorRegistry()
        self.late = Counter("pn_deadline_late", "PARTITION_LATE messages published", registry=r)
        self.recovered = Counter(
            "pn_deadline_recovered", "PARTITION_LATE_RECOVERED messages published", registry=r
        )
        self.on_time = Counter(
            "pn_deadline_on_time", "Instances covered by their deadline", registry=r
        )
        self.checks = Counter("pn_deadline_checks", "Deadline checks run", registry=r)
        self.done_late = Counter(
            "pn_deadline_done_late",
            "Instances covered after their deadline but before it was checked",
            registry=r,
        )
        self.late_open = Gauge(
            "pn_deadline_late_open",
            "Instances late now (declared late, no set-done covering them yet), per table; "
            "a table with none has no series",
            ["table"], registry=r,
        )
        self._shown: set[str] = set()

    def show_open(self, late: Mapping[str, int]) -> None:
        """Set :attr:`late_open` to ``late`` (table -> instances late now), dropping the
        series of tables no longer late: the label set stays as small as what is late.
        Removed one by one, not cleared: a scrape in between must not see none late."""
        for table, count in late.items():
            self.late_open.labels(table=table).set(count)
        for gone in self._shown - late.keys():
            self.late_open.remove(gone)
        self._shown = set(late)


@dataclass
class CheckReport:
    late: list[PartitionLateMessage] = field(default_factory=list)
    recovered: list[PartitionLateRecoveredMessage] = field(default_factory=list)
    on_time: int = 0
    done_late: int = 0
    decided_elsewhere: int = 0


class _Covered(Exception):
    """Raised inside the late transaction: a covering set-done committed first."""


class DeadlineChecker:
    def __init__(
        self,
        store: Store,
        publisher: Publisher,
        *,
        lookback_seconds: float,
        clock: Callable[[], float] | None = None,
        metrics: DeadlineMetrics | None = None,
    ) -> None:
        self.log_store = store
        self.publisher = publisher
        self.clock = clock or store.clock
        self.metrics = metrics or DeadlineMetrics()
        self.lookback = lookback_seconds
        self.store = DeadlineStore(store)
        self._busy = threading.Lock()

    def check(self) -> CheckReport:
        """Decide every instance whose deadline passed; publish recoveries. Thread-safe."""
        report = CheckReport()
        with self._busy:
            now = self.clock()
            exps = self.store.expectations()
            # The expectations' tables only: not the whole catalog every tick.
            tables = self.log_store.catalog.tables_by_id(e.table_id for e in exps)
            for exp in exps:
                info = tables.get(exp.table_id)
                if info is not None:
                    self._check_expectation(exp, info, now, report)
            self._recover(tables, report)
        self.metrics.checks.inc()
        return report

    def next_deadline(self) -> float | None:
        """Epoch seconds of the next deadline of any expectation."""
        after = _dt(self.clock())
        best: float | None = None
        for exp in self.store.expectations():
            nxt = _schedule(exp).next_deadline(after)
            if nxt is not None and (best is None or nxt.timestamp() < best):
                best = nxt.timestamp()
        return best

    # -- deciding -------------------------------------------------------------
    def _check_expectation(
        self, exp: ExpectationInfo, info: TableInfo, now: float, report: CheckReport
    ) -> None:
        # A new expectation judges only deadlines after it existed: none of the past.
        start = max(now - self.lookback, exp.created_at)
        decided = self.store.decided(exp.id, start)
        for inst in _schedule(exp).instances(_dt(start), _dt(now)):
            if inst.key not in decided:
                try:
                    self._decide(exp, info, inst, report)
                except PartitionNotifyError as exc:
                    log.warning("deadline check of %s %s failed: %s", exp.name, inst.key, exc)

    def _decide(
        self, exp: ExpectationInfo, info: TableInfo, inst: Instance, report: CheckReport
    ) -> None:
        wanted = spec.parse(render(exp.spec_template, inst.logical_date, inst.interval_end))
        canon = spec.canonical(wanted)
        candidates = spec.covering_specs(wanted)
        due = inst.deadline.timestamp()
        if self._covered_verdict(exp, info, inst, canon, candidates, report):
            return

        def in_txn(uow: UnitOfWork, messages: list[AnyMessage]) -> None:
            rows = self.store.covered_in(uow, info.id, candidates, self.log_store.clock())
            if self.log_store.retention.check.valid(info, candidates, rows):  # not a damaged one
                raise _Covered
            self.store.record(uow, exp.id, inst.key, canon, due, LATE, messages[0].event_id)

        draft = self._late_draft(info, exp, inst, wanted, canon)
        try:
            logged = self.publisher.append_and_deliver([draft], in_txn=in_txn)
        except AlreadyDecided:
            report.decided_elsewhere += 1
            return
        except _Covered:
            self._covered_verdict(exp, info, inst, canon, candidates, report)
            return
        except PublishError as exc:
            # Logged with the verdict; the relay delivers it.
            log.warning("PARTITION_LATE for %s is logged; delivery pending: %s", canon, exc)
            logged = []
        msg = logged[0] if logged else None
        if isinstance(msg, PartitionLateMessage):
            report.late.append(msg)
        self.metrics.late.inc()
        log.warning(
            "partition late: %s %s (expectation %s, logical date %s, deadline %s)",
            info.qualified, canon, exp.name, inst.key, inst.deadline.isoformat(),
            extra={"pn_event": "deadline.late", "pn_table": info.qualified, "pn_spec": canon},
        )

    def _covered_verdict(
        self, exp: ExpectationInfo, info: TableInfo, inst: Instance, canon: str,
        candidates: list[str], report: CheckReport,
    ) -> bool:
        # Retention first (indexed); the event log when retention let the set-done go.
        bodies = (self.log_store.retention.set_done_covering(info, candidates)
                  or self.store.set_done_logged(info.id, candidates))
        if not bodies:
            return False
        first = min(json.loads(b).get("timestampMs", 0) / 1000.0 for b in bodies)
        due = inst.deadline.timestamp()
        outcome = ON_TIME if first <= due else DONE_LATE
        if not self.store.record_alone(exp.id, inst.key, canon, due, outcome):
            report.decided_elsewhere += 1
        elif outcome == ON_TIME:
            report.on_time += 1
            self.metrics.on_time.inc()
        else:
            report.done_late += 1
            self.metrics.done_late.inc()
        return True

    # -- recovering -----------------------------------------------------------
    def _recover(self, tables: dict[int, TableInfo], report: CheckReport) -> None:
        exps = {e.id: e for e in self.store.expectations()}
        for check in self.store.open_late():
            exp = exps.get(check.expectation_id)
            info = tables.get(exp.table_id) if exp else None
            if exp is None or info is None:
                continue
            try:
                self._recover_one(exp, info, check, report)
            except PartitionNotifyError as exc:
                log.warning("recovery check of %s failed: %s", check.spec, exc)

    def _recover_one(
        self, exp: ExpectationInfo, info: TableInfo, check: CheckInfo, report: CheckReport
    ) -> None:
        wanted = spec.parse(check.spec)
        candidates = spec.covering_specs(wanted)
        after = check.late_event_id or 0
        bodies = (self.log_store.retention.set_done_covering(info, candidates)
                  or self.store.set_done_logged(info.id, candidates, after=after))
        if not bodies:
            return
        done = json.loads(bodies[0])

        def in_txn(uow: UnitOfWork, messages: list[AnyMessage]) -> None:
            self.store.mark_recovered(uow, check.id, messages[0].event_id)

        def build(event_id: int, seq: int, now: float) -> AnyMessage:
            return PartitionLateRecoveredMessage.model_validate({
                **self.publisher.common_fields(info, event_id, seq, now),
                **_late_fields(exp, wanted, check.spec, check.logical_date, check.deadline_at),
                "setDoneEventId": done["eventId"],
                "lateBySeconds": int(done["timestampMs"] / 1000 - check.deadline_at),
            })

        try:
            logged = self.publisher.append_and_deliver([EventDraft(info, build)], in_txn=in_txn)
        except AlreadyDecided:
            report.decided_elsewhere += 1
            return
        except PublishError as exc:
            log.warning("PARTITION_LATE_RECOVERED for %s logged; delivery pending: %s",
                        check.spec, exc)
            logged = []
        if logged and isinstance(logged[0], PartitionLateRecoveredMessage):
            report.recovered.append(logged[0])
        self.metrics.recovered.inc()
        log.info("partition late, now done: %s %s (set-done event %s)", info.qualified,
                 check.spec, done["eventId"], extra={"pn_event": "deadline.recovered"})

    def _late_draft(self, info: TableInfo, exp: ExpectationInfo, inst: Instance,
                    wanted: spec.Spec, canon: str) -> EventDraft:
        def build(event_id: int, seq: int, now: float) -> AnyMessage:
            return PartitionLateMessage.model_validate({
                **self.publisher.common_fields(info, event_id, seq, now),
                **_late_fields(exp, wanted, canon, inst.key, inst.deadline.timestamp()),
            })

        return EventDraft(info, build)


def _late_fields(exp: ExpectationInfo, wanted: spec.Spec, canon: str, logical: str,
                 deadline: float) -> dict[str, object]:
    return {
        "expectation": exp.name,
        "partitionSpec": wanted,
        "partitionSpecString": canon,
        "logicalDate": logical,
        "deadline": int(deadline),
    }


def _schedule(exp: ExpectationInfo) -> Schedule:
    return Schedule(exp.cron, exp.timezone, Deadline.from_json(exp.deadline))


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)
