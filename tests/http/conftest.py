"""One ``serve`` process with the HTTP API per test module and store (SQLite, PostgreSQL)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from partition_notify.app import App, build_app
from store.http_store import HttpStore
from tests.conftest import PG_ADMIN_URL, PostgresDatabases, require
from tests.http.support import HttpServe, unique_db


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
        return httpx.Client(base_url=self.base, headers=headers, timeout=30, **kw)  # type: ignore[arg-type]

    def table(self, keys: tuple[str, ...] = ("datestamp", "region")) -> str:
        """A fresh table registered through the Python API."""
        db = unique_db()
        self.app.publisher.register_table(db, "orders", list(keys))
        return f"{db}.orders"


def start_server(
    request: pytest.FixtureRequest, postgres: PostgresDatabases | None, **env: str
) -> Iterator[Server]:
    tmp = Path(tempfile.mkdtemp(prefix="pn-http-"))
    if request.param == "sqlite":
        url = f"sqlite:///{tmp}/store.db"
    else:
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


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(
    request: pytest.FixtureRequest, postgres: PostgresDatabases | None
) -> Iterator[Server]:
    yield from start_server(request, postgres, PN_HTTP_MAX_BODY_BYTES="65536")
