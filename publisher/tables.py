"""Registering a table: validate its name, keys, retention, location and topic, then
write it to the catalog (:meth:`Publisher.register_table`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from partition_notify.store import Store, TableInfo

from partition_notify.contract import TopicPolicy, names, topic_for
from partition_notify.core import limits


class TableDefaults(Protocol):
    """What a registration reads of :class:`PublisherConfig` (publisher.py imports
    this module, so it is not imported back)."""

    @property
    def default_retention_seconds(self) -> int: ...
    @property
    def topic_prefix(self) -> str: ...
    @property
    def topic_policy(self) -> TopicPolicy: ...


def register(
    store: Store, config: TableDefaults, db: str, table: str,
    partition_keys: Sequence[str], *, retention_seconds: int | None = None,
    topic: str | None = None, location: str | None = None, change_existing: bool = True,
) -> tuple[TableInfo, bool]:
    """(the table, whether this call created it); nothing is stored on bad input.
    ``change_existing=False``: an existing table is returned as stored (see
    :meth:`Catalog.register_table`)."""
    db_n, table_n = names.db_name(db), names.table_name(table)
    # list('ds') would silently become keys ['d', 's']; let the name rules refuse a str.
    keys = names.partition_keys(list(partition_keys) if isinstance(partition_keys, Iterable)
                                and not isinstance(partition_keys, str) else partition_keys)
    what = f"{db_n}.{table_n}"
    explicit = retention_seconds is not None
    retention = limits.retention_seconds(
        retention_seconds if explicit else config.default_retention_seconds, what=what
    )
    if location is not None:
        location = limits.location(location, field=f"location of {what}")
    name = topic_for(db_n, table_n, prefix=config.topic_prefix, policy=config.topic_policy,
                     override=topic)
    return store.catalog.register_table(
        db_n,
        table_n,
        keys,
        topic=name,
        retention_seconds=retention,
        topic_override=topic,
        location=location,
        # Re-registering applies what the caller states; it never silently keeps the old.
        update_retention=explicit,
        change_existing=change_existing,
    )
