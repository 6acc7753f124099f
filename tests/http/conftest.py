"""One ``serve`` process with the HTTP API per test module and store (SQLite, PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.http.support import Server, start_server
from tests.support.markers import uses


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
@uses("postgres", when=lambda param: param == "postgresql")
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    yield from start_server(request, PN_HTTP_MAX_BODY_BYTES="65536")
