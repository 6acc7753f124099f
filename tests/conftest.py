"""Shared fixtures.

Services (PostgreSQL, brokers, Spark) are *required* in CI (``CI=true``): a
missing one fails the test. On a laptop it is skipped with the reason.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

IN_CI = os.environ.get("CI", "").lower() == "true"
PG_ADMIN_URL = os.environ.get(
    "PN_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


def require(ok: bool, reason: str) -> None:
    """Skip on a laptop, fail in CI."""
    if not ok:
        if IN_CI:
            pytest.fail(f"required service missing in CI: {reason}", pytrace=False)
        pytest.skip(reason)


class PostgresDatabases:
    """Fresh databases cloned from one migrated template: isolation at ~0.1 s a test."""

    def __init__(self, admin_url: str) -> None:
        self.admin = create_engine(admin_url, isolation_level="AUTOCOMMIT",
                                   connect_args={"connect_timeout": 5})
        self.base = admin_url.rsplit("/", 1)[0]
        self.template = f"pn_tpl_{uuid.uuid4().hex[:10]}"
        self.created: list[str] = []

    def start(self) -> None:
        from store import make_engine, migrate

        with self.admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{self.template}"'))
        engine = make_engine(f"{self.base}/{self.template}")
        migrate(engine)
        engine.dispose()

    def new(self) -> str:
        name = f"pn_t_{uuid.uuid4().hex[:12]}"
        with self.admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"'))
        self.created.append(name)
        return f"{self.base}/{name}"

    def drop(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        with self.admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))

    def close(self) -> None:
        with self.admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{self.template}" WITH (FORCE)'))
        self.admin.dispose()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresDatabases | None]:
    dbs = PostgresDatabases(PG_ADMIN_URL)
    try:
        dbs.start()
    except Exception as exc:  # noqa: BLE001 - reported by the tests that need it
        dbs.admin.dispose()
        dbs.error = str(exc)  # type: ignore[attr-defined]
        yield None
        return
    yield dbs
    dbs.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: os.PathLike[str],
              postgres: PostgresDatabases | None) -> Iterator[str]:
    """A fresh, empty, migrated store: SQLite file or PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/store.db"
        return
    require(postgres is not None, f"PostgreSQL at {PG_ADMIN_URL} is not reachable")
    assert postgres is not None
    url = postgres.new()
    yield url
    postgres.drop(url)


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
