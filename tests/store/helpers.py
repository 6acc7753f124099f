"""Helpers shared by the store-backed tests."""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import Engine, text

TABLES = ["pn_tables", "pn_partitions", "pn_events", "pn_sequence", "pn_set_done"]
ORDER = {"pn_tables": "id", "pn_partitions": "id", "pn_events": "event_id",
         "pn_sequence": "name", "pn_set_done": "id"}


def snapshot(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every store table, for before/after comparisons."""
    with engine.connect() as conn:
        return {t: [tuple(r) for r in conn.execute(text(f"SELECT * FROM {t} ORDER BY {ORDER[t]}"))]
                for t in TABLES}


def append_raw_event(engine: Engine, *, topic: str, table_id: int, body: str,
                     headers: dict[str, str], event_type: str = "PARTITION_DONE") -> int:
    """Write one event row straight into the log, allocating ids as the store does.

    Stands in for a buggy or foreign writer: the row bypasses all validation.
    """
    import json
    import uuid

    with engine.execution_options(pn_write=True).begin() as conn:
        lock = " FOR UPDATE" if conn.dialect.name == "postgresql" else ""
        event_id = conn.execute(
            text(f"SELECT next_value FROM pn_sequence WHERE name = 'event'{lock}")).scalar_one()
        conn.execute(text("UPDATE pn_sequence SET next_value = :v WHERE name = 'event'"),
                     {"v": event_id + 1})
        seq_name = f"topic:{topic}"
        seq = conn.execute(text(f"SELECT next_value FROM pn_sequence WHERE name = :n{lock}"),
                           {"n": seq_name}).scalar()
        if seq is None:
            seq = 1
            conn.execute(text("INSERT INTO pn_sequence (name, next_value) VALUES (:n, 2)"),
                         {"n": seq_name})
        else:
            conn.execute(text("UPDATE pn_sequence SET next_value = :v WHERE name = :n"),
                         {"v": seq + 1, "n": seq_name})
        conn.execute(
            text("INSERT INTO pn_events (event_id, topic, topic_seq, event_type, table_id, "
                 "message_id, headers, body, created_at, published_at, attempts) VALUES "
                 "(:e, :t, :s, :et, :tid, :m, :h, :b, 0, 0, 0)"),
            {"e": event_id, "t": topic, "s": seq, "et": event_type, "tid": table_id,
             "m": uuid.uuid4().hex, "h": json.dumps(headers), "b": body},
        )
    return int(event_id)


class Collector:
    """A subscription callback that records what it saw and can be awaited."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self._cond = threading.Condition()

    def __call__(self, msg: Any) -> None:
        with self._cond:
            self.messages.append(msg)
            self._cond.notify_all()

    def wait_for(self, predicate: Any, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self.messages), timeout)
