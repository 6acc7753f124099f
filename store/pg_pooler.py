"""The store's PostgreSQL connections through a connection pooler (PgBouncer).

PgBouncer refuses libpq's startup ``options`` ("unsupported startup parameter:
options"), which carried the store's server-side deadlines
(store/pg_deadlines.py), so it refused every connection. In its transaction
mode a session's settings and prepared statements stay on whichever server
connection ran them: a ``SET`` would leak to other clients and not hold for our
next transaction, and psycopg's prepared statements would be missing on the
next one ("prepared statement \"_pg3_0\" does not exist").

So when a server refuses the startup options, or drops them without a word
(``ignore_startup_parameters = options``: their marker setting is missing,
store/pg_deadlines.py), the engine is *pooled* from then on (one log line, once
per engine): its connections are opened without them,
prepare nothing, set no session settings, and every transaction begins with
its deadlines as transaction-scoped settings (``set_config(..., true)``, i.e.
``SET LOCAL``) in one round trip; single-statement reads run in a transaction
too (no autocommit, no kept hot-read connections), so that they carry them. This
holds in PgBouncer's session mode as well. The server's TCP keepalives are left
out: behind a pooler the server's peer is the pooler, whose own keepalives
(``tcp_keepalive``) watch it. A URL with its own ``options`` is refused in one
line: they could not reach the server. LISTEN hears nothing in transaction mode:
:func:`keeps_sessions` tells the wake-ups (store/wakeups.py) to leave readers polling.
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
import weakref
from typing import TYPE_CHECKING, Any

from partition_notify.store import pg_deadlines
from partition_notify.store.pg_deadlines import CLIENT_CHECK_MS
from sqlalchemy import Connection, Engine, event

from partition_notify.core.errors import ConfigurationError

if TYPE_CHECKING:  # the [postgres] extra
    import psycopg

log = logging.getLogger(__name__)

#: What PgBouncer answers a startup packet with ``options``: 1.18 refuses them
#: all (tested); later versions pass ``-c`` of the few settings they track and
#: refuse the rest with the other two (their source; not tested here).
REFUSALS = ("unsupported startup parameter: options",
            "unsupported startup parameter in options",
            "unsupported options startup parameter")
#: Settings of the store's options that bound a transaction's statements on the
#: server; the rest (TCP keepalives) concern the server's socket, the pooler's.
TRANSACTION_SETTINGS = ("statement_timeout", "lock_timeout")
#: How long the wake-up probe waits for its NOTIFY (a session pooler passes it in ms).
PROBE_SECONDS = 2.0
_SETTING = re.compile(r"-c\s*([a-z_]+)=(\S+)")


class Pooler:
    """Whether an engine's server is behind a pooler (None: not connected yet), and
    the settings each of its transactions then begins with."""

    def __init__(self, options: str, url_options: bool) -> None:
        self.pooled: bool | None = None
        #: Whether a client keeps its server connection (session mode; None: not probed).
        self.sessions: bool | None = None
        given = dict(_SETTING.findall(options))
        self.local = [(name, given[name]) for name in TRANSACTION_SETTINGS if name in given]
        self.url_options = url_options
        self._said = False
        self._lock = threading.Lock()

    def connected(self, pooled: bool, server: str, server_version: int) -> None:
        """After each connect: the first pooled one completes :attr:`local` and says so."""
        with self._lock:  # the pool's connects may run in several threads
            first = pooled and not self._said
            if first and server_version >= 140000:  # the server notices the pooler hung up
                self.local = [*self.local, ("client_connection_check_interval",
                                            str(CLIENT_CHECK_MS))]
            self._said = self._said or pooled
        if first:
            log.warning("PostgreSQL at %s is behind a connection pooler that does not pass "
                        "startup options on (PgBouncer): the store sets its deadlines per "
                        "transaction and prepares no statements", server)
        self.pooled = self.pooled or pooled

    def refused(self, server: str, url: str) -> None:
        """The server (a pooler) refused or dropped the startup options: pooled from
        now on, unless the URL's own options would be lost."""
        if self.url_options:
            raise ConfigurationError(
                f"store URL {url!r}: query parameter 'options' is refused: the server at "
                f"{server} is a connection pooler (PgBouncer) that does not pass libpq "
                "startup options on; remove it and set those settings on the database or "
                "role (ALTER ROLE ... SET), or connect to PostgreSQL directly")
        self.pooled = True

    @staticmethod
    def refuses_options(exc: BaseException) -> bool:
        return any(refusal in str(exc) for refusal in REFUSALS)


_POOLERS: weakref.WeakKeyDictionary[Engine, Pooler] = weakref.WeakKeyDictionary()


def watch(engine: Engine, pooler: Pooler) -> None:
    """Begin each transaction of ``engine`` with its deadlines once it is pooled."""
    _POOLERS[engine] = pooler

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        local = pooler.local  # replaced, never changed in place: one consistent list
        if pooler.pooled and local:
            calls = ", ".join("set_config(%s, %s, true)" for _ in local)
            conn.exec_driver_sql(f"SELECT {calls}", tuple(x for pair in local for x in pair))


def pooler_of(engine: Engine) -> Pooler | None:
    return _POOLERS.get(engine)


def keeps_sessions(engine: Engine, *, quiet: bool = False) -> bool | None:
    """Whether a LISTEN through ``engine``'s pooler hears other clients' NOTIFY: only
    where a client keeps its server connection (PgBouncer's session mode). In
    transaction mode the LISTEN stays on a server connection handed to others;
    told once per engine by a probe channel of its own, within :data:`PROBE_SECONDS`
    (at once when the notifying client gets the server connection that listened).
    An engine that has not connected yet connects once first (:func:`behind_pooler`,
    within its connect deadline). None when it cannot tell (no connection, a failed
    probe): the wake-ups ask again later (store/wakeups.py), readers poll meanwhile;
    said at WARNING unless ``quiet`` (a re-probe: said once already)."""
    say = log.debug if quiet else log.warning
    pooler = _POOLERS.get(engine)
    if pooler is not None and pooler.pooled is None:
        # The listener may be the engine's first use (a subscriber that listens before
        # any query): its own connection would learn of the pooler only after the choice.
        try:
            behind_pooler(engine)
        except Exception as exc:
            say("PostgreSQL at %s:%s: cannot connect to tell whether it is behind a "
                "connection pooler, readers poll the log until it answers: %s",
                engine.url.host, engine.url.port, exc)
            return None
    if pooler is None or not pooler.pooled:
        return True
    if pooler.sessions is None:
        try:
            pooler.sessions = _probe(engine, pooler)
        except Exception as exc:  # e.g. a session pool that is full
            say("PostgreSQL at %s:%s: the wake-up probe through its pooler failed, readers "
                "poll the log until it answers: %s", engine.url.host, engine.url.port, exc)
            return None
        if not pooler.sessions:
            log.warning("PostgreSQL at %s:%s is behind a connection pooler that does not keep "
                        "a client's server connection (PgBouncer transaction mode): LISTEN "
                        "cannot hear other processes' commits, so readers poll the log every "
                        "PN_POLL_INTERVAL_SECONDS; set PN_CROSS_PROCESS_WAKEUPS=false to say so",
                        engine.url.host, engine.url.port)
    return pooler.sessions


def _probe(engine: Engine, pooler: Pooler) -> bool:
    reply, args = pg_deadlines.config(engine)
    conninfo = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    channel = f"pn_probe_{uuid.uuid4().hex}"
    heard_here: list[object] = []

    def connect() -> psycopg.Connection[Any]:
        return pg_deadlines.connect(reply, conninfo, autocommit=True, pooler=pooler,
                                    **dict(args))

    with connect() as listener, connect() as notifier:
        notifier.add_notify_handler(heard_here.append)
        listener.execute(f"LISTEN {channel}")
        notifier.execute(f"NOTIFY {channel}")
        if heard_here:  # the notifier was handed the server connection that listened
            notifier.execute(f"UNLISTEN {channel}")  # not left to the pool's next client
            return False
        return any(True for _ in listener.notifies(timeout=PROBE_SECONDS, stop_after=1))


def behind_pooler(engine: Engine) -> bool:
    """Whether ``engine`` (make_engine's) reaches its server through a pooler; the
    first call on an engine that has not connected yet connects once to tell."""
    pooler = _POOLERS.get(engine)
    if pooler is None:
        return False
    if pooler.pooled is None:
        with engine.connect():
            pass
    return bool(pooler.pooled)
