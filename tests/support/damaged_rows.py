"""Rows of the event log damaged by SQL, in the statement that logs them.

A trigger damages every row logged for a partition whose body mentions
``poison``, so no reader of the log can see it undamaged first.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from partition_notify.app import App

#: What the damaged row's ``headers`` hold; the first is not JSON (SQLite only:
#: PostgreSQL's json column refuses it), the others are JSON but not an object.
DAMAGE = ["'{not json'", "'[1, 2]'", "'\"text\"'", "'null'"]


def damage_on_insert(app: App, value: str, body: str | None = None) -> None:
    """Every row logged for a partition ``ds=poison`` gets ``headers`` = ``value``
    (and ``body`` = ``body`` when given)."""
    also = "" if body is None else f", body = {body}"
    engine = app.store.engine
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            conn.execute(text(
                "CREATE TRIGGER pn_test_damage AFTER INSERT ON pn_events "
                "WHEN NEW.body LIKE '%poison%' BEGIN "
                f"UPDATE pn_events SET headers = {value}{also} WHERE event_id = NEW.event_id; END"))
            return
        if value == DAMAGE[0]:
            pytest.skip("a json column refuses text that is not JSON")
        conn.execute(text(
            "CREATE FUNCTION pn_test_damage() RETURNS trigger AS $$ BEGIN "
            "IF NEW.body LIKE '%poison%' THEN "
            f"NEW.headers := {value}::json; "
            + ("" if body is None else f"NEW.body := {body}; ") + "END IF; "
            "RETURN NEW; END $$ LANGUAGE plpgsql"))
        conn.execute(text("CREATE TRIGGER pn_test_damage BEFORE INSERT ON pn_events "
                          "FOR EACH ROW EXECUTE FUNCTION pn_test_damage()"))
