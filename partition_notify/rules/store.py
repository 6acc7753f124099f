"""Rules, the inputs counted and the firings, over the SQL store; one unit of work each."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from partition_notify.core.errors import ConflictError, NotFoundError
from partition_notify.rules.repositories import RuleRepository, RuleStateRepository
from partition_notify.rules.schema import RuleRow
from partition_notify.store.housekeeping import BetweenBatches, in_batches
from partition_notify.store.uow import UnitOfWork

if TYPE_CHECKING:
    from partition_notify.store.provider import Store, TableInfo

#: Inputs of a spec that never completed are dropped after this long (90 days:
#: longer than any month a calendar rule rolls up, plus late arrivals).
INPUT_RETENTION_SECONDS = 90 * 86400
#: Firings are kept this long (400 days); a partition arriving after its firing
#: was purged counts as a first input again (see README "Completeness rules").
FIRING_RETENTION_SECONDS = 400 * 86400


@dataclass(frozen=True, slots=True)
class RuleInfo:
    id: int
    table_id: int
    name: str
    kind: str
    params: dict[str, object]
    cursor_event_id: int
    created_at: float

    @classmethod
    def of(cls, row: RuleRow) -> RuleInfo:
        return cls(row.id, row.table_id, row.name, row.kind, dict(row.params),
                   row.cursor_event_id, row.created_at)


@dataclass(frozen=True, slots=True)
class FiringInfo:
    spec: str
    event_id: int | None
    fired_at: float


class RuleStore:
    def __init__(self, store: Store) -> None:
        self.store = store

    def uow(self, *, write: bool = False) -> UnitOfWork:
        return UnitOfWork(self.store.engine, write=write)

    def add(self, table: TableInfo, name: str, kind: str, params: dict[str, object],
            *, from_now: bool) -> RuleInfo:
        retained_from = self.store.housekeeping.purged_below()
        with self.uow(write=True) as uow:
            repo = RuleRepository(uow.session)
            if repo.get(table.id, name) is not None:
                raise ConflictError(f"table {table.qualified} has a rule named {name!r} already "
                                    "(remove it first)")
            # The first run reads the retained history, so a rule added late still fires;
            # it starts where the purge left off, so a later purge gap is told apart.
            start = uow.events.max_id() if from_now else retained_from - 1
            row = RuleRow(table_id=table.id, name=name, kind=kind, params=params,
                          cursor_event_id=start, created_at=self.store.clock())
            repo.add(row)
            return RuleInfo.of(row)

    def rules(self, table_ids: Sequence[int] | None = None) -> list[RuleInfo]:
        with self.uow() as uow:
            return [RuleInfo.of(r) for r in RuleRepository(uow.session).all(table_ids)]

    def lowest_cursor(self) -> int | None:
        """The lowest rule cursor: the log after it is still to be evaluated (None: no rules)."""
        with self.uow() as uow:
            return RuleRepository(uow.session).lowest_cursor()

    def get(self, table: TableInfo, name: str) -> RuleInfo:
        with self.uow() as uow:
            row = RuleRepository(uow.session).get(table.id, name)
            if row is None:
                raise NotFoundError(f"table {table.qualified} has no rule named {name!r}")
            return RuleInfo.of(row)

    def remove(self, table: TableInfo, name: str) -> RuleInfo:
        with self.uow(write=True) as uow:
            repo = RuleRepository(uow.session)
            row = repo.get(table.id, name)
            if row is None:
                raise NotFoundError(f"table {table.qualified} has no rule named {name!r}")
            info = RuleInfo.of(row)
            repo.remove(row)
            return info

    def state(self, rule_id: int, specs: Sequence[str]
              ) -> tuple[set[str], dict[str, dict[str, tuple[str, int]]]]:
        """(specs fired, per spec not fired: label -> (input table, event id)) of one rule."""
        with self.uow() as uow:
            repo = RuleStateRepository(uow.session)
            fired = repo.fired(rule_id, specs)
            counted: dict[str, dict[str, tuple[str, int]]] = {}
            for row in repo.inputs(rule_id, specs):
                counted.setdefault(row.spec, {})[row.label] = (row.input_table, row.event_id)
            return fired, counted

    def firings(self, rule_id: int, limit: int = 50) -> list[FiringInfo]:
        with self.uow() as uow:
            return [FiringInfo(r.spec, r.event_id, r.fired_at)
                    for r in RuleStateRepository(uow.session).firings(rule_id, limit)]

    def purge(self, now: float, *, batch_size: int,
              between_batches: BetweenBatches | None = None) -> int:
        """Inputs and firings past their retention, oldest first in batches."""
        batches: tuple[Callable[[UnitOfWork, int], int], ...] = (
            lambda uow, n: RuleStateRepository(uow.session).purge_inputs(
                now - INPUT_RETENTION_SECONDS, n),
            lambda uow, n: RuleStateRepository(uow.session).purge_firings(
                now - FIRING_RETENTION_SECONDS, n),
        )
        return sum(in_batches(lambda: self.uow(write=True), b, batch_size=batch_size,
                              between_batches=between_batches) for b in batches)
