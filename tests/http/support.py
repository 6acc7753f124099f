"""A real ``partition-notify serve`` with the HTTP API, for tests and the bench."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from partition_notify.app import App, build_app
from partition_notify.http.store import HttpStore
from tests.support.accounts import ROOT
from tests.support.ci import require
from tests.support.net import free_port, wait_until
from tests.support.postgres import PG_ADMIN_URL, PostgresDatabases


@dataclass
class HttpServe:
    store_url: str
    log: Path
    env_extra: dict[str, str] = field(default_factory=dict)
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> HttpServe:
        self.port = free_port()
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "PN_STORE_URL": self.store_url,
            "PN_TRANSPORT_URL": "embedded://",
            "PN_HTTP_BIND": f"127.0.0.1:{self.port}",
            "PN_RELAY_INTERVAL_SECONDS": "0.5",
            **self.env_extra,
        }
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "partition_notify.cli", "serve"],
                cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT,
            )
        try:
            wait_until(self._ready, timeout, f"serve to answer /readyz on {self.base}", 0.1)
        except BaseException:
            # Nobody else holds this serve yet: stop it here, or it loads every later test.
            with contextlib.suppress(AssertionError):
                self.stop()
            raise
        return self

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"serve exited {self.proc.returncode}: {self.text()[-3000:]}")
        try:
            return httpx.get(self.base + "/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise AssertionError(f"serve did not stop within {timeout:g} s") from None
        return int(self.proc.returncode)

    def text(self) -> str:
        return self.log.read_text(errors="replace")


def capped_serve(tmp_path: Path, table: str, max_connections: int,
                 max_streams: int) -> Iterator[HttpServe]:
    """A ``serve`` on a fresh SQLite store with ``table`` (keys: datestamp) registered,
    the two connection caps set and anonymous reads on; stopped (cleanly) after."""
    url = f"sqlite:///{tmp_path}/store.db"
    app = build_app(store_url=url, transport_url="embedded://")
    app.publisher.register_table(*table.split("."), ["datestamp"])
    app.close()
    serve = HttpServe(url, tmp_path / "serve.log", env_extra={
        "PN_HTTP_MAX_CONNECTIONS": str(max_connections),
        "PN_HTTP_MAX_STREAMS": str(max_streams),
        "PN_HTTP_ANONYMOUS_READ": "true",
    }).start()
    try:
        yield serve
    finally:
        assert serve.stop() == 0, serve.text()[-2000:]


def until_closed(s: socket.socket, deadline: float) -> bytes:
    """Everything the server sends until it closes the connection; fails past ``deadline`` s."""
    received = b""
    s.settimeout(deadline)
    while True:
        try:
            chunk = s.recv(65536)
        except TimeoutError:
            pytest.fail(f"the server kept the connection > {deadline:g} s; got {received[:200]!r}")
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk


def unique_db() -> str:
    return f"h{uuid.uuid4().hex[:10]}"


@dataclass
class Server:
    serve: HttpServe
    app: App
    tokens: dict[str, str]

    @property
    def base(self) -> str:
        return self.serve.base

    def client(self, role: str | None = "admin", **kw: object) -> httpx.Client:
        headers = {} if role is None else {"Authorization": f"Bearer {self.tokens[role]}"}
        kw.setdefault("timeout", 30)
        return httpx.Client(base_url=self.base, headers=headers, **kw)  # type: ignore[arg-type]

    def table(self, keys: tuple[str, ...] = ("datestamp", "region")) -> str:
        """A fresh table registered through the Python API."""
        db = unique_db()
        self.app.publisher.register_table(db, "orders", list(keys))
        return f"{db}.orders"


def start_server(request: pytest.FixtureRequest, **env: str) -> Iterator[Server]:
    """A serve on ``request.param``'s store: "sqlite", or "postgresql" (asks for the
    ``postgres`` fixture only then)."""
    tmp = Path(tempfile.mkdtemp(prefix="pn-http-"))
    postgres: PostgresDatabases | None = None
    if request.param == "sqlite":
        url = f"sqlite:///{tmp}/store.db"
    else:
        postgres = request.getfixturevalue("postgres")
        require(postgres is not None, f"PostgreSQL at {PG_ADMIN_URL} is not reachable")
        assert postgres is not None
        url = postgres.new()
    app = build_app(store_url=url, transport_url="embedded://")
    store = HttpStore(app.store)
    tokens = {role: store.create_token(f"t-{role}", role)[1] for role in ("read", "write", "admin")}
    serve = HttpServe(url, tmp / "serve.log", env_extra=env).start()
    try:
        yield Server(serve, app, tokens)
    finally:
        code = serve.stop()
        app.close()
        if request.param != "sqlite" and postgres is not None:
            postgres.drop(url)
        assert code == 0, f"serve exited {code}: {serve.text()[-2000:]}"


def make_late(server: Server, db: str, table: str) -> str:
    """Register ``db.table`` with an every-minute expectation, wait until serve's checker
    declares an instance late, and return its spec."""
    server.app.publisher.register_table(db, table, ["ts"])
    server.app.deadlines.add(db, table, name="minutely", spec_template="ts={{ ts_nodash }}",
                             cron="* * * * *", deadline="+1s")
    # A new expectation judges only later deadlines; backdated, the past minutes are due now.
    with server.app.store.engine.begin() as conn:
        conn.execute(text("UPDATE pn_expectations SET created_at = 0 WHERE table_id = "
                          "(SELECT id FROM pn_tables WHERE db = :db AND name = :name)"),
                     {"db": db, "name": table})
    lates = server.app.deadlines.open_late
    deadline = time.monotonic() + 120
    while not lates(db, table):
        assert time.monotonic() < deadline, "serve declared no instance late in 120 s"
        time.sleep(0.2)  # another process (serve's checker) decides; nothing to await here
    return lates(db, table)[0].spec
