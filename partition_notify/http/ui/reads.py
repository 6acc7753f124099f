"""Read-only queries behind the ``/ui`` status pages: one page of rows at a time.

Every query is bounded (a page, a ``limit``) so the pages stay fast with
10,000 tables (bench/ui_render.py). The repository takes a Session and never
commits; :class:`StatusReads` opens a read-only unit of work per call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Select, Text, cast, func, or_, select
from sqlalchemy.orm import Session

from partition_notify.contract.messages import PARTITION_WITHDRAWN
from partition_notify.deadlines.schema import ExpectationCheckRow, ExpectationRow
from partition_notify.rules.schema import RuleFiringRow, RuleRow
from partition_notify.store.provider import Store
from partition_notify.store.records import TableInfo
from partition_notify.store.schema import EventRow, PartitionRow, SetDoneRow, TableRow
from partition_notify.store.uow import UnitOfWork
from partition_notify.writers.commit_schema import SparkCommitRow


def _late_table_ids() -> Select[Any]:
    """The tables with an open late check: the ones on-call looks for first."""
    return (select(ExpectationRow.table_id).distinct()
            .join(ExpectationCheckRow, ExpectationCheckRow.expectation_id == ExpectationRow.id)
            .where(ExpectationCheckRow.outcome == "late",
                   ExpectationCheckRow.recovered_at.is_(None)))


@dataclass(frozen=True, slots=True)
class TableStats:
    last_add: float | None = None
    last_done: float | None = None
    expectations: int = 0
    late: int = 0
    dead: int = 0


@dataclass(frozen=True, slots=True)
class EventLine:
    event_id: int
    event_type: str
    created_at: float
    published_at: float | None
    body: str


@dataclass(frozen=True, slots=True)
class CheckLine:
    expectation: str
    spec: str
    outcome: str
    deadline_at: float
    recovered_at: float | None


class StatusReadRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def tables_page(self, text: str, offset: int, limit: int, *, late_only: bool = False
                    ) -> tuple[int, list[TableInfo]]:
        """Tables whose ``db.name`` contains ``text`` (and, ``late_only``, that are late
        now), ordered by name, and how many match."""
        where: list[ColumnElement[bool]] = []
        if late_only:
            where.append(TableRow.id.in_(_late_table_ids()))
        if text:
            pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            where.append(or_(TableRow.db.like(pattern, escape="\\"),
                             TableRow.name.like(pattern, escape="\\"),
                             (TableRow.db + "." + TableRow.name).like(pattern, escape="\\")))
        total = self.session.scalar(select(func.count()).select_from(TableRow).where(*where))
        rows = self.session.scalars(
            select(TableRow).where(*where).order_by(TableRow.db, TableRow.name)
            .offset(offset).limit(limit)
        ).all()
        return int(total or 0), [TableInfo.of(r) for r in rows]

    def late_tables(self) -> int:
        """How many tables have an instance late now (an open late check)."""
        late = _late_table_ids().subquery()
        return int(self.session.scalar(select(func.count()).select_from(late)) or 0)

    def stats(self, ids: Sequence[int], now: float) -> dict[int, TableStats]:
        """Per table: last add-partition, last set-done, expectations, open late, dead letters."""
        if not ids:
            return {}
        s = self.session
        add = dict(s.execute(select(PartitionRow.table_id, func.max(PartitionRow.created_at))
                             .where(PartitionRow.table_id.in_(ids))
                             .group_by(PartitionRow.table_id)).tuples().all())
        done = dict(s.execute(select(SetDoneRow.table_id, func.max(SetDoneRow.published_at))
                              .where(SetDoneRow.table_id.in_(ids), SetDoneRow.expires_at > now)
                              .group_by(SetDoneRow.table_id)).tuples().all())
        exp = dict(s.execute(select(ExpectationRow.table_id, func.count())
                             .where(ExpectationRow.table_id.in_(ids))
                             .group_by(ExpectationRow.table_id)).tuples().all())
        late = dict(s.execute(
            select(ExpectationRow.table_id, func.count())
            .join(ExpectationCheckRow, ExpectationCheckRow.expectation_id == ExpectationRow.id)
            .where(ExpectationRow.table_id.in_(ids), ExpectationCheckRow.outcome == "late",
                   ExpectationCheckRow.recovered_at.is_(None))
            .group_by(ExpectationRow.table_id)).tuples().all())
        dead = dict(s.execute(select(EventRow.table_id, func.count())
                              .where(EventRow.dead_at.is_not(None),
                                     EventRow.discarded_at.is_(None),
                                     EventRow.table_id.in_(ids))
                              .group_by(EventRow.table_id)).tuples().all())
        return {i: TableStats(add.get(i), done.get(i), int(exp.get(i, 0)), int(late.get(i, 0)),
                              int(dead.get(i, 0))) for i in ids}

    def board_partitions(self, table_id: int, keys: Sequence[str], rows: int, limit: int
                         ) -> list[tuple[Any, ...]]:
        """The partitions of the ``rows`` greatest values of the first key, out of the
        table's newest ``limit``: (spec, values as JSON text, event id, revision, time,
        then the value of each key).

        One statement: the newest ``limit`` (``ix_pn_partitions_recent``, migration
        0012) with each key's value picked out of the JSON by the database
        (``JSON_EXTRACT``, ``->>``), once; of those, the rows of the greatest first-key
        values. Only the cells the board can show are sent, and none is decoded
        (bench/ui_render.py). Values compare by code point, as Python's ``sorted``
        does: SQLite's default collation, ``COLLATE "C"`` on PostgreSQL.
        """
        pg = self.session.get_bind().dialect.name == "postgresql"
        picked = [PartitionRow.values[k].as_string() for k in keys]
        if pg:
            picked[0] = picked[0].collate("C")
        recent = (
            select(PartitionRow.spec, cast(PartitionRow.values, Text).label("values_text"),
                   PartitionRow.event_id, PartitionRow.revision, PartitionRow.created_at,
                   *(v.label(f"k{i}") for i, v in enumerate(picked)))
            .where(PartitionRow.table_id == table_id)
            .order_by(PartitionRow.created_at.desc(), PartitionRow.id.desc()).limit(limit)
            .cte("recent")
        )
        first = recent.c.k0
        greatest = select(first).where(first.is_not(None)).group_by(first) \
            .order_by(first.desc()).limit(rows)
        return list(self.session.execute(select(recent).where(first.in_(greatest))).all())

    def set_done(self, table_id: int, now: float, limit: int) -> list[tuple[str, int, float]]:
        """Retained set-done (spec, event id, time), newest first."""
        return list(self.session.execute(
            select(SetDoneRow.spec, SetDoneRow.event_id, SetDoneRow.published_at)
            .where(SetDoneRow.table_id == table_id, SetDoneRow.expires_at > now)
            .order_by(SetDoneRow.published_at.desc()).limit(limit)
        ).tuples().all())

    def derived_by(self, table_id: int, event_ids: Sequence[int]) -> dict[int, str]:
        """Which of ``event_ids`` a completeness rule of the table derived: event id -> rule.

        On the firings' (rule, spec) index through the table's few rules, in chunks
        of ids (within SQLite's bound-parameter limit)."""
        found: dict[int, str] = {}
        ids = list(event_ids)
        for i in range(0, len(ids), 500):
            found.update((int(e), rule) for e, rule in self.session.execute(
                select(RuleFiringRow.event_id, RuleRow.name)
                .join(RuleRow, RuleFiringRow.rule_id == RuleRow.id)
                .where(RuleRow.table_id == table_id,
                       RuleFiringRow.event_id.in_(ids[i:i + 500]))).tuples()
                if e is not None)
        return found

    def withdrawals(self, table_id: int, limit: int) -> list[tuple[str, int]]:
        """The newest PARTITION_WITHDRAWN bodies of the table (``ix_pn_events_table``)."""
        return list(self.session.execute(
            select(EventRow.body, EventRow.event_id)
            .where(EventRow.table_id == table_id, EventRow.event_type == PARTITION_WITHDRAWN)
            .order_by(EventRow.event_id.desc()).limit(limit)
        ).tuples().all())

    def checks(self, table_id: int, limit: int) -> list[CheckLine]:
        rows = self.session.execute(
            select(ExpectationRow.name, ExpectationCheckRow.spec, ExpectationCheckRow.outcome,
                   ExpectationCheckRow.deadline_at, ExpectationCheckRow.recovered_at)
            .join(ExpectationRow, ExpectationCheckRow.expectation_id == ExpectationRow.id)
            .where(ExpectationRow.table_id == table_id)
            .order_by(ExpectationCheckRow.deadline_at.desc()).limit(limit)
        ).tuples().all()
        return [CheckLine(*r) for r in rows]

    def events(self, table_id: int, event_type: str | None, since: float | None,
               before: int | None, limit: int) -> list[EventLine]:
        where = [EventRow.table_id == table_id]
        if event_type:
            where.append(EventRow.event_type == event_type)
        if since is not None:
            where.append(EventRow.created_at >= since)
        if before is not None:
            where.append(EventRow.event_id < before)
        rows = self.session.execute(
            select(EventRow.event_id, EventRow.event_type, EventRow.created_at,
                   EventRow.published_at, EventRow.body)
            .where(*where).order_by(EventRow.event_id.desc()).limit(limit)
        ).tuples().all()
        return [EventLine(*r) for r in rows]

    def event(self, table_id: int, event_id: int) -> str | None:
        return self.session.scalar(select(EventRow.body).where(
            EventRow.table_id == table_id, EventRow.event_id == event_id))

    def spark_commits(self, limit: int) -> list[tuple[str, str, int, float]]:
        """Recent applied Spark commits: (job id, table, partitions, time)."""
        return list(self.session.execute(
            select(SparkCommitRow.job_id, TableRow.db + "." + TableRow.name,
                   SparkCommitRow.partitions, SparkCommitRow.processed_at)
            .join(TableRow, TableRow.id == SparkCommitRow.table_id)
            .order_by(SparkCommitRow.processed_at.desc()).limit(limit)
        ).tuples().all())


class StatusReads:
    """:class:`StatusReadRepository` in a read-only unit of work per call."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def uow(self) -> UnitOfWork:
        return UnitOfWork(self.store.engine, write=False)

    def now(self) -> float:
        return self.store.clock()
