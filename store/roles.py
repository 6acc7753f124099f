"""Apply ``store/sql/readonly_role.sql``: the read-only PostgreSQL role for consumers."""

from __future__ import annotations

import re
from pathlib import Path

from partition_notify.store.uow import map_db_error
from pydantic import SecretStr
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from partition_notify.core.errors import ConfigurationError, StoreError

READONLY_SQL = Path(__file__).with_name("sql") / "readonly_role.sql"
DEFAULT_ROLE = "pn_reader"
_ROLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def readonly_role_sql(role: str = DEFAULT_ROLE) -> str:
    """The shipped SQL, for ``role`` instead of ``pn_reader``."""
    if not _ROLE_NAME.fullmatch(role):
        raise ConfigurationError(
            f"role name {role!r} must be lower-case letters, digits and _ (at most 63), "
            "starting with a letter or _"
        )
    return READONLY_SQL.read_text().replace(DEFAULT_ROLE, role)


def apply_readonly_role(
    engine: Engine, role: str = DEFAULT_ROLE, password: SecretStr | None = None
) -> None:
    """Create/refresh the read-only role in the engine's database (PostgreSQL only).

    Idempotent: run it again after migrations that add tables. The password,
    if given, is sent as a quoted literal and never logged.
    """
    if engine.dialect.name != "postgresql":
        raise ConfigurationError(
            f"a read-only role needs PostgreSQL; the store is {engine.dialect.name} "
            "(protect a SQLite file with file permissions instead)"
        )
    sql = readonly_role_sql(role)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(sql)
            if password is not None:
                from psycopg import sql as pgsql

                raw = conn.connection.dbapi_connection
                stmt = pgsql.SQL("ALTER ROLE {} PASSWORD {}").format(
                    pgsql.Identifier(role), pgsql.Literal(password.get_secret_value())
                )
                assert raw is not None  # inside engine.begin(): connected
                try:
                    cur = raw.cursor()
                    try:
                        cur.execute(stmt)
                    finally:
                        cur.close()
                except Exception as exc:
                    # psycopg's message names the failure, never the statement's literal.
                    raise StoreError(
                        f"setting the password of role {role}: {type(exc).__name__}: "
                        f"{str(exc).strip()[:200]}"
                    ) from None
    except SQLAlchemyError as exc:
        raise map_db_error(exc) from exc
