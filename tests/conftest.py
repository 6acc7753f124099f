"""Shared fixtures; helpers live in tests/support/.

Services (PostgreSQL, brokers, Spark) are *required* in CI (``CI=true``): a
missing one fails the test. On a laptop it is skipped with the reason.
Every test that reaches a service through a fixture gets the service's marker
here (tests/support/markers.py), so ``-m "not broker"`` means it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from tests.support.accounts import SERVICE_PASSWORD, SERVICE_USER, bus_specs
from tests.support.ci import require
from tests.support.markers import mark_by_fixtures, uses
from tests.support.net import stomp_probe
from tests.support.postgres import PG_ADMIN_URL, PostgresDatabases


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_by_fixtures(items)


@pytest.fixture(scope="session")
@uses("postgres")
def postgres() -> Iterator[PostgresDatabases | None]:
    dbs = PostgresDatabases(PG_ADMIN_URL)
    try:
        dbs.start()
    except Exception:  # reported by the tests that need it (skip, or fail in CI)
        dbs.admin.dispose()
        yield None
        return
    yield dbs
    dbs.close()


@pytest.fixture(params=["sqlite", "postgresql"])
@uses("postgres", when=lambda param: param == "postgresql")
def store_url(request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> Iterator[str]:
    """A fresh, empty, migrated store: SQLite file or PostgreSQL database.

    PostgreSQL is asked for only by the postgresql variant, so the SQLite one
    runs (and stays unmarked) without it.
    """
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/store.db"
        return
    postgres: PostgresDatabases | None = request.getfixturevalue("postgres")
    require(postgres is not None, f"PostgreSQL at {PG_ADMIN_URL} is not reachable")
    assert postgres is not None
    url = postgres.new()
    yield url
    postgres.drop(url)


@pytest.fixture(scope="session")
@uses("broker")
def activemq_url() -> str:
    """The suite's shared ActiveMQ (scripts/services.sh); it must accept the service account."""
    url = bus_specs()["activemq"].url
    require(stomp_probe(urlsplit(url).port or 61613, SERVICE_USER, SERVICE_PASSWORD)
            == "CONNECTED", f"ActiveMQ at {url} does not accept {SERVICE_USER} "
            "(scripts/services.sh up)")
    return url


@pytest.fixture
def sqlite_url(tmp_path: os.PathLike[str]) -> str:
    return f"sqlite:///{tmp_path}/store.db"


@pytest.fixture
def app(store_url: str) -> Iterator[object]:
    """An embedded-transport app on the parametrised store."""
    from partition_notify.app import build_app

    application = build_app(store_url=store_url, transport_url="embedded://")
    yield application
    application.close()


@pytest.fixture(autouse=True)
def _loggers_enabled() -> None:
    # A logging.config call earlier in the run (dictConfig/fileConfig disable the
    # loggers that already exist) must not silence a later test's caplog checks.
    for logger in logging.Logger.manager.loggerDict.values():
        if isinstance(logger, logging.Logger):
            logger.disabled = False
