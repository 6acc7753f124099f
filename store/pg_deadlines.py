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
  whatever the kernel sees;
* the same deadlines on the server's side (:func:`server_options`,
  :func:`versioned_settings`). Without them the server ran a statement the
  client had given up on, holding its locks, until it next wrote to the socket,
  and never noticed a client behind a frozen network
  (tests/store/test_postgres_server_deadlines.py): ``statement_timeout`` just past
  the reply deadline (lifted with it for migrations, store/migrate.py),
  ``client_connection_check_interval`` (PostgreSQL >= 14) and the server's TCP
  keepalives and ``tcp_user_timeout``. No ``idle_in_transaction_session_timeout``:
  a writer's callback (``in_txn``) may write files inside the store's
  transaction for longer than any statement runs.

A store URL's own libpq parameters (``?keepalives_idle=...``, ``?options=-c ...``)
win over these. Behind a pooler that refuses or drops the startup options
(PgBouncer) the server-side ones are set per transaction instead (store/pg_pooler.py).
"""

from __future__ import annotations

import functools
import logging
import math
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import Engine

from partition_notify.core.limits import CONNECT_TIMEOUT_SECONDS, STORE_REPLY_TIMEOUT_SECONDS

if TYPE_CHECKING:  # psycopg is the [postgres] extra: imported when a store needs it
    import psycopg

#: Within this a peer that stopped acknowledging is reported by the kernel: idle
#: 10 s, then 4 probes 5 s apart; unacknowledged data is given up after as long.
DEAD_PEER_SECONDS = 30
#: The server's ``statement_timeout`` is the reply deadline plus this: the client's
#: deadline fires first (its error names the setting and the server) and the
#: server's ends the statement when the client's close cannot reach it.
STATEMENT_MARGIN_MS = 1000
#: How often the server checks, while a statement runs, that its client is still
#: connected: one poll() of the socket, negligible; a statement whose client
#: closed the connection holds its locks at most about this much longer.
CLIENT_CHECK_MS = 2000
#: (server version from which a setting exists, name, value) of the settings sent
#: after connecting: older servers refuse an unknown name in the startup packet.
_VERSIONED = ((120000, "tcp_user_timeout", str(DEAD_PEER_SECONDS * 1000)),
              (140000, "client_connection_check_interval", str(CLIENT_CHECK_MS)))
#: A setting of the store's startup options that only they set: seen in the session,
#: the options arrived (a pooler may drop them silently, store/pg_pooler.py).
ARRIVED = "partition_notify.options"
log = logging.getLogger(__name__)
#: The reply deadline and the libpq arguments (TCP, connect timeout, options) per engine made by
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
                                   tcp_args(engine.url.query, CONNECT_TIMEOUT_SECONDS))


def server_options(reply_seconds: float | None) -> str:
    """libpq ``options`` (``-c`` settings of the server's session, known to every
    supported server) that end a statement the client gave up on, and let the
    server notice a vanished client: its keepalives are the client's; and
    :data:`ARRIVED`, which tells that they reached the server."""
    keepalives = (f"-c tcp_keepalives_idle={DEAD_PEER_SECONDS // 3} "
                  f"-c tcp_keepalives_interval={DEAD_PEER_SECONDS // 6} "
                  f"-c tcp_keepalives_count=4 -c {ARRIVED}=on")
    if reply_seconds is None:
        return keepalives
    # The server takes at most 2**31 - 1 ms (24.8 days) and refuses the connection past it.
    statement_ms = min(math.ceil(reply_seconds * 1000) + STATEMENT_MARGIN_MS, 2**31 - 1)
    return f"-c statement_timeout={statement_ms} {keepalives}"


def versioned_settings(server_version: int) -> list[tuple[str, str]]:
    """(name, value) of the session settings a server of ``server_version``
    (libpq's number, 150004 for 15.4) knows, of those sent after connecting."""
    return [(name, value) for since, name, value in _VERSIONED if server_version >= since]


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


class Pooler(Protocol):
    """store/pg_pooler.py's Pooler, as :func:`connect` uses it (that module imports this one)."""

    pooled: bool | None

    def refuses_options(self, exc: BaseException) -> bool: ...

    def refused(self, server: str, url: str) -> None: ...

    def connected(self, pooled: bool, server: str, server_version: int) -> None: ...


def connect(reply_seconds: float | None, *args: Any, pooler: Pooler | None = None,
            url: str = "", **kwargs: Any) -> psycopg.Connection[Any]:
    """A psycopg connection with the reply deadline; a connect that timed out names
    the server and the setting (psycopg says only "connection timeout expired").
    With a ``pooler`` (store/pg_pooler.py), a server that refuses the startup
    options is connected to again without them, and the engine is pooled from then on."""
    import psycopg

    if pooler is not None and pooler.pooled:
        kwargs.pop("options", None)
    try:
        conn = _connect(args, kwargs)
    except psycopg.OperationalError as exc:
        if pooler is None or "options" not in kwargs or not pooler.refuses_options(exc):
            raise
        pooler.refused(_server(args, kwargs), url)  # or a ConfigurationError
        kwargs.pop("options")
        conn = _connect(args, kwargs)
    conn.reply_timeout = reply_seconds
    assert isinstance(conn, psycopg.Connection)
    try:
        if "options" in kwargs and not _set_versioned(conn) and pooler is not None:
            # A pooler that drops them without a word (PgBouncer's
            # ignore_startup_parameters = options): as one that refuses them.
            pooler.refused(_server(args, kwargs), url)
            kwargs.pop("options")
        if pooler is not None:
            pooler.connected("options" not in kwargs, _server(args, kwargs),
                             conn.info.server_version)
        if "options" not in kwargs:  # behind a pooler: nothing in the server's session
            conn.prepare_threshold = None
    except BaseException:
        conn.close()
        raise
    return conn


def _connect(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    import psycopg

    try:
        return connection_class().connect(*args, **kwargs)
    except psycopg.errors.ConnectionTimeout as exc:
        seconds = max(2, int(kwargs.get("connect_timeout", 0)))  # psycopg's least: 2 s
        raise psycopg.OperationalError(
            f"no answer from PostgreSQL at {_server(args, kwargs)} within the connect "
            f"deadline ({seconds} s per address, PN_CONNECT_TIMEOUT_SECONDS)") from exc


def _set_versioned(conn: psycopg.Connection[Any]) -> bool:
    """Send :func:`versioned_settings` in one round trip, unless the URL's
    ``options`` set them; a server too old for one is noted once. False, with
    nothing set, if the startup options did not reach the server's session
    (:data:`ARRIVED` is not set there)."""
    given = str(conn.info.get_parameters().get("options", ""))
    version = conn.info.server_version
    settings = [(n, v) for n, v in versioned_settings(version) if f"{n}=" not in given]
    if version < _VERSIONED[-1][0]:
        _note_old_server(f"{conn.info.host}:{conn.info.port}", version)
    calls = ", ".join(["1", *("set_config(%s, %s, false)" for _ in settings)])
    arrived = conn.execute(f"SELECT {calls} WHERE current_setting('{ARRIVED}', true) = 'on'",
                           [x for pair in settings for x in pair]).fetchall()
    if not conn.autocommit:
        conn.commit()
    return bool(arrived)


@functools.lru_cache(maxsize=16)  # once per server: noted, not per connection
def _note_old_server(server: str, version: int) -> None:
    missing = [name for since, name, _ in _VERSIONED if version < since]
    log.info("PostgreSQL at %s is version %d.%d: it has no %s; a statement whose "
             "client gave up ends at its statement_timeout instead", server,
             version // 10000, version % 10000, ", ".join(missing))


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
