"""The ``apache_airflow_provider`` entry point: what Airflow's ProvidersManager reads."""

from __future__ import annotations


def get_provider_info() -> dict[str, object]:
    return {
        "package-name": "partition-notify",
        "name": "partition-notify",
        "description": "Partition set-done notifications: deferrable sensor, event trigger "
        "(MessageQueueTrigger scheme 'partition-notify') and a push sink.",
        "triggers": [
            {"integration-name": "partition-notify",
             "python-modules": ["partition_notify.integrations.airflow.triggers"]},
        ],
        "sensors": [
            {"integration-name": "partition-notify",
             "python-modules": ["partition_notify.integrations.airflow.sensors"]},
        ],
        "queues": ["partition_notify.integrations.airflow.queues.PartitionNotifyQueueProvider"],
        "connection-types": [
            {"hook-class-name": "partition_notify.integrations.airflow.hook.PartitionNotifyHook",
             "connection-type": "partition_notify"},
        ],
    }
