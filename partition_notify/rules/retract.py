"""Withdrawals seen by a rule: un-count the input, retract what it derived.

The evaluator hands each ``PARTITION_WITHDRAWN`` of an input table to
:func:`retract` as a batch of its own (:func:`split`), so adds before and after
it in the log are counted in order. For every derived spec the withdrawn
partitions or set-dones counted towards:

- not fired yet: the withdrawn labels are no longer counted;
- fired with a derived set-done: one ``PARTITION_DONE_RETRACTED`` (rule, spec,
  the withdrawn inputs) is appended, the derived set-done's retained row is
  removed (``is-set-done`` says "not done"), the firing is deleted and the
  other inputs it counted are counted again, so re-announcing the withdrawn
  input makes the rule derive the spec again (a new event id);
- fired with no event (a writer's own set-done covered it first): left alone,
  the writer's set-done is the writer's to withdraw.

All of it in one transaction with the cursor move, guarded like the
evaluator's batches: two ``serve`` processes append one retraction.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlalchemy import delete, select

from partition_notify.contract import (
    AnyMessage,
    DerivedInput,
    PartitionDoneRetractedMessage,
    PartitionWithdrawnMessage,
    SetDoneMessage,
    decode,
    spec,
)
from partition_notify.contract.messages import HCAT_EVENT, PARTITION_WITHDRAWN, PN_TABLE
from partition_notify.core.errors import MalformedMessageError, PublishError
from partition_notify.publisher import Publisher
from partition_notify.rules.kinds import Kind
from partition_notify.rules.repositories import RuleRepository
from partition_notify.rules.schema import RuleFiringRow, RuleInputRow
from partition_notify.rules.store import RuleInfo
from partition_notify.store import EventDraft, LoggedEvent, Store, TableInfo
from partition_notify.store.schema import EventRow
from partition_notify.store.uow import UnitOfWork
from partition_notify.store.withdrawals import take_set_done

log = logging.getLogger(__name__)


class Stale(Exception):
    """Raised inside a batch's transaction: another evaluator moved the cursor first."""


def _withdrawal_of(kind: Kind, ev: LoggedEvent) -> bool:
    return (ev.headers.get(HCAT_EVENT) == PARTITION_WITHDRAWN
            and ev.headers.get(PN_TABLE) in kind.inputs)


def split(kind: Kind, events: list[LoggedEvent]) -> tuple[list[LoggedEvent], bool]:
    """The next batch: the events before the first withdrawal of an input table, or
    that withdrawal alone (then True)."""
    for i, ev in enumerate(events):
        if _withdrawal_of(kind, ev):
            return (events[:1], True) if i == 0 else (events[:i], False)
    return events, False


def withdrawn_labels(kind: Kind, ev: LoggedEvent) -> dict[str, set[str]]:
    """Derived spec -> the labels the withdrawal takes back."""
    try:
        msg = decode(ev.body)
    except MalformedMessageError:  # not ours to judge here; the relay logs it
        return {}
    out: dict[str, set[str]] = {}
    if isinstance(msg, PartitionWithdrawnMessage):
        for derived, label in kind.contributions(ev.headers[PN_TABLE], msg):
            out.setdefault(derived, set()).add(label)
    return out


def retract(store: Store, publisher: Publisher, rule: RuleInfo, kind: Kind,
            target: TableInfo, cursor: int, ev: LoggedEvent,
            ) -> list[PartitionDoneRetractedMessage]:
    """Handle one withdrawal event for ``rule``; raise :class:`Stale` if another won."""
    labels = withdrawn_labels(kind, ev)
    with UnitOfWork(store.engine, write=False) as uow:  # re-checked in the transaction
        fired = _firings(uow, rule.id, list(labels))
    table = ev.headers[PN_TABLE]
    drafts = [_draft(publisher, target, rule, s, e, table, sorted(labels[s]), ev.event_id)
              for s, e in fired.items() if e is not None]

    def in_txn(uow: UnitOfWork, messages: list[AnyMessage]) -> None:
        if RuleRepository(uow.session).cursor(rule.id) != cursor:
            raise Stale
        for s, withdrawn in labels.items():
            if s not in fired:  # still open: the labels no longer count
                uow.session.execute(delete(RuleInputRow).where(
                    RuleInputRow.rule_id == rule.id, RuleInputRow.spec == s,
                    RuleInputRow.label.in_(sorted(withdrawn))))
            elif (event_id := fired[s]) is not None:
                _reopen(uow, store.clock(), rule.id, target, s, event_id, withdrawn)
        if not RuleRepository(uow.session).move_cursor(rule.id, cursor, ev.event_id):
            raise Stale

    try:
        logged = publisher.append_and_deliver(drafts, in_txn=in_txn)
    except PublishError as exc:  # committed; the relay delivers them
        log.warning("retraction of rule %s logged; delivery pending: %s", rule.name, exc)
        logged = []
    out = [m for m in logged if isinstance(m, PartitionDoneRetractedMessage)]
    for m in out:
        log.info("retracted derived set-done %s %s (rule %s): input withdrawn", target.qualified,
                 m.spec, rule.name, extra={"pn_event": "rule.retracted"})
    return out


def _firings(uow: UnitOfWork, rule_id: int, specs: Sequence[str]) -> dict[str, int | None]:
    if not specs:
        return {}
    rows = uow.session.execute(select(RuleFiringRow.spec, RuleFiringRow.event_id).where(
        RuleFiringRow.rule_id == rule_id, RuleFiringRow.spec.in_(list(specs)))).all()
    return {r.spec: r.event_id for r in rows}


def _reopen(uow: UnitOfWork, now: float, rule_id: int, target: TableInfo, s: str,
            event_id: int, withdrawn: set[str]) -> None:
    """Undo a firing: its set-done no longer counts, its other inputs count again."""
    session = uow.session
    take_set_done(session, target.id, s, event_id)  # fired for s: its spec
    session.execute(delete(RuleFiringRow).where(RuleFiringRow.rule_id == rule_id,
                                                RuleFiringRow.spec == s))
    body = session.execute(select(EventRow.body).where(EventRow.event_id == event_id)).scalar()
    msg = None if body is None else decode(body)
    if not isinstance(msg, SetDoneMessage) or msg.derived_from is None:
        return  # purged from the log: every input must arrive again
    session.add_all([
        RuleInputRow(rule_id=rule_id, spec=s, label=i.value, input_table=i.table,
                     event_id=i.event_id, created_at=now)
        for i in msg.derived_from.inputs if i.value not in withdrawn])
    session.flush()


def _draft(publisher: Publisher, target: TableInfo, rule: RuleInfo, derived: str,
           retracted: int, table: str, labels: list[str], withdrawal: int) -> EventDraft:
    done = spec.parse(derived)
    inputs = [DerivedInput(table=table, value=v, eventId=withdrawal).model_dump(by_alias=True)
              for v in labels]

    def build(event_id: int, seq: int, now: float) -> AnyMessage:
        return PartitionDoneRetractedMessage.model_validate({
            **publisher.common_fields(target, event_id, seq, now),
            "partitionSpec": done, "partitionSpecString": derived, "rule": rule.name,
            "retractedEventId": retracted, "withdrawn": inputs,
        })

    return EventDraft(target, build)
