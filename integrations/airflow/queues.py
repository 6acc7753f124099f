"""``MessageQueueTrigger(scheme="partition-notify", table=..., ...)`` resolves here.

Registered through the ``queues`` entry of our provider info
(:mod:`partition_notify.integrations.airflow.provider_info`), which the common.messaging
provider reads via Airflow's ProvidersManager.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow.providers.common.messaging.providers.base_provider import BaseMessageQueueProvider
from partition_notify.integrations.airflow import QUEUE_SCHEME

if TYPE_CHECKING:
    from partition_notify.integrations.airflow.triggers import PartitionSetDoneEventTrigger


class PartitionNotifyQueueProvider(BaseMessageQueueProvider):  # type: ignore[misc]
    scheme = QUEUE_SCHEME

    def trigger_class(self) -> type[PartitionSetDoneEventTrigger]:
        from partition_notify.integrations.airflow.triggers import PartitionSetDoneEventTrigger

        return PartitionSetDoneEventTrigger
