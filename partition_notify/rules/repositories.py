"""Repositories of the rule tables; each takes a Session, none commits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from sqlalchemy import Table, delete, func, select, update
from sqlalchemy.orm import Session

from partition_notify.rules.schema import RuleFiringRow, RuleInputRow, RuleRow
from partition_notify.store.housekeeping import delete_where
from partition_notify.store.purge_order import oldest_first
from partition_notify.store.uow import affected_rows

_INPUTS = cast(Table, RuleInputRow.__table__)
_FIRINGS = cast(Table, RuleFiringRow.__table__)
#: Specs per IN list: within SQLite's bound-parameter limit.
_CHUNK = 500


def _chunks(items: Sequence[str]) -> list[list[str]]:
    return [list(items[i:i + _CHUNK]) for i in range(0, len(items), _CHUNK)]


class RuleRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, table_id: int, name: str) -> RuleRow | None:
        stmt = select(RuleRow).where(RuleRow.table_id == table_id, RuleRow.name == name)
        return self.session.scalars(stmt).one_or_none()

    def all(self, table_ids: Sequence[int] | None = None) -> list[RuleRow]:
        stmt = select(RuleRow)
        if table_ids is not None:
            stmt = stmt.where(RuleRow.table_id.in_(list(table_ids)))
        return list(self.session.scalars(stmt.order_by(RuleRow.id)))

    def cursor(self, rule_id: int) -> int | None:
        """The rule's cursor as committed now (a fresh read, not the session's copy)."""
        stmt = select(RuleRow.cursor_event_id).where(RuleRow.id == rule_id)
        return self.session.execute(stmt).scalar_one_or_none()

    def lowest_cursor(self) -> int | None:
        return self.session.scalar(select(func.min(RuleRow.cursor_event_id)))

    def move_cursor(self, rule_id: int, expected: int, to: int) -> bool:
        stmt = (update(RuleRow).where(RuleRow.id == rule_id, RuleRow.cursor_event_id == expected)
                .values(cursor_event_id=to))
        return affected_rows(self.session.execute(stmt)) == 1

    def add(self, row: RuleRow) -> None:
        self.session.add(row)
        self.session.flush()

    def remove(self, row: RuleRow) -> None:
        for model in (RuleInputRow, RuleFiringRow):  # not every backend cascades
            self.session.execute(delete(model).where(model.rule_id == row.id))
        self.session.delete(row)
        self.session.flush()


class RuleStateRepository:
    """Inputs counted and firings of rules."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def inputs(self, rule_id: int, specs: Sequence[str]) -> list[RuleInputRow]:
        found: list[RuleInputRow] = []
        for chunk in _chunks(specs):
            stmt = select(RuleInputRow).where(RuleInputRow.rule_id == rule_id,
                                              RuleInputRow.spec.in_(chunk))
            found.extend(self.session.scalars(stmt))
        return found

    def fired(self, rule_id: int, specs: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for chunk in _chunks(specs):
            stmt = select(RuleFiringRow.spec).where(RuleFiringRow.rule_id == rule_id,
                                                    RuleFiringRow.spec.in_(chunk))
            found.update(self.session.scalars(stmt))
        return found

    def firings(self, rule_id: int, limit: int) -> list[RuleFiringRow]:
        stmt = (select(RuleFiringRow).where(RuleFiringRow.rule_id == rule_id)
                .order_by(RuleFiringRow.id.desc()).limit(limit))
        return list(self.session.scalars(stmt))

    def quiet_due(self, rule_id: int, before: float, limit: int) -> list[str]:
        """Open specs whose newest input was counted at or before ``before`` (oldest first)."""
        last = func.max(RuleInputRow.created_at)
        stmt = (select(RuleInputRow.spec).where(RuleInputRow.rule_id == rule_id)
                .group_by(RuleInputRow.spec).having(last <= before).order_by(last).limit(limit))
        return list(self.session.scalars(stmt))

    def last_input(self, rule_id: int, spec: str) -> float | None:
        stmt = select(func.max(RuleInputRow.created_at)).where(
            RuleInputRow.rule_id == rule_id, RuleInputRow.spec == spec)
        return self.session.scalar(stmt)

    def next_quiet(self, rule_id: int) -> float | None:
        """When the first open spec's newest input was counted (its period ends N later)."""
        newest = (select(func.max(RuleInputRow.created_at).label("t"))
                  .where(RuleInputRow.rule_id == rule_id).group_by(RuleInputRow.spec).subquery())
        first = self.session.scalar(select(func.min(newest.c.t)))
        return None if first is None else float(first)

    def add_inputs(self, rows: Sequence[RuleInputRow]) -> None:
        self.session.add_all(rows)
        self.session.flush()

    def add_firing(self, row: RuleFiringRow) -> None:
        self.session.add(row)
        self.session.flush()

    def drop_inputs(self, rule_id: int, specs: Sequence[str]) -> None:
        for chunk in _chunks(specs):
            self.session.execute(delete(RuleInputRow).where(
                RuleInputRow.rule_id == rule_id, RuleInputRow.spec.in_(chunk)))

    def purge_inputs(self, before: float, n: int) -> int:
        """The ``n`` oldest inputs counted before ``before`` (their spec never completed)."""
        c = _INPUTS.c
        return delete_where(self.session, _INPUTS, oldest_first(
            self.session, c.id, c.created_at, c.created_at < before, n))

    def purge_firings(self, before: float, n: int) -> int:
        c = _FIRINGS.c
        return delete_where(self.session, _FIRINGS, oldest_first(
            self.session, c.id, c.fired_at, c.fired_at < before, n))
