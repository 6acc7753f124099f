"""DAGs the Airflow tests run with dag.test() (Airflow parses them from this folder)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from airflow.sdk import DAG, task
from partition_notify.integrations.airflow.sensors import PartitionSetDoneSensor

DATE = datetime(2011, 2, 28, tzinfo=UTC)
#: (dag id, Airflow connection id, sensor timeout in seconds: past the tests' 300 s arm wait)
SENSOR_DAGS = {
    "pn_sensor_embedded": ("pn_embedded", 360.0),
    "pn_sensor_activemq": ("pn_activemq", 360.0),
    "pn_sensor_timeout": ("pn_timeout", 1.5),
}


def sensor_dag(dag_id: str, conn_id: str, timeout: float) -> DAG:
    with DAG(dag_id, schedule=None, start_date=DATE, catchup=False) as dag:
        wait = PartitionSetDoneSensor(
            task_id="wait",
            table="sales.orders",
            spec="datestamp={{ ds_nodash }}/region=us",
            conn_id=conn_id,
            timeout=timeout,
        )

        @task
        def downstream(msg: dict[str, Any]) -> str:
            return f"{msg['partition_key']}@{msg['eventId']}"

        downstream(wait.output)
    return dag


for _dag_id, (_conn_id, _timeout) in SENSOR_DAGS.items():
    globals()[_dag_id] = sensor_dag(_dag_id, _conn_id, _timeout)
