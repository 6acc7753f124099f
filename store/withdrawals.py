"""What a withdrawal (PARTITION_WITHDRAWN) finds and removes inside its append.

A withdrawal names a spec, full (one partition) or partial (a set). Inside the
append's transaction, under the event counter's lock every writer takes, it
removes the announced partitions the spec matches (as a drop does: a later
write announces them again) and the retained set-dones whose set shares a
partition with the spec, so ``is-set-done``/``wait`` answer "not done" until a
newer set-done. The message lists both, so consumers need no look-up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from partition_notify.store.records import EventDraft, Withdrawn
from partition_notify.store.schema import PartitionRow, SetDoneRow
from sqlalchemy import ColumnElement, and_, delete, literal, not_, or_, select
from sqlalchemy.orm import Session

from partition_notify.contract import spec
from partition_notify.core.errors import ValidationError

#: The most partitions or set-dones one withdrawal takes back: every one is listed
#: in its message, which must stay within the size limit. Wider: withdraw parts.
MAX_WITHDRAWN = 1000


def _compatible(column: Any, wanted: Mapping[str, str]) -> ColumnElement[bool]:
    """SQL: the canonical spec in ``column`` shares a partition with ``wanted``: on
    every key of ``wanted`` it has the same value or no value at all."""
    wrapped = literal("/") + column + literal("/")
    return and_(*(or_(not_(wrapped.contains(f"/{k}=", autoescape=True)),
                      wrapped.contains(f"/{k}={spec.escape_value(v)}/", autoescape=True))
                  for k, v in wanted.items()))


def _bounded(found: Sequence[Any], what: str, draft: EventDraft) -> None:
    if len(found) > MAX_WITHDRAWN:
        raise ValidationError(
            f"withdrawal of {draft.table.qualified} {spec.canonical(draft.withdraw or {})!r} "
            f"matches more than {MAX_WITHDRAWN} {what}; withdraw narrower specs")


def apply(session: Session, drafts: Sequence[EventDraft], now: float) -> None:
    """Find and remove what each withdrawal draft covers; record it on the draft."""
    for d in drafts:
        if d.withdraw is None:
            continue
        table_id, wanted = d.table.id, d.withdraw
        parts = session.execute(
            select(PartitionRow.id, PartitionRow.spec, PartitionRow.values)
            .where(PartitionRow.table_id == table_id, _compatible(PartitionRow.spec, wanted))
            .order_by(PartitionRow.id).limit(MAX_WITHDRAWN + 1)).all()
        _bounded(parts, "partitions", d)
        dones = session.execute(
            select(SetDoneRow.id, SetDoneRow.spec, SetDoneRow.event_id)
            .where(SetDoneRow.table_id == table_id, SetDoneRow.expires_at > now,
                   _compatible(SetDoneRow.spec, wanted))
            .order_by(SetDoneRow.event_id).limit(MAX_WITHDRAWN + 1)).all()
        _bounded(dones, "set-dones", d)
        d.withdrawn = Withdrawn(partitions=[dict(p.values) for p in parts],
                                set_dones=[(r.spec, r.event_id) for r in dones])
        if parts:
            session.execute(delete(PartitionRow).where(PartitionRow.id.in_([p.id for p in parts])))
        if dones:
            session.execute(delete(SetDoneRow).where(SetDoneRow.id.in_([r.id for r in dones])))


def take_set_done(session: Session, table_id: int, set_spec: str, event_id: int) -> str | None:
    """Remove the retained set-done of ``event_id`` (a retraction), whose canonical spec
    is ``set_spec``; return its body (None: expired and purged, or never retained).

    Keyed by the spec: ix_pn_set_done_lookup reads that spec's rows only. By table and
    event id alone, the history index's prefix read every set-done the table retained,
    under the counter's lock; an index of its own would cost every durable publish a
    WAL page (issue #20). One statement: the row it deletes hands back its body.
    """
    return session.execute(delete(SetDoneRow).where(
        SetDoneRow.table_id == table_id, SetDoneRow.spec == set_spec,
        SetDoneRow.event_id == event_id).returning(SetDoneRow.body)).scalar()
