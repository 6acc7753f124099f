"""Rows of the event log damaged by SQL, in the statement that logs them.

A trigger damages every row logged for a partition whose body mentions
``poison``, so no reader of the log can see it undamaged first.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DataError

from partition_notify.app import App

#: What the damaged row's ``headers`` hold; the first is not JSON (SQLite only:
#: PostgreSQL's json column refuses it), the others are JSON but not an object.
DAMAGE = ["'{not json'", "'[1, 2]'", "'\"text\"'", "'null'"]


def damage_on_insert(app: App, value: str, body: str | None = None) -> bool:
    """Every row logged for a partition ``ds=poison`` gets ``headers`` = ``value``
    (and ``body`` = ``body`` when given); True. False where the store cannot hold such
    a value: PostgreSQL's json column refuses text that is not JSON (asserted here,
    since that is why the readers need not expect it there)."""
    also = "" if body is None else f", body = {body}"
    engine = app.store.engine
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            conn.execute(text(
                "CREATE TRIGGER pn_test_damage AFTER INSERT ON pn_events "
                "WHEN NEW.body LIKE '%poison%' BEGIN "
                f"UPDATE pn_events SET headers = {value}{also} WHERE event_id = NEW.event_id; END"))
            return True
    if value == DAMAGE[0]:
        with pytest.raises(DataError, match="invalid input syntax for type json"), \
                engine.begin() as conn:
            conn.execute(text(f"UPDATE pn_events SET headers = {value} WHERE false"))
        return False
    with engine.begin() as conn:
        conn.execute(text(
            "CREATE FUNCTION pn_test_damage() RETURNS trigger AS $$ BEGIN "
            "IF NEW.body LIKE '%poison%' THEN "
            f"NEW.headers := {value}::json; "
            + ("" if body is None else f"NEW.body := {body}; ") + "END IF; "
            "RETURN NEW; END $$ LANGUAGE plpgsql"))
        conn.execute(text("CREATE TRIGGER pn_test_damage BEFORE INSERT ON pn_events "
                          "FOR EACH ROW EXECUTE FUNCTION pn_test_damage()"))
    return True
