"""Airflow integration (``pip install partition-notify[airflow]``).

* :class:`~partition_notify.integrations.airflow.sensors.PartitionSetDoneSensor`: a deferrable
  sensor for cron-scheduled DAGs.
* :class:`~partition_notify.integrations.airflow.triggers.PartitionSetDoneEventTrigger`: an
  event trigger for ``AssetWatcher`` (also ``MessageQueueTrigger(scheme="partition-notify")``).
* :mod:`partition_notify.integrations.airflow.push`: the push sink of ``partition-notify serve``
  (needs no Airflow package, only Airflow's REST API).

Nothing here imports Airflow at package import time.
"""

#: The ``conn_type`` of an Airflow Connection that configures partition-notify.
CONN_TYPE = "partition_notify"
#: The ``MessageQueueTrigger`` scheme resolved to our event trigger.
QUEUE_SCHEME = "partition-notify"
