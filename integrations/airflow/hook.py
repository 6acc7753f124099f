"""``PartitionNotifyHook``: registers the ``partition_notify`` connection type with Airflow.

Its only job is the Connection form and a connection test; operators and
triggers read the Connection through :mod:`partition_notify.integrations.airflow.connection`.
"""

from __future__ import annotations

from partition_notify.integrations.airflow import CONN_TYPE
from partition_notify.integrations.airflow._compat import BaseHook
from partition_notify.integrations.airflow.connection import get_settings


class PartitionNotifyHook(BaseHook):  # type: ignore[misc]
    conn_name_attr = "conn_id"
    default_conn_name = "partition_notify_default"
    conn_type = CONN_TYPE
    hook_name = "partition-notify"

    def __init__(self, conn_id: str = default_conn_name, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.conn_id = conn_id

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, object]:
        return {
            "hidden_fields": ["host", "port", "schema"],
            "relabeling": {"login": "Broker user", "password": "Broker password"},
            "placeholders": {
                "extra": '{"store_url": "postgresql+psycopg://pn_reader@db/pn", '
                         '"transport_url": "stomp://activemq:61613"}',
            },
        }

    def test_connection(self) -> tuple[bool, str]:
        """Open the store (one query) with the connection's settings."""
        from partition_notify.integrations import shared

        try:
            store = shared.entry(get_settings(self.conn_id)).app.store
            return True, f"store reachable, last event id {store.log.max_event_id()}"
        except Exception as exc:  # reported to the UI, not raised
            return False, f"{type(exc).__name__}: {exc}"
