"""The features' purge batches read about a batch of rows, not the whole table.

tests/store/test_purge_plans.py's question for the tables the features keep:
Spark commit records and refusals, completeness rules' inputs and firings, and
deadline verdicts. ``serve`` purges each in batches (one transaction each).
Without statistics (a new store, autovacuum off) PostgreSQL estimated an
unbounded ``< before`` at a third of the table and read all of it for every
batch. Each batch is captured as the product sends it and explained by the
database (no ANALYZE), under both plan modes.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import pytest
from partition_notify.store import Store
from partition_notify.store.uow import UnitOfWork
from partition_notify.writers.commit_refusals import CommitRefusals
from partition_notify.writers.commit_repository import SparkCommitRepository
from sqlalchemy import event, text

from partition_notify.deadlines.repositories import ExpectationCheckRepository
from partition_notify.rules.repositories import RuleStateRepository
from tests.support.query_plans import rows_read

ROWS = 100_000
BATCH = 5_000
#: The n oldest from the index, the same n by primary key to delete, and slack.
MOST = 2 * BATCH + 100
#: The older half of the rows is purgeable: ``at`` runs from now - ROWS to now.
BEFORE_AGO = ROWS / 2

#: table -> the columns after its order column, as a SELECT over g (1..n) and :at.
FILLS = {
    "pn_spark_commit_refusals": ("status, job_id, \"table\", reason, principal, at",
                                 "'rejected', 'j' || g, 't', 'r', 'p', :at"),
    "pn_spark_commits": ("job_id, table_id, partitions, processed_at", "'j' || g, 1, 1, :at"),
    "pn_rule_inputs": ("rule_id, spec, label, input_table, event_id, created_at",
                       "1, 'a=' || g, 'l', 'd.t', g, :at"),
    "pn_rule_firings": ("rule_id, spec, event_id, fired_at", "1, 'a=' || g, g, :at"),
    "pn_expectation_checks": (
        "expectation_id, logical_date, spec, deadline_at, outcome, checked_at",
        "1, g::text, 'a=' || g, :at, 'late', :at"),
}


class _Stop(Exception):
    pass


def _one_batch(store: Store, table: str, before: float) -> int:
    """One purge batch of ``table`` through the product's own call; rows deleted."""
    def stop() -> None:
        raise _Stop

    if table == "pn_spark_commit_refusals":
        with contextlib.suppress(_Stop):
            CommitRefusals(store).purge(before, batch_size=BATCH, between_batches=stop)
        return BATCH
    batches: dict[str, Callable[[Any], int]] = {
        "pn_spark_commits": lambda s: SparkCommitRepository(s).purge_batch(before, BATCH),
        "pn_rule_inputs": lambda s: RuleStateRepository(s).purge_inputs(before, BATCH),
        "pn_rule_firings": lambda s: RuleStateRepository(s).purge_firings(before, BATCH),
        "pn_expectation_checks":
            lambda s: ExpectationCheckRepository(s).purge_batch(before, before, BATCH),
    }
    with UnitOfWork(store.engine, write=True) as uow:
        return batches[table](uow.session)


@pytest.mark.parametrize("table", sorted(FILLS))
def test_a_feature_purge_batch_reads_about_a_batch(pg_store: Store, table: str) -> None:
    now = time.time()
    columns, values = FILLS[table]
    with pg_store.engine.begin() as conn:
        # A fill of one table: the parent rows (rules, expectations) are not the question.
        conn.execute(text("SET LOCAL session_replication_role = replica"))
        conn.execute(text(
            f"INSERT INTO {table} ({columns}) SELECT {values.replace(':at', ':now - :n + g')} "
            "FROM generate_series(1, :n) AS g"), {"now": now, "n": ROWS})
    sent: list[tuple[str, Any]] = []
    settings: list[str] = []

    def grab(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith("SET LOCAL"):
            settings.append(statement)
        elif statement.lstrip().upper().startswith(f"DELETE FROM {table.upper()}"):
            sent.append((statement, params))

    event.listen(pg_store.engine, "before_cursor_execute", grab)
    try:
        assert _one_batch(pg_store, table, now - BEFORE_AGO) == BATCH
    finally:
        event.remove(pg_store.engine, "before_cursor_execute", grab)
    assert len(sent) == 1, sent
    sql, params = sent[0]
    for mode in ("force_custom_plan", "force_generic_plan"):
        read = rows_read(pg_store, sql, params, mode, table, settings)
        assert read <= MOST, f"{mode}: read {read} rows of {table} for a batch of {BATCH}"
