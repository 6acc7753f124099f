"""``PartitionSetDoneSensor``: wait for a partition set without polling."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from partition_notify.integrations import shared
from partition_notify.integrations.airflow._compat import AirflowSensorTimeout, BaseSensorOperator
from partition_notify.integrations.airflow.connection import get_settings
from partition_notify.integrations.airflow.triggers import DONE, TIMEOUT, PartitionSetDoneTrigger

from partition_notify.contract import SetDoneMessage, decode, spec
from partition_notify.core.errors import UnknownTableError

if TYPE_CHECKING:
    from airflow.sdk import Context, PokeReturnValue


class PartitionSetDoneSensor(BaseSensorOperator):  # type: ignore[misc]
    """Succeeds once ``spec`` of ``table`` is marked done; returns the set-done (XCom).

    Deferrable by default: the task frees its worker slot at once and the
    triggerer wakes it when the set-done arrives (or at ``timeout``, which
    fails the sensor with ``AirflowSensorTimeout``). ``deferrable=False``
    pokes the retention table every ``poke_interval`` instead. ``table`` and
    ``spec`` are templated (``spec="datestamp={{ ds_nodash }}/region=us"``).
    """

    template_fields: Sequence[str] = ("table", "spec")

    def __init__(
        self,
        *,
        table: str,
        spec: str,
        conn_id: str | None = None,
        deferrable: bool = True,
        **kwargs: object,
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.spec = spec
        self.conn_id = conn_id
        self.deferrable = deferrable

    def execute(self, context: Context) -> object:
        if not self.deferrable:
            return super().execute(context)
        self.defer(
            trigger=PartitionSetDoneTrigger(
                table=self.table,
                spec=self.spec,
                deadline=time.time() + float(self.timeout),
                conn_id=self.conn_id,
            ),
            method_name="execute_complete",
        )  # raises TaskDeferred: the task resumes in execute_complete
        return None

    def execute_complete(self, context: Context, event: dict[str, object]) -> object:
        status = event.get("status")
        if status == DONE:
            message = event["message"]
            assert isinstance(message, dict)  # the trigger's payload of a set-done
            self.log.info("set-done %s of %s: event %s", message["spec"], self.table,
                          message["eventId"])
            return message
        if status == TIMEOUT and event.get("registered") is False:
            raise AirflowSensorTimeout(
                f"table {event.get('table')} is not registered: waited for it the sensor "
                f"timeout of {self.timeout:g} s (register it: partition-notify register)"
            )
        if status == TIMEOUT:
            raise AirflowSensorTimeout(
                f"no set-done covering {event.get('spec')!r} of {event.get('table')} "
                f"within the sensor timeout of {self.timeout:g} s"
            )
        from airflow.exceptions import AirflowException

        raise AirflowException(f"partition-notify trigger failed: {event.get('error')}")

    def poke(self, context: Context) -> bool | PokeReturnValue:
        """Poke mode: one indexed look-up of the newest covering set-done in the retention table."""
        store = shared.entry(get_settings(self.conn_id)).app.store
        db, name = shared.split_table(self.table)
        try:
            info = store.catalog.get_table(db, name)
        except UnknownTableError:  # not registered yet: the producer's first run will
            self.log.info("table %s is not registered yet; poking again", self.table)
            return False
        wanted = spec.coerce(self.spec)
        spec.check_against(wanted, info.partition_keys, full=False, table=info.qualified)
        # The newest: a set done again (re-run, backfill) carries the newer revision.
        body = store.retention.newest_covering(info, spec.covering_specs(wanted))
        if body is None:
            return False
        msg = decode(body)
        assert isinstance(msg, SetDoneMessage)
        from airflow.sdk import PokeReturnValue

        return PokeReturnValue(True, shared.payload(msg, info.partition_keys))
