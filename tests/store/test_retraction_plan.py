"""A retraction removes its one retained set-done by a keyed look-up, not a table scan.

``take_set_done`` (store/withdrawals.py) runs inside a rule's retraction, under
the event counter's lock every writer takes. Its ``table_id = ? AND event_id = ?``
could use only ``ix_pn_set_done_history`` (table_id, published_at) as a prefix:
it read every set-done row the table retained. pn_set_done gets no index for it
(each one costs the durable publish a WAL page, issue #20): the withdrawn
set-done's spec keys the look-up index. The statements really sent are captured
and explained by the database itself, with no ANALYZE, under both of
PostgreSQL's plan modes.
"""

from __future__ import annotations

from typing import Any

from partition_notify.store import Store
from partition_notify.store.uow import UnitOfWork
from partition_notify.store.withdrawals import take_set_done
from sqlalchemy import event, text

from tests.support.query_plans import plan as query_plan
from tests.support.query_plans import rows_read

#: Set-done rows of table 1; spec ``a=<n % SPECS>``: every spec has ROWS / SPECS rows.
ROWS = 20_000
SPECS = 10_000
#: The one retracted, in table 1, as its spec's other row (TAKEN - SPECS) is.
TAKEN = ROWS - 6


def _spec(n: int) -> str:
    return f"a={n % SPECS:06d}"


def _fill(store: Store) -> None:
    with store.engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO pn_tables (id, db, name, partition_keys, topic, retention_seconds, "
            "created_at) VALUES (1, 'd', 't', '[\"a\"]', 'hcat.d.t', 1, 0), "
            "(2, 'd', 'u', '[\"a\"]', 'hcat.d.u', 1, 0)"))
        conn.execute(text(
            "INSERT INTO pn_set_done (table_id, spec, event_id, body, published_at, expires_at) "
            "VALUES (:t, :spec, :n, :body, :n, :n + 86400)"),
            [{"t": 1 if n % 3 else 2, "spec": _spec(n), "n": n, "body": f"body {n}"}
             for n in range(1, ROWS + 1)])


def _rows(store: Store) -> set[tuple[int, str, int]]:
    with store.engine.connect() as conn:
        return {(r[0], r[1], r[2]) for r in conn.execute(text(
            "SELECT table_id, spec, event_id FROM pn_set_done"))}


def _take(store: Store, table_id: int, event_id: int) -> tuple[list[tuple[str, Any]], str | None]:
    """take_set_done in a write unit of work; the statements it sent naming pn_set_done."""
    seen: list[tuple[str, Any]] = []

    def grab(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if "pn_set_done" in statement:
            seen.append((statement, params))

    event.listen(store.engine, "before_cursor_execute", grab)
    try:
        with UnitOfWork(store.engine, write=True) as uow:
            body = take_set_done(uow.session, table_id, _spec(event_id), event_id)
    finally:
        event.remove(store.engine, "before_cursor_execute", grab)
    return seen, body


def test_a_retraction_reads_only_its_spec_s_set_dones(store_url: str) -> None:
    store = Store.open(store_url)
    try:
        _fill(store)
        before = _rows(store)
        # Statements explained after the run: the row is gone, the plan is the same.
        sent, body = _take(store, 1, TAKEN)
        assert body == f"body {TAKEN}"
        assert before - _rows(store) == {(1, _spec(TAKEN), TAKEN)}
        assert sent, "no statement named pn_set_done"
        for sql, params in sent:
            if store.dialect == "sqlite":
                plan = query_plan(store, sql, params)
                assert "ix_pn_set_done_lookup (table_id=? AND spec=?" in plan, plan
                continue
            for mode in ("force_custom_plan", "force_generic_plan"):
                read = rows_read(store, sql, params, mode, "pn_set_done")
                # The spec's two rows (one gone already), not the table's 13,334.
                assert read <= ROWS // SPECS, f"{mode}: read {read} rows of pn_set_done: {sql}"
    finally:
        store.close()


def test_only_the_retracted_row_goes_not_its_spec_s_other_set_done(store_url: str) -> None:
    store = Store.open(store_url)
    try:
        _fill(store)
        before = _rows(store)
        twin = TAKEN - SPECS  # same spec, same table, an older set-done
        assert (1, _spec(TAKEN), twin) in before
        _, body = _take(store, 1, TAKEN)
        assert body == f"body {TAKEN}"
        after = _rows(store)
        assert before - after == {(1, _spec(TAKEN), TAKEN)}
        # Another table's row, and an unknown event: nothing to take, nothing taken.
        other = next(n for n in range(1, ROWS) if n % 3 == 0)
        _, none = _take(store, 1, other)
        _, gone = _take(store, 1, TAKEN)
        assert (none, gone) == (None, None)
        assert _rows(store) == after
    finally:
        store.close()
