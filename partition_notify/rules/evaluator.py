"""The rule evaluator ``serve`` runs: follow the event log, count inputs, fire once.

Each rule has its own cursor (``pn_rules.cursor_event_id``; 0 for a new rule,
so its first run reads the retained history). A run reads the events after
the cursor in batches and, per batch, in **one transaction** (the event
log's append with its ``in_txn`` hook, under the event counter's lock every
writer takes): appends the derived set-dones of the specs the batch
completed, records their firings (unique per rule and spec), stores the
labels counted for specs still open, drops the inputs of fired specs and
moves the cursor — only if the cursor is still where this run read it.
Another ``serve`` that got there first has moved it: this run's batch is
void (nothing written) and it re-reads from the new cursor. So a restart
between inputs loses nothing, out-of-order inputs are counted all the same,
and two evaluators publish one derived set-done per (rule, spec).

An input arriving after its spec fired is not counted: no second derived
set-done, unless a withdrawal of an input retracted it first
(:mod:`partition_notify.rules.retract`, each withdrawal a batch of its own). A spec a
set-done already covers when the rule completes is recorded as fired with
no event: the writer said it first.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from partition_notify.contract import (
    AnyMessage,
    DerivedFrom,
    DerivedInput,
    PartitionDoneRetractedMessage,
    PartitionWithdrawnMessage,
    SetDoneMessage,
    decode,
    spec,
)
from partition_notify.contract.messages import PN_TABLE
from partition_notify.core.errors import MalformedMessageError, PartitionNotifyError, PublishError
from partition_notify.publisher import Publisher
from partition_notify.rules.kinds import MAX_LABEL_CHARS, Kind, Quiet, build
from partition_notify.rules.quiet import QuietTimer
from partition_notify.rules.repositories import RuleRepository, RuleStateRepository
from partition_notify.rules.retract import Stale, retract, split
from partition_notify.rules.schema import RuleFiringRow, RuleInputRow
from partition_notify.rules.store import RuleInfo, RuleStore
from partition_notify.store import EventDraft, LoggedEvent, Store, TableInfo
from partition_notify.store.uow import UnitOfWork

log = logging.getLogger(__name__)
#: Events read per batch (one transaction each) and batches per rule per run:
#: a long history is caught up over several runs, none holding the lock long.
BATCH_EVENTS = 1000
MAX_BATCHES_PER_RUN = 20
#: Where each counted label came from: (input table, event id).
Origins = dict[str, tuple[str, int]]


@dataclass
class RunReport:
    derived: list[SetDoneMessage] = field(default_factory=list)
    retracted: list[PartitionDoneRetractedMessage] = field(default_factory=list)
    already_done: int = 0
    late_inputs: int = 0
    events_read: int = 0
    lost_races: int = 0
    #: Events purged from the log before a rule read them (a rule stuck longer
    #: than the cursor retention; the purge waits for every other rule).
    purged_unread: int = 0


@dataclass
class _Plan:
    """A batch's writes: specs completed (with their inputs), those a set-done already
    covered, and the labels to store for specs still open."""

    complete: dict[str, Origins] = field(default_factory=dict)
    covered: set[str] = field(default_factory=set)
    open_inputs: list[RuleInputRow] = field(default_factory=list)


def input_names(rule: RuleInfo) -> list[str]:
    """The other tables a rule reads (``db.table``), as its parameters list them."""
    listed = rule.params.get("inputs")
    return [t for t in listed if isinstance(t, str)] if isinstance(listed, list) else []


def definition(rule: RuleInfo, tables: dict[str, TableInfo], target: TableInfo) -> Kind:
    """The rule's :class:`Kind`, checked against the tables as they are now."""
    names = [target.qualified, *input_names(rule)]
    missing = [n for n in names if n not in tables]
    if missing:
        raise PartitionNotifyError(f"rule {rule.name!r} of {target.qualified}: input table "
                                   f"{missing[0]} is not registered")
    keys = {n: tables[n].partition_keys for n in names}
    return build(rule.kind, target.qualified, rule.params, keys)


def contributions(kind: Kind, events: list[LoggedEvent]) -> dict[str, Origins]:
    """Labels the events bring per derived spec (the first event of a label wins)."""
    seen: dict[str, Origins] = {}
    for ev in events:
        table = ev.headers.get(PN_TABLE)
        if table not in kind.inputs:
            continue
        try:
            msg: AnyMessage = decode(ev.body)
        except MalformedMessageError:  # not ours to judge here; the relay logs it
            continue
        if isinstance(msg, PartitionWithdrawnMessage):  # takes labels back: retract.py
            continue
        for derived, label in kind.contributions(table, msg):
            if len(label) <= MAX_LABEL_CHARS:
                seen.setdefault(derived, {}).setdefault(label, (table, ev.event_id))
    return seen


class Evaluator:
    def __init__(self, store: Store, publisher: Publisher) -> None:
        self.log_store = store
        self.publisher = publisher
        self.store = RuleStore(store)
        self.quiet = QuietTimer(store, publisher, self.store)
        self._busy = threading.Lock()
        # Rule id -> the failure logged last: a rule failing the same way is
        # logged once, not at every run (every PN_RULES_INTERVAL_SECONDS).
        self._failing: dict[int, str] = {}

    def run_once(self) -> RunReport:
        """Follow every rule up to the log's end (bounded per run). Thread-safe."""
        report = RunReport()
        with self._busy:
            rules = self.store.rules()
            tables = self._tables_for(rules)
            by_id = {t.id: t for t in tables.values()}
            purged_below = self.log_store.housekeeping.purged_below()
            for rule in rules:
                target = by_id.get(rule.table_id)
                if target is None:
                    continue
                self._check_gap(rule, target, purged_below, report)
                try:
                    kind = definition(rule, tables, target)
                    caught_up = self._follow(rule, kind, target, report)
                    if caught_up and isinstance(kind, Quiet):  # every input counted first
                        self._fire_quiet(rule, kind, target, report)
                except PartitionNotifyError as exc:
                    self._failed(rule, target, exc)
                else:
                    if self._failing.pop(rule.id, None) is not None:
                        log.info("rule %s of %s evaluates again", rule.name, target.qualified)
            live = {r.id for r in rules}  # bounded by the rules that exist
            self._failing = {k: v for k, v in self._failing.items() if k in live}
        return report

    def _failed(self, rule: RuleInfo, target: TableInfo, exc: PartitionNotifyError) -> None:
        if self._failing.get(rule.id) == str(exc):
            return
        self._failing[rule.id] = str(exc)
        log.warning("rule %s of %s: evaluation failed: %s (logged again only when the "
                    "cause changes)", rule.name, target.qualified, exc,
                    extra={"pn_event": "rule.failed"})

    @staticmethod
    def _check_gap(rule: RuleInfo, target: TableInfo, purged_below: int,
                   report: RunReport) -> None:
        """Say so when the purge took events this rule had not read (it carries on after)."""
        if rule.cursor_event_id + 1 < purged_below:
            lost = purged_below - 1 - rule.cursor_event_id
            report.purged_unread += lost
            log.warning("rule %s of %s: events %d to %d were purged before it read them "
                        "(it did not run for longer than PN_CURSOR_RETENTION_SECONDS); "
                        "specs they completed stay open", rule.name, target.qualified,
                        rule.cursor_event_id + 1, purged_below - 1,
                        extra={"pn_event": "rule.purged_unread"})

    def next_due(self) -> float | None:
        """When the next open spec of a quiet rule falls quiet (None: none open)."""
        due = [self.quiet.next_due(r, k) for r, k in self._quiet_rules()]
        return min((d for d in due if d is not None), default=None)

    def _tables_for(self, rules: list[RuleInfo]) -> dict[str, TableInfo]:
        """The rules' own tables and the input tables they name, by ``db.table``.

        Only those: serve runs this every tick, and reading the whole catalog
        (10,000 tables) held the GIL long enough to stall /ui in the same process."""
        catalog = self.log_store.catalog
        tables = {t.qualified: t for t in catalog.tables_by_id(r.table_id for r in rules).values()}
        named = {n for r in rules for n in input_names(r)} - tables.keys()
        refs = [(db, name) for db, _, name in (n.partition(".") for n in named) if name]
        tables.update({t.qualified: t for t in catalog.find_tables(refs).values()})
        return tables

    def _quiet_rules(self) -> list[tuple[RuleInfo, Quiet]]:
        rules = [r for r in self.store.rules() if r.kind == Quiet.kind]
        tables = self._tables_for(rules)
        by_id = {t.id: t for t in tables.values()}
        out = []
        for rule in rules:
            if rule.table_id in by_id:
                kind = definition(rule, tables, by_id[rule.table_id])
                assert isinstance(kind, Quiet)
                out.append((rule, kind))
        return out

    def _fire_quiet(self, rule: RuleInfo, kind: Quiet, target: TableInfo,
                    report: RunReport) -> None:
        derived, covered = self.quiet.fire_due(
            rule, kind, target, lambda s, origins: self._draft(target, rule, kind, s, origins))
        report.already_done += covered
        for msg in derived:
            report.derived.append(msg)
            log.info("derived set-done %s %s (rule %s, quiet for %d s)", target.qualified,
                     msg.spec, rule.name, kind.seconds, extra={"pn_event": "rule.derived"})

    def _follow(self, rule: RuleInfo, kind: Kind, target: TableInfo, report: RunReport) -> bool:
        """Read the rule's events in batches; True once it has read to the log's end."""
        cursor = rule.cursor_event_id
        for _ in range(MAX_BATCHES_PER_RUN):
            read = self.log_store.log.events_after(cursor, BATCH_EVENTS)
            if not read:
                return True
            events, withdrawal = split(kind, read)
            report.events_read += len(events)
            try:
                if withdrawal:
                    report.retracted += retract(self.log_store, self.publisher, rule, kind,
                                                target, cursor, events[0])
                else:
                    self._batch(rule, kind, target, cursor, events, report)
            except Stale:
                report.lost_races += 1
                cursor = self.store.get(target, rule.name).cursor_event_id
                continue
            cursor = events[-1].event_id
            if len(read) < BATCH_EVENTS and len(events) == len(read):
                return True
        return False

    def _batch(self, rule: RuleInfo, kind: Kind, target: TableInfo, cursor: int,
               events: list[LoggedEvent], report: RunReport) -> None:
        last = events[-1].event_id
        seen = contributions(kind, events)
        if not seen:  # nothing counted: only the cursor moves
            with self.store.uow(write=True) as uow:
                if not RuleRepository(uow.session).move_cursor(rule.id, cursor, last):
                    raise Stale
            return
        plan = self._plan(rule, kind, target, seen, report)
        drafts = [self._draft(target, rule, kind, s, o) for s, o in plan.complete.items()
                  if s not in plan.covered]

        def in_txn(uow: UnitOfWork, messages: list[AnyMessage]) -> None:
            repo, state = RuleRepository(uow.session), RuleStateRepository(uow.session)
            if repo.cursor(rule.id) != cursor or state.fired(rule.id, list(plan.complete)):
                raise Stale
            now = self.log_store.clock()
            by_spec = {m.spec: m.event_id for m in messages if isinstance(m, SetDoneMessage)}
            for s in plan.complete:
                state.add_firing(RuleFiringRow(rule_id=rule.id, spec=s,
                                               event_id=by_spec.get(s), fired_at=now))
            state.drop_inputs(rule.id, list(plan.complete))
            state.add_inputs(plan.open_inputs)
            if not repo.move_cursor(rule.id, cursor, last):  # checked above; never expected
                raise Stale

        try:
            logged = self.publisher.append_and_deliver(drafts, in_txn=in_txn)
        except PublishError as exc:  # committed; the relay delivers them
            log.warning("derived set-done of rule %s logged; delivery pending: %s", rule.name, exc)
            logged = []
        report.already_done += len(plan.covered)
        for msg in logged:
            if isinstance(msg, SetDoneMessage):
                report.derived.append(msg)
                log.info("derived set-done %s %s (rule %s)", target.qualified, msg.spec,
                         rule.name, extra={"pn_event": "rule.derived"})

    def _plan(self, rule: RuleInfo, kind: Kind, target: TableInfo, seen: dict[str, Origins],
              report: RunReport) -> _Plan:
        """What a batch does, from what it saw and what is stored (read outside the lock;
        the transaction re-checks the cursor, so a stale plan writes nothing)."""
        fired, counted = self.store.state(rule.id, list(seen))
        late = sum(len(labels) for s, labels in seen.items() if s in fired)
        if late:  # decided: no second derived set-done (README, Completeness rules)
            log.info("rule %s of %s: %d input(s) after it fired, not counted", rule.name,
                     target.qualified, late, extra={"pn_event": "rule.late_input"})
        report.late_inputs += late
        plan = _Plan()
        for s, labels in seen.items():
            if s in fired:
                continue
            have = {**labels, **counted.get(s, {})}  # the stored (earlier) origin wins
            need = kind.required(s)
            if need <= have.keys():
                plan.complete[s] = {k: v for k, v in have.items() if k in need}
                continue
            plan.open_inputs.extend(
                RuleInputRow(rule_id=rule.id, spec=s, label=label, input_table=t, event_id=e,
                             created_at=self.log_store.clock())
                for label, (t, e) in labels.items() if label not in counted.get(s, {}))
        plan.covered = {s for s in plan.complete if self.log_store.retention.set_done_covering(
            target, spec.covering_specs(spec.parse(s)))}
        return plan

    def _draft(self, target: TableInfo, rule: RuleInfo, kind: Kind, derived: str,
               origins: Origins) -> EventDraft:
        done = spec.parse(derived)
        why = DerivedFrom(table=target.qualified, rule=rule.name, kind=kind.kind, inputs=[
            DerivedInput(table=t, value=label, eventId=e)
            for label, (t, e) in sorted(origins.items())]).model_dump(by_alias=True)

        def build_msg(event_id: int, seq: int, now: float) -> AnyMessage:
            return SetDoneMessage.model_validate({
                **self.publisher.common_fields(target, event_id, seq, now),
                "partitionSpec": done,
                "partitionSpecString": derived,
                "expiresAt": int(now + target.retention_seconds),
                "derivedFrom": why,
            })

        return EventDraft(target, build_msg)
