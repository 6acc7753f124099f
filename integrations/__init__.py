"""Scheduler integrations: Airflow (``integrations.airflow``), Dagster (``integrations.dagster``).

Both are optional extras (``partition-notify[airflow]``, ``partition-notify[dagster]``);
the framework-free parts they share live in :mod:`integrations.shared` and
:mod:`integrations.follow`.
"""
