"""Airflow 3 (task SDK) imports, with the Airflow 2.x locations as fallback.

Only Airflow 3.3 is tested; the 2.x fallbacks cost one import each.
"""

from __future__ import annotations

try:
    from airflow.sdk import BaseHook, BaseSensorOperator
except ImportError:  # pragma: no cover - Airflow 2.x
    from airflow.hooks.base import BaseHook
    from airflow.sensors.base import BaseSensorOperator

try:
    from airflow.sdk.exceptions import AirflowSensorTimeout
except ImportError:  # pragma: no cover - Airflow 2.x
    from airflow.exceptions import AirflowSensorTimeout

from airflow.triggers.base import BaseTrigger, TriggerEvent

try:
    from airflow.triggers.base import BaseEventTrigger
except ImportError:  # pragma: no cover - Airflow < 3.0 has no event triggers
    BaseEventTrigger = BaseTrigger

__all__ = [
    "AirflowSensorTimeout",
    "BaseEventTrigger",
    "BaseHook",
    "BaseSensorOperator",
    "BaseTrigger",
    "TriggerEvent",
]
