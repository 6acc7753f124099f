"""Engines for the store's two backends, SQLite and PostgreSQL."""

from __future__ import annotations

import os
import sqlite3
import time
import weakref
from pathlib import Path
from urllib.parse import unquote

from partition_notify.store import pg_deadlines, pg_pooler
from partition_notify.store.url_query import (
    check_postgres_query,
    check_sqlite_query,
    libpq_keywords,
    merged_options,
)
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import ConnectionPoolEntry, StaticPool

from partition_notify.core.errors import ConfigurationError, StoreError
from partition_notify.core.limits import CONNECT_TIMEOUT_SECONDS, STORE_REPLY_TIMEOUT_SECONDS
from partition_notify.core.redact import redact_url

#: Execution option that makes a SQLite transaction take the write lock at BEGIN.
WRITE = "pn_write"
#: Execution option for a connection that runs single SELECTs only: on SQLite no
#: BEGIN is sent (in autocommit mode each statement reads one consistent
#: snapshot), saving a statement per hot read (bench/core_lookup.py).
SINGLE_READ = "pn_single_read"

#: SQLite ``PRAGMA synchronous`` in WAL mode. FULL fsyncs the WAL at every commit,
#: so a commit survives power loss ("durable at commit", which the embedded
#: transport promises); NORMAL fsyncs only at checkpoints and may lose the last
#: commits. Cost: bench/core_latency.py prints both side by side.
SQLITE_SYNCHRONOUS_LEVELS = ("NORMAL", "FULL", "EXTRA")
DEFAULT_SQLITE_SYNCHRONOUS = "FULL"


def sqlite_file(url: str) -> Path | None:
    """The absolute file an SQLite store URL names; None for another backend,
    an in-memory database or a URL that does not parse (make_engine says why)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    database = str(parsed.database)
    if database.startswith("file:"):  # a URI filename (uri=true: check_sqlite_query)
        database = unquote(database[5:].partition("?")[0])
        if database.startswith("//"):  # file://localhost/path or file:///path
            database = "/" + database[2:].partition("/")[2]
        if database in ("", ":memory:") or parsed.query.get("mode") == "memory":
            return None
    return Path(database).resolve()


def sqlite_access(url: str) -> str:
    """How a SQLite store URL opens its file: "immutable" (``immutable=1``: read
    without locks or -wal/-shm), "ro" (``mode=ro``) or "rw" (also for any other URL)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return "rw"
    if parsed.get_backend_name() != "sqlite":
        return "rw"
    query = parsed.query
    if str(query.get("immutable", "0")) in ("1", "true", "yes", "on"):
        return "immutable"
    return "ro" if query.get("mode") == "ro" else "rw"


def sqlite_access_problem(path: Path, access: str = "rw") -> str:
    """Why this process cannot use the SQLite file ``path`` opened with ``access``
    (:func:`sqlite_access`), as the OS's permissions tell ("" if they do not):
    SQLite itself says only "unable to open database file" or "attempt to write a
    readonly database", naming neither the file nor which of the file, its
    directory or its -wal/-shm files was refused."""
    who = f"this process (uid {os.geteuid()})"
    folder = path.parent
    if not folder.is_dir():
        return f"directory {folder} does not exist"
    if not _may(folder, os.X_OK):
        return f"directory {folder} is not searchable by {who}"
    if access != "rw":
        return _read_only_problem(path, access, who)
    files = [path, *(path.with_name(path.name + s) for s in ("-wal", "-shm"))]
    for file in (f for f in files if f.exists()):
        for mode, what in ((os.R_OK, "readable"), (os.W_OK, "writable")):
            if not _may(file, mode):
                return (f"file {file} is not {what} by {who}: the store needs to read "
                        "and write it")
    if not all(f.exists() for f in files) and not _may(folder, os.W_OK):
        return (f"directory {folder} is not writable by {who}: SQLite creates {path.name} "
                "and its -wal and -shm files there")
    return ""


def _read_only_problem(path: Path, access: str, who: str) -> str:
    if not path.exists():
        return f"file {path} does not exist (a read-only URL does not create it)"
    files = [path] if access == "immutable" else [
        path, *(path.with_name(path.name + s) for s in ("-wal", "-shm"))]
    for file in (f for f in files if f.exists()):
        if not _may(file, os.R_OK):
            return f"file {file} is not readable by {who}: a read-only store needs to read it"
    shm = path.with_name(path.name + "-shm")
    if access == "ro" and _wal_mode(path) and not shm.exists() and not _may(path.parent,
                                                                          os.W_OK):
        # SQLite's WAL reader needs the -shm index; the writer keeps it while it runs.
        return (f"file {path} is in WAL mode and {shm} does not exist, which a reader must "
                f"create, but directory {path.parent} is not writable by {who}: run the "
                "store's writer (serve keeps the -wal and -shm files while it runs), let "
                "this process write the directory, or, only for a store nothing writes "
                "(a copy), use immutable=1 instead of mode=ro")
    return ""


def _wal_mode(path: Path) -> bool:
    # Bytes 18-19 of the header, the file format versions: 2 = WAL (sqlite.org/fileformat2).
    try:
        with path.open("rb") as f:
            header = f.read(20)
    except OSError:
        return False
    return len(header) == 20 and header[18] == 2


def read_only_error(engine: Engine) -> StoreError:
    """A write asked of a store its URL opens read-only: one line naming it."""
    url = str(engine.url)
    how = "immutable=1" if sqlite_access(url) == "immutable" else "mode=ro"
    return StoreError(f"store file {sqlite_file(url)} is opened read-only ({how} in its URL) "
                      "and this command writes the store: use a URL without "
                      f"{how} (needs write access to the file and its directory)")


def _may(path: Path, mode: int) -> bool:
    # The effective ids, as the kernel checks them at open (setuid or setpriv'ed services).
    return os.access(path, mode, effective_ids=os.access in os.supports_effective_ids)


def sqlite_in_memory(url: str) -> bool:
    """Whether ``url`` names an in-memory SQLite database (False for a URL that does
    not parse: make_engine says why)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return False
    return parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:")


def make_engine(
    url: str,
    *,
    connect_timeout_seconds: float = CONNECT_TIMEOUT_SECONDS,
    sqlite_synchronous: str = DEFAULT_SQLITE_SYNCHRONOUS,
    store_reply_timeout_seconds: float = STORE_REPLY_TIMEOUT_SECONDS,
    **kwargs: object,
) -> Engine:
    """Create an engine; on SQLite, WAL, ``sqlite_synchronous`` and BEGIN IMMEDIATE;
    on PostgreSQL, the deadlines of store/pg_deadlines.py."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        # The driver's message would quote the URL, password and all.
        raise ConfigurationError(
            f"store URL {redact_url(url)!r} is not a database URL (expected "
            "sqlite:///path or postgresql+psycopg://user@host/db)"
        ) from exc
    backend = parsed.get_backend_name()
    synchronous = str(sqlite_synchronous).upper()
    if synchronous not in SQLITE_SYNCHRONOUS_LEVELS:
        raise ConfigurationError(
            f"sqlite_synchronous {sqlite_synchronous!r}: expected one of "
            f"{', '.join(SQLITE_SYNCHRONOUS_LEVELS)}"
        )
    if backend == "sqlite":
        if "\x00" in str(parsed.database or ""):  # the OS's paths end at a NUL
            raise ConfigurationError(
                f"store URL {redact_url(url)!r}: the SQLite path contains a NUL character")
        check_sqlite_query(parsed)
        if parsed.database in (None, "", ":memory:"):
            # Every pooled connection would otherwise be its own empty database.
            kwargs.setdefault("poolclass", StaticPool)
        engine = create_engine(
            parsed,
            connect_args={"timeout": connect_timeout_seconds * 3, "check_same_thread": False},
            **kwargs,
        )
        _sqlite_hooks(engine, busy_seconds=connect_timeout_seconds * 3, synchronous=synchronous)
        _LOCK_SECONDS[engine] = connect_timeout_seconds * 3
        return engine
    if backend == "postgresql":
        return _postgres_engine(parsed, url, (connect_timeout_seconds,
                                              store_reply_timeout_seconds), kwargs)
    raise ConfigurationError(
        f"store URL {redact_url(url)!r}: backend {backend!r} is not supported; use "
        "sqlite:///path or postgresql+psycopg://user@host/db"
    )


def _postgres_engine(parsed: URL, url: str, timeouts: tuple[float, float],
                     kwargs: dict[str, object]) -> Engine:
    connect_seconds, reply_seconds = timeouts
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    # A writer stuck behind another transaction's row lock must fail, not hang:
    # the same deadline SQLite's busy timeout gives.
    lock_ms = int(connect_seconds * 3 * 1000)
    try:
        check_postgres_query(parsed, libpq_keywords())
        ours = f"-c lock_timeout={lock_ms} {pg_deadlines.server_options(reply_seconds)}"
        args = {**pg_deadlines.tcp_args(parsed.query, connect_seconds),
                "options": merged_options(parsed.query, ours)}
        kwargs.setdefault("pool_pre_ping", True)
        engine = create_engine(parsed, connect_args=args, **kwargs)
    except ModuleNotFoundError as exc:  # the dialect imports its driver here
        raise _missing_driver(url, exc) from exc
    pg_deadlines.remember(engine, reply_seconds, args)  # the wake-up listener's too
    pooler = pg_pooler.Pooler(ours, "options" in parsed.query)
    pg_pooler.watch(engine, pooler)
    shown = parsed.set(query={}).render_as_string(hide_password=True)

    @event.listens_for(engine, "do_connect")
    def _connect(_dialect: object, _record: object, cargs: list[object],
                 cparams: dict[str, object]) -> object:
        return pg_deadlines.connect(reply_seconds, *cargs, pooler=pooler, url=shown, **cparams)

    return engine


def _missing_driver(url: str, exc: ModuleNotFoundError) -> Exception:
    """The driver is an extra (lean installs): say which one to install."""
    if (exc.name or "").partition(".")[0] != "psycopg":
        return exc
    return ConfigurationError(
        f"store URL {redact_url(url)!r} needs the PostgreSQL driver (psycopg), which is not "
        "installed: pip install 'partition-notify[postgres]'"
    )


#: The most a SQLite store's ``-wal`` file keeps once the log starts over: SQLite
#: reuses the file but kept it at its largest (one large transaction left it at
#: hundreds of MB while serve ran, tests/store/test_wal_size_limit.py).
SQLITE_WAL_LIMIT_BYTES = 64 << 20
#: How often a writer waiting for SQLite's write lock tries again. SQLite's own
#: busy handler backs off to 25-100 ms sleeps, so a writer queued behind the
#: batched retention purge slept through the gaps between batches and waited
#: up to 1.5 s (bench/core_purge.py); polling every millisecond it gets the
#: lock within a few ms of its release.
LOCK_POLL_SECONDS = 0.001
#: A writer's lock deadline per SQLite engine made here (3 x its connect timeout).
_LOCK_SECONDS: weakref.WeakKeyDictionary[Engine, float] = weakref.WeakKeyDictionary()


def sqlite_lock_seconds(engine: Engine) -> float:
    """How long a writer of ``engine`` waits for SQLite's write lock (3 x the default
    connect timeout if not ours)."""
    return _LOCK_SECONDS.get(engine, 3 * CONNECT_TIMEOUT_SECONDS)


def try_begin_immediate(raw: sqlite3.Connection, deadline: float) -> bool:
    """``BEGIN IMMEDIATE`` on a connection whose busy timeout is 0, tried every
    :data:`LOCK_POLL_SECONDS` until ``deadline`` (``time.monotonic``); False if the
    lock stayed taken. An error other than "locked" is raised at once."""
    while True:
        try:
            raw.execute("BEGIN IMMEDIATE")
            return True
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
        if time.monotonic() >= deadline:
            return False
        time.sleep(LOCK_POLL_SECONDS)


def _sqlite_hooks(engine: Engine, *, busy_seconds: float, synchronous: str) -> None:
    memory = engine.url.database in (None, "", ":memory:")
    read_only = sqlite_access(str(engine.url)) != "rw"
    busy_ms = int(busy_seconds * 1000)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, _record: ConnectionPoolEntry) -> None:
        # We issue BEGIN ourselves so that writers can ask for IMMEDIATE.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        if not memory and not read_only:  # changing it writes the file
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA journal_size_limit={SQLITE_WAL_LIMIT_BYTES}")
        cur.execute(f"PRAGMA synchronous={synchronous}")  # one of SQLITE_SYNCHRONOUS_LEVELS
        cur.execute("PRAGMA foreign_keys=ON")
        # Debian builds SQLite with SECURE_DELETE on: zeroing every deleted
        # row cost the purge ~20%. The store holds no secrets (credentials live
        # in settings), so upstream's default is restored.
        cur.execute("PRAGMA secure_delete=OFF")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        options = conn.get_execution_options()
        if options.get(SINGLE_READ, False):
            return
        if not options.get(WRITE, False):
            conn.exec_driver_sql("BEGIN")
            return
        if read_only:
            raise read_only_error(engine)
        raw = conn.connection.driver_connection
        assert isinstance(raw, sqlite3.Connection)  # a connection that is beginning is open
        raw.execute("PRAGMA busy_timeout=0")
        try:
            # On the driver: SQLAlchemy's statement machinery was most of a begin's
            # CPU (bench/durable_publish.py). The last try goes through SQLAlchemy
            # so that a failure is its OperationalError, as callers expect.
            try:
                if try_begin_immediate(raw, time.monotonic() + busy_seconds):
                    return
            except sqlite3.OperationalError:
                pass
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        finally:
            raw.execute(f"PRAGMA busy_timeout={busy_ms}")
