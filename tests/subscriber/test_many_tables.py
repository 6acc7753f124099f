"""One subscriber on more tables than one catalog, history or sequence read holds (#20).

Subscribing reads the tables asked, their retained set-dones and their topics'
last numbers in chunks (store/catalog.py, store/retention.py,
store/event_log.py): every chunk boundary must keep order and lose nothing.
"""

from __future__ import annotations

import time

import pytest
from partition_notify.store.catalog import NAMES_PER_READ
from partition_notify.store.schema import TableRow
from sqlalchemy import insert

from partition_notify.contract.topics import topic_for
from partition_notify.core.errors import UnknownTableError
from tests.store.helpers import Collector

#: Over two chunks of every chunked read.
N = 2 * NAMES_PER_READ + 7


def _register_many(app, n: int) -> list[tuple[str, str]]:
    # One INSERT: registering thousands one call at a time is not what is tested.
    refs = [("many", f"t{i:05d}") for i in range(n)]
    with app.store.engine.begin() as conn:
        conn.execute(insert(TableRow.__table__), [
            {"db": db, "name": name, "partition_keys": ["ds"], "topic": topic_for(db, name),
             "topic_override": None, "retention_seconds": 3600, "location": None,
             "created_at": time.time()} for db, name in refs])
    return refs


def test_history_and_live_across_read_chunks_each_once_in_order(app):
    refs = _register_many(app, N)
    pub = app.publisher
    # Retained: the first, a chunk's last and next, and the last table, out of table order.
    before = [pub.send_mark_set_done(*refs[i], "ds=1")
              for i in (N - 1, NAMES_PER_READ, 0, NAMES_PER_READ - 1)]
    got = Collector()
    with app.subscriber() as sub:
        s = sub.subscribe(refs, got)
        assert len(s.tables) == N
        live = [pub.send_mark_set_done(*refs[i], "ds=2") for i in (0, N - 1)]
        assert got.wait_for(lambda ms: len(ms) == 6, 30)
        assert [m.message_id for m in got.messages] == [m.message_id for m in before + live]
        assert s.duplicates == 0


def test_names_in_any_case_and_forms_mixed_map_to_the_tables(app):
    refs = _register_many(app, N)
    mixed = [f"MANY.{n.upper()}" if i % 2 else (db, n) for i, (db, n) in enumerate(refs)]
    with app.subscriber() as sub:
        assert sub.subscribe(mixed, history=False).tables == frozenset(refs)


def test_an_unknown_table_among_thousands_is_named(app):
    refs = _register_many(app, N)
    with app.subscriber() as sub, pytest.raises(UnknownTableError, match=r"many\.nope"):
        sub.subscribe([*refs, ("many", "nope")])
