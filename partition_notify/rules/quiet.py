"""The quiet-period timer: fire a ``quiet`` rule's specs once no new partition came for N s.

The evaluator counts a quiet rule's inputs like any rule's (one row per new
partition of an open spec, stamped when ``serve`` counted it); a count never
completes it. After the rule's cursor reached the log's end, this timer fires
every open spec whose newest input is older than the quiet period: in **one
transaction** (the event log's append with its ``in_txn`` hook, under the lock
every writer takes) it re-checks that the spec has not fired, that no input was
counted since, and that no event the rule has not read yet brings one; then it
records the firing (unique per rule and spec), drops the inputs and appends the
derived set-done. Two ``serve`` processes: the second finds the firing (or the
inputs gone) and writes nothing. The rule's cursor is not moved here.
``serve`` plans its next run for the moment the next open spec falls quiet
(:meth:`QuietTimer.next_due`), as the deadline check does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from partition_notify.contract import AnyMessage, SetDoneMessage, decode, spec
from partition_notify.contract.messages import PN_TABLE
from partition_notify.core.errors import MalformedMessageError, PublishError
from partition_notify.publisher import Publisher
from partition_notify.rules.kinds import Quiet
from partition_notify.rules.repositories import RuleRepository, RuleStateRepository
from partition_notify.rules.schema import RuleFiringRow
from partition_notify.rules.store import RuleInfo, RuleStore
from partition_notify.store import EventDraft, Store, TableInfo
from partition_notify.store.uow import UnitOfWork

log = logging.getLogger(__name__)
#: Specs fired per rule per run; the rest fire at the next run (planned at once).
MAX_FIRES_PER_RUN = 100
#: Inputs named in a derived set-done's ``derivedFrom`` (the newest; bounds its size).
MAX_LISTED_INPUTS = 1000
#: Unread events checked inside the firing transaction; more: fire at the next run.
MAX_UNREAD = 1000
Origins = dict[str, tuple[str, int]]
Draft = Callable[[str, Origins], EventDraft]


class _NotQuiet(Exception):
    """Raised inside the firing transaction: the spec fired or got an input meanwhile."""


class QuietTimer:
    def __init__(self, store: Store, publisher: Publisher, rules: RuleStore) -> None:
        self.log_store = store
        self.publisher = publisher
        self.rules = rules

    def next_due(self, rule: RuleInfo, kind: Quiet) -> float | None:
        """When this rule's first open spec falls quiet (None: no open spec)."""
        with self.rules.uow() as uow:
            first = RuleStateRepository(uow.session).next_quiet(rule.id)
        return None if first is None else first + kind.seconds

    def fire_due(self, rule: RuleInfo, kind: Quiet, target: TableInfo,
                 draft: Draft) -> tuple[list[SetDoneMessage], int]:
        """(derived set-dones, specs a set-done already covered) of the specs now quiet."""
        quiet_since = self.log_store.clock() - kind.seconds
        with self.rules.uow() as uow:
            due = RuleStateRepository(uow.session).quiet_due(rule.id, quiet_since,
                                                              MAX_FIRES_PER_RUN)
        derived: list[SetDoneMessage] = []
        covered = 0
        for s in due:
            try:
                msg = self._fire(rule, kind, target, s, quiet_since, draft)
            except _NotQuiet:
                continue
            if msg is None:
                covered += 1
            else:
                derived.append(msg)
        return derived, covered

    def _fire(self, rule: RuleInfo, kind: Quiet, target: TableInfo, s: str,
              quiet_since: float, draft: Draft) -> SetDoneMessage | None:
        with self.rules.uow() as uow:  # read inside the session: rows expire at commit
            rows = sorted((r.event_id, r.label, r.input_table)
                          for r in RuleStateRepository(uow.session).inputs(rule.id, [s]))
        origins = {label: (t, e) for e, label, t in rows[-MAX_LISTED_INPUTS:]}
        covered = bool(self.log_store.retention.set_done_covering(
            target, spec.covering_specs(spec.parse(s))))
        drafts = [] if covered or not origins else [draft(s, origins)]

        def in_txn(uow: UnitOfWork, messages: list[AnyMessage]) -> None:
            state = RuleStateRepository(uow.session)
            last = state.last_input(rule.id, s)
            if state.fired(rule.id, [s]) or last is None or last > quiet_since:
                raise _NotQuiet
            if _unread_input(uow, RuleRepository(uow.session).cursor(rule.id), kind, s):
                raise _NotQuiet
            event_id = next((m.event_id for m in messages if isinstance(m, SetDoneMessage)),
                            None)
            state.add_firing(RuleFiringRow(rule_id=rule.id, spec=s, event_id=event_id,
                                           fired_at=self.log_store.clock()))
            state.drop_inputs(rule.id, [s])

        try:
            logged = self.publisher.append_and_deliver(drafts, in_txn=in_txn)
        except PublishError as exc:  # committed; the relay delivers it
            log.warning("derived set-done of rule %s logged; delivery pending: %s", rule.name, exc)
            return None
        return next((m for m in logged if isinstance(m, SetDoneMessage)), None)


def _unread_input(uow: UnitOfWork, cursor: int | None, kind: Quiet, s: str) -> bool:
    """True when an event after ``cursor`` brings ``s`` a partition (or cannot be checked)."""
    if cursor is None:
        return True  # the rule was removed meanwhile
    rows = uow.events.after(cursor, MAX_UNREAD + 1)
    if len(rows) > MAX_UNREAD:
        return True
    for _, _, _, body, headers, _ in rows:
        table = headers.get(PN_TABLE)
        if table not in kind.inputs:
            continue
        try:
            msg = decode(body)
        except MalformedMessageError:
            continue
        if any(derived == s for derived, _ in kind.contributions(table, msg)):
            return True
    return False
