"""Deadlines of the store's PostgreSQL connections: none may wait forever.

Left to libpq and the kernel, a server that stops answering holds a caller for as
long as TCP lets it: a host gone without a reset is noticed after the kernel's
retransmissions (~15 min) or keepalives (2 h 11 min), a hung server or a frozen
middlebox whose kernel still acknowledges is never noticed
(tests/store/test_postgres_deadlines.py). So every connection the store opens
(engine, kept hot-read connections, the wake-up listener) gets:

* libpq's TCP keepalives and ``tcp_user_timeout`` (:func:`tcp_args`): the kernel
  reports a peer that stopped acknowledging within :data:`DEAD_PEER_SECONDS`;
* a reply deadline (:func:`connection_class`): a statement whose reply has not
  arrived in PN_STORE_REPLY_TIMEOUT_SECONDS fails and its connection is closed,
  whatever the kernel sees. It is client-side only: a server ``statement_timeout``
  would also need lifting for migrations, and a statement the client gave up on
  ends with its connection on a reachable server.

A store URL's own libpq parameters (``?keepalives_idle=...``) win over these.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from partition_notify.core.limits import STORE_REPLY_TIMEOUT_SECONDS

if TYPE_CHECKING:  # psycopg is the [postgres] extra: imported when a store needs it
    import psycopg

#: Within this a peer that stopped acknowledging is reported by the kernel: idle
#: 10 s, then 4 probes 5 s apart; unacknowledged data is given up after as long.
DEAD_PEER_SECONDS = 30
#: The reply deadline, the TCP arguments and the connect timeout per engine made by
#: make_engine: the wake-up listener opens its connection with the same.
_CONFIG: weakref.WeakKeyDictionary[Engine, tuple[float | None, dict[str, Any]]] = (
    weakref.WeakKeyDictionary())


def tcp_args(query: Mapping[str, object], connect_timeout_seconds: float) -> dict[str, Any]:
    """libpq connection arguments for a dead peer and a silent listener, less those
    the URL's ``query`` sets itself."""
    args: dict[str, Any] = {
        "connect_timeout": max(1, int(connect_timeout_seconds)),
        "keepalives": 1,
        "keepalives_idle": DEAD_PEER_SECONDS // 3,
        "keepalives_interval": DEAD_PEER_SECONDS // 6,
        "keepalives_count": 4,
        "tcp_user_timeout": DEAD_PEER_SECONDS * 1000,
    }
    return {k: v for k, v in args.items() if k not in query}


def remember(engine: Engine, reply_seconds: float | None, args: dict[str, Any]) -> None:
    _CONFIG[engine] = (reply_seconds, args)


def config(engine: Engine) -> tuple[float | None, dict[str, Any]]:
    """(reply deadline, libpq arguments) of a PostgreSQL engine; the defaults for an
    engine make_engine did not make."""
    return _CONFIG.get(engine) or (STORE_REPLY_TIMEOUT_SECONDS,
                                   tcp_args(engine.url.query, 10.0))


def lifted(dbapi_connection: object) -> object:
    """Lift the reply deadline of a connection (a migration's DDL may take long);
    returns what to restore with :func:`restore`."""
    previous = getattr(dbapi_connection, "reply_timeout", None)
    if hasattr(dbapi_connection, "reply_timeout"):
        dbapi_connection.reply_timeout = None
    return previous


def restore(dbapi_connection: object, previous: object) -> None:
    if hasattr(dbapi_connection, "reply_timeout"):
        dbapi_connection.reply_timeout = previous


def connect(reply_seconds: float | None, *args: Any, **kwargs: Any) -> psycopg.Connection[Any]:
    """A psycopg connection with the reply deadline; a connect that timed out names
    the server and the setting (psycopg says only "connection timeout expired")."""
    import psycopg

    cls = connection_class()
    try:
        conn = cls.connect(*args, **kwargs)
    except psycopg.errors.ConnectionTimeout as exc:
        seconds = max(2, int(kwargs.get("connect_timeout", 0)))  # psycopg's least: 2 s
        raise psycopg.OperationalError(
            f"no answer from PostgreSQL at {_server(args, kwargs)} within the connect "
            f"deadline ({seconds} s per address, PN_CONNECT_TIMEOUT_SECONDS)") from exc
    conn.reply_timeout = reply_seconds
    assert isinstance(conn, psycopg.Connection)
    return conn


def _server(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
    import psycopg

    # Only the address: the other arguments may hold a password or an adapters map.
    params = psycopg.conninfo.conninfo_to_dict(str(args[0]) if args else "")
    host = kwargs.get("host") or params.get("host") or "localhost"
    return f"{host}:{kwargs.get('port') or params.get('port') or 5432}"


@functools.cache
def connection_class() -> Any:
    """psycopg's Connection whose every wait for the server ends by ``reply_timeout``."""
    import psycopg
    from psycopg.abc import RV, PQGen

    class DeadlineConnection(psycopg.Connection[Any]):
        #: Seconds a statement's reply may take; None: no deadline (migrations).
        reply_timeout: float | None = None

        def wait(self, gen: PQGen[RV], interval: float = 0.1,
                 timeout: float | None = None) -> RV:
            limit = self.reply_timeout if timeout is None else timeout
            try:
                return super().wait(gen, interval, limit)
            except psycopg.errors.OperationalError as exc:
                if timeout is not None or type(exc).__name__ != "_WaitTimeout":
                    raise
            # Mid-protocol: the connection cannot be used again. Closed, the pool
            # (SQLAlchemy's is_disconnect) and the hot reads discard it.
            where = f"{self.info.host}:{self.info.port}"
            self.pgconn.finish()
            raise psycopg.OperationalError(
                f"no reply from PostgreSQL at {where} within {limit:g} s "
                "(PN_STORE_REPLY_TIMEOUT_SECONDS); connection closed")

    return DeadlineConnection
