"""Scheduler integrations: Airflow (``partition_notify.integrations.airflow``),
Dagster (``partition_notify.integrations.dagster``).

Both are optional extras (``partition-notify[airflow]``, ``partition-notify[dagster]``);
the framework-free parts they share live in :mod:`partition_notify.integrations.shared` and
:mod:`partition_notify.integrations.follow`.
"""
