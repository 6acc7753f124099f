"""Fresh PostgreSQL databases for tests, cloned from one migrated template."""

from __future__ import annotations

import uuid

from sqlalchemy import create_engine, text

from tests.support import accounts

PG_ADMIN_URL = accounts.POSTGRES_URL


class PostgresDatabases:
    """Fresh databases cloned from one migrated template: isolation at ~0.1 s a test."""

    def __init__(self, admin_url: str = PG_ADMIN_URL) -> None:
        self.admin = create_engine(admin_url, isolation_level="AUTOCOMMIT",
                                   connect_args={"connect_timeout": 5})
        self.base = admin_url.rsplit("/", 1)[0]
        self.template = f"pn_tpl_{uuid.uuid4().hex[:10]}"
        self.created: list[str] = []

    def start(self) -> None:
        from partition_notify.store import make_engine, migrate

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
