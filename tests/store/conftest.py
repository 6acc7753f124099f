"""Fixtures of the store's own tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from partition_notify.store import Store

from tests.support.ci import require
from tests.support.postgres import PG_ADMIN_URL, PostgresDatabases


@pytest.fixture
def pg_store(postgres: PostgresDatabases | None) -> Iterator[Store]:
    """An open store on a fresh, migrated PostgreSQL database: the plan tests' subject.

    PostgreSQL only, never skipped in CI (``require``); closed and dropped afterwards.
    """
    require(postgres is not None, f"PostgreSQL at {PG_ADMIN_URL} is not reachable")
    assert postgres is not None
    url = postgres.new()
    store = Store.open(url)
    try:
        yield store
    finally:
        store.close()
        postgres.drop(url)
