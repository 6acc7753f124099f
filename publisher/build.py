"""A publish against the catalog's cached table, tried again when the catalog changed.

(Messages themselves are built from one validated template per table:
publisher/templates.py.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from partition_notify.store import TableInfo
from partition_notify.store.catalog import Catalog

from partition_notify.core.errors import CatalogChanged, ValidationError

R = TypeVar("R")
#: Appends tried with a table read afresh after the catalog changed under the first.
CATALOG_ATTEMPTS = 3


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
