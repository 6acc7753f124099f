"""The store: tables, partitions, the event log (outbox) and set-done retention."""

from store.engine import make_engine
from store.migrate import migrate
from store.provider import EventDraft, LoggedEvent, PartitionInfo, Store, TableInfo
from store.uow import UnitOfWork

__all__ = [
    "EventDraft",
    "LoggedEvent",
    "PartitionInfo",
    "Store",
    "TableInfo",
    "UnitOfWork",
    "make_engine",
    "migrate",
]
