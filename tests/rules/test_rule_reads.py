"""The rules of one table are read without the rest of the catalog.

The board page (``/ui/tables/{t}``) lists its table's rules on every render; with
10,000 registered tables, loading every table to name one rule's table was most
of the render (bench/ui_render.py: board p50 508 ms on a quiet machine).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event

from partition_notify.app import App, build_app


@pytest.fixture
def app(store_url: str) -> Iterator[App]:
    a = build_app(store_url=store_url, transport_url="embedded://")
    yield a
    a.close()


def test_one_tables_rules_read_no_other_table(app: App) -> None:
    for i in range(5):
        app.publisher.register_table("sales", f"t{i}", ["datestamp", "region"])
    app.rules.add("sales.t1", name="regions", kind="all-of",
                  params={"key": "region", "values": ["us", "eu"], "by": ["datestamp"]})
    statements: list[str] = []

    def grab(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        statements.append(statement)

    event.listen(app.store.engine, "before_cursor_execute", grab)
    try:
        views = app.rules.rules("sales.t1")
    finally:
        event.remove(app.store.engine, "before_cursor_execute", grab)
    assert [(v.table, v.name) for v in views] == [("sales.t1", "regions")]
    whole_catalog = [s for s in statements
                     if "FROM pn_tables" in s and "WHERE" not in s.split("FROM pn_tables", 1)[1]]
    assert whole_catalog == [], whole_catalog
    assert [(v.table, v.name) for v in app.rules.rules()] == [("sales.t1", "regions")]
