"""Withdrawals and retractions as Dagster ``AssetObservation``s: recorded, no run.

Dagster has no "un-materialize": an observation on each partition the
withdrawal covers keeps the event in the asset's history (metadata
``partition_notify/withdrawn`` = True, the reason, the event ids), where an
``AutomationCondition`` or a person can see it; a materialization would start
downstream runs, which is what a withdrawal must not do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import dagster as dg
from partition_notify.integrations.withdrawn import taking_back
from partition_notify.store import LoggedEvent, TableInfo

from partition_notify.contract import PartitionDoneRetractedMessage, PartitionWithdrawnMessage
from partition_notify.contract.messages import PN_TABLE
from partition_notify.core.errors import InvalidSpecError

Taken = PartitionWithdrawnMessage | PartitionDoneRetractedMessage
#: The asset partition keys a message's spec stands for (sensors.partition_keys_for).
KeysOf = Callable[[Taken], list[str | dg.MultiPartitionKey | None]]


def observations(key: dg.AssetKey, events: Sequence[LoggedEvent], info: TableInfo,
                 keys_of: KeysOf, log: dg.DagsterLogManager) -> list[dg.AssetObservation]:
    """One observation per partition key a withdrawal/retraction of ``info`` covers."""
    mine = [e for e in events if e.headers.get(PN_TABLE) == info.qualified]
    out: list[dg.AssetObservation] = []
    for msg in taking_back(mine):
        if not isinstance(msg, PartitionWithdrawnMessage | PartitionDoneRetractedMessage):
            continue
        try:
            keys = keys_of(msg)
        except InvalidSpecError as exc:
            log.warning(f"withdrawal event {msg.event_id} not recorded: {exc}")
            continue
        meta = _metadata(msg)
        out += [dg.AssetObservation(asset_key=key, partition=pk, metadata=meta) for pk in keys]
    return out


def _metadata(msg: Taken) -> dict[str, object]:
    meta: dict[str, object] = {
        "partition_notify/withdrawn": True, "partition_notify/event_type": msg.event_type,
        "partition_notify/event_id": msg.event_id, "partition_notify/spec": msg.spec}
    if isinstance(msg, PartitionWithdrawnMessage):
        meta["partition_notify/reason"] = msg.reason
        meta["partition_notify/set_dones_withdrawn"] = [sd.event_id for sd in msg.set_dones]
    else:
        meta["partition_notify/rule"] = msg.rule
        meta["partition_notify/retracted_event_id"] = msg.retracted_event_id
    return meta
