"""A draft's message built once: validated by pydantic, then copied with each real id.

Every publish builds its message twice, once with the widest ids to check its
size before anything is logged, once in the write transaction with the ids
the log hands out. Only ids, times and the message id differ between the
two, all made by us, so the second is a copy of the first with those fields
replaced (``model_copy``: no second validation; bench/durable_publish.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import TypeVar, cast

from partition_notify.store import TableInfo
from partition_notify.store.catalog import Catalog
from pydantic import BaseModel

from partition_notify.contract import AnyMessage
from partition_notify.core.errors import CatalogChanged, ValidationError

R = TypeVar("R")
#: Appends tried with a table read afresh after the catalog changed under the first.
CATALOG_ATTEMPTS = 3

Build = Callable[[int, int, float], AnyMessage]


def ids(event_id: int, seq: int, now: float) -> dict[str, object]:
    """The fields that differ between two builds of one draft (python names)."""
    return {
        "event_id": event_id,
        "topic_seq": seq,
        "timestamp": int(now),
        "timestamp_ms": int(now * 1000),
        "message_id": uuid.uuid4().hex,
    }


def once(model: type[BaseModel], fixed: Mapping[str, object],
         varying: Callable[[float], Mapping[str, object]] | None = None) -> Build:
    """A build that validates ``fixed`` plus the ids on its first call and copies after.

    ``varying(now)``: further fields that depend on the time (a set-done's expiry).
    """
    template: list[AnyMessage] = []

    def build(event_id: int, seq: int, now: float) -> AnyMessage:
        fields = ids(event_id, seq, now)
        if varying is not None:
            fields.update(varying(now))
        if not template:
            template.append(cast(AnyMessage, model.model_validate({**fixed, **fields})))
            return template[0]
        return template[0].model_copy(update=fields)

    return build


def with_cached_table(catalog: Catalog, db: str, name: str,
                      attempt: Callable[[TableInfo, int | None], R]) -> R:
    """``attempt(table, catalog version)`` with the table from the catalog's cache.

    The append refuses a draft whose catalog version is no longer current
    (CatalogChanged: a catalog write in this or another process came in
    between, nothing was logged); the table is then read afresh and the
    draft built again from it, at most :data:`CATALOG_ATTEMPTS` times.
    Input refused against a cached table is checked again against a fresh
    read: the keys may have changed since, and the answer must be today's.
    """
    tries = 1
    while True:
        info, version, hit = catalog.cached_table(db, name)
        try:
            return attempt(info, version)
        except ValidationError:
            if not hit:
                raise
            catalog.forget(db, name)
        except CatalogChanged:
            catalog.forget(db, name)
            if tries == CATALOG_ATTEMPTS:
                raise
            tries += 1
