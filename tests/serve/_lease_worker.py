"""Entry point of the lease-race processes (importable under 'spawn')."""

from __future__ import annotations

from typing import Any


def claim_all(store_url: str, owner: str, batch: int, barrier: Any, out: Any) -> None:
    """Lease, 'publish' (record), mark, until nothing is left; report what was claimed."""
    from partition_notify.store import Store

    store = Store.open(store_url)
    claimed: list[list[int]] = []
    barrier.wait(60)
    idle = 0
    while idle < 3:
        events = store.log.lease_unpublished(owner, batch, 30.0)
        if not events:
            idle += 1
            continue
        idle = 0
        claimed.append([e.event_id for e in events])
        store.log.mark_published([e.event_id for e in events])
    out.put((owner, claimed))
    store.close()
