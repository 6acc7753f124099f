"""The store: tables, partitions, the event log (outbox) and set-done retention."""

from partition_notify.store.engine import make_engine
from partition_notify.store.migrate import migrate
from partition_notify.store.provider import (
    EventDraft,
    Logged,
    LoggedEvent,
    PartitionInfo,
    Store,
    TableInfo,
)
from partition_notify.store.uow import UnitOfWork

__all__ = [
    "EventDraft",
    "Logged",
    "LoggedEvent",
    "PartitionInfo",
    "Store",
    "TableInfo",
    "UnitOfWork",
    "make_engine",
    "migrate",
]
