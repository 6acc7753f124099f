"""The auth matrix over real HTTP: anonymous/read/write/admin x read/write endpoints.

401 (no or bad token, with WWW-Authenticate) and 403 (role too low) are
distinct; reads are anonymous only with PN_HTTP_ANONYMOUS_READ=true; writes
never are. Token management from the CLI prints the token once.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.http.support import Server, start_server
from tests.http.test_writes import assert_problem, events
from tests.support.accounts import ROOT

ROLES = [None, "read", "write", "admin"]


def endpoints(table: str) -> list[tuple[str, str, str, dict[str, object] | None]]:
    """(needed role, method, path, json) for one call of every endpoint."""
    return [
        ("read", "GET", "/v1/tables", None),
        ("read", "GET", f"/v1/tables/{table}", None),
        ("read", "GET", f"/v1/tables/{table}/partitions/datestamp=1/region=us", None),
        ("read", "GET", f"/v1/tables/{table}/set-done", None),
        ("read", "GET", f"/v1/tables/{table}/set-done/covering?spec=datestamp=1", None),
        ("read", "GET", f"/v1/tables/{table}/wait?spec=datestamp=1&timeout=0", None),
        ("write", "POST", f"/v1/tables/{table}/partitions",
         {"partitions": [f"datestamp={uuid.uuid4().hex[:6]}/region=us"]}),
        ("write", "POST", f"/v1/tables/{table}/set-done", {"spec": "datestamp=1"}),
        ("admin", "POST", "/v1/tables",
         {"table": f"a{uuid.uuid4().hex[:8]}.t", "partitionKeys": ["ds"]}),
    ]


ORDER = ["read", "write", "admin"]


def expected(caller: str | None, needed: str, anonymous_read: bool) -> int:
    if caller is None:
        return 0 if (needed == "read" and anonymous_read) else 401
    return 0 if ORDER.index(caller) >= ORDER.index(needed) else 403


def check_matrix(server: Server, anonymous_read: bool) -> None:
    table = server.table()
    for caller in ROLES:
        with server.client(caller) as c:
            for needed, method, path, body in endpoints(table):
                before = events(server)
                r = c.request(method, path, json=body)
                want = expected(caller, needed, anonymous_read)
                what = f"{caller or 'anonymous'} {method} {path}"
                if want == 0:
                    assert r.status_code < 300, f"{what}: {r.status_code} {r.text}"
                    continue
                assert r.status_code == want, f"{what}: {r.status_code} {r.text}"
                assert_problem(r, want, None)
                assert "Bearer" in r.headers["www-authenticate"], what
                assert events(server) == before, f"{what} wrote"


def test_auth_matrix_reads_need_a_token(server: Server) -> None:
    check_matrix(server, anonymous_read=False)


@pytest.fixture(scope="module", params=["sqlite"])
def open_server(request: pytest.FixtureRequest) -> Iterator[Server]:
    yield from start_server(request, PN_HTTP_ANONYMOUS_READ="true")


def test_auth_matrix_with_anonymous_reads(open_server: Server) -> None:
    check_matrix(open_server, anonymous_read=True)


@pytest.mark.parametrize(("header", "error"), [
    ("Bearer pn_not-a-real-token", "invalid_token"),
    ("Basic dXNlcjpwYXNz", "invalid_request"),
    ("Bearer", "invalid_request"),
])
def test_bad_credentials_are_401_not_403(server: Server, header: str, error: str) -> None:
    r = httpx.get(server.base + "/v1/tables", headers={"Authorization": header}, timeout=10)
    assert_problem(r, 401, "header.Authorization")
    assert f'error="{error}"' in r.headers["www-authenticate"]


def test_ops_endpoints_and_docs_are_open(server: Server) -> None:
    for path, kind in [("/healthz", "json"), ("/readyz", "json"), ("/metrics", "text"),
                       ("/openapi.json", "json"), ("/docs", "html")]:
        r = httpx.get(server.base + path, timeout=10)
        assert r.status_code == 200, (path, r.text)
        assert kind in r.headers["content-type"] or kind == "text", (path, r.headers)
    assert "pn_http_streams" in httpx.get(server.base + "/metrics", timeout=10).text
    spec = httpx.get(server.base + "/openapi.json", timeout=10).json()
    assert "/v1/tables/{table}/stream" in spec["paths"]
    assert "HTTPBearer" in spec["components"]["securitySchemes"]


def cli(store_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "partition_notify.cli", "--store-url", store_url, *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


def test_token_cli_create_list_revoke(server: Server) -> None:
    url = server.serve.store_url
    name = f"cli-{uuid.uuid4().hex[:6]}"
    made = cli(url, "token", "create", "--name", name, "--role", "read")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert token.startswith("pn_") and len(token) > 40 and "\n" not in token
    assert "shown only now" in made.stderr
    listed = cli(url, "token", "list")
    assert name in listed.stdout and token not in listed.stdout
    # Only the hash is stored.
    with server.app.store.engine.connect() as conn:
        from sqlalchemy import text
        stored = [r[0] for r in conn.execute(text("SELECT token_sha256 FROM pn_api_tokens"))]
    assert token not in stored and all(len(s) == 64 for s in stored)
    ok = httpx.get(server.base + "/v1/tables", headers={"Authorization": f"Bearer {token}"})
    assert ok.status_code == 200
    dup = cli(url, "token", "create", "--name", name, "--role", "read")
    assert dup.returncode == 1 and dup.stderr.count("\n") == 1 and "exists already" in dup.stderr
    bad = cli(url, "token", "create", "--name", "x y", "--role", "read")
    assert bad.returncode == 1 and "token name 'x y'" in bad.stderr
    role = cli(url, "token", "create", "--name", "z", "--role", "root")
    assert role.returncode == 2 and "invalid choice: 'root'" in role.stderr
    gone = cli(url, "token", "revoke", name)
    assert gone.returncode == 0, gone.stderr
    r = httpx.get(server.base + "/v1/tables", headers={"Authorization": f"Bearer {token}"})
    assert_problem(r, 401, "header.Authorization", "unknown or revoked")
    missing = cli(url, "token", "revoke", name)
    assert missing.returncode == 1 and f"no token named {name!r}" in missing.stderr
