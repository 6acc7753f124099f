"""A store URL's query parameters reach the driver, or are refused by name.

Before: SQLite dropped every parameter but its driver's few (``?mode=ro`` and a
typo ``?timout=5`` opened the file read-write, silently); the store's own
connect arguments overrode ``timeout``, ``check_same_thread`` and, on PostgreSQL,
``connect_timeout`` and ``options`` (``-c statement_timeout=...`` was dropped); a
PostgreSQL typo surfaced only at the first connection, as a store failure.
Real SQLite files and real PostgreSQL databases.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from partition_notify.store import make_engine
from sqlalchemy import text

from partition_notify.cli import main
from partition_notify.core.errors import ConfigurationError
from tests.support.ci import require
from tests.support.postgres import PG_ADMIN_URL, PostgresDatabases

SECRET = "hunter2-not-shown"


def _refusal(url: str) -> str:
    with pytest.raises(ConfigurationError) as caught:
        make_engine(url)
    message = str(caught.value)
    assert "\n" not in message and SECRET not in message, message
    return message


def _cli(url: str, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = main(["--store-url", url, *args])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err.strip()


@pytest.fixture
def pg_url(postgres: PostgresDatabases | None) -> str:
    require(postgres is not None, f"PostgreSQL at {PG_ADMIN_URL} is not reachable")
    assert postgres is not None
    # trust authentication ignores the password: it is there to be kept out of errors
    return postgres.new().replace("://postgres@", f"://postgres:{SECRET}@")


@pytest.mark.parametrize("query", ["timout=5", "journal_mode=wal", "uri=true&x=1"])
def test_sqlite_an_unknown_parameter_is_refused_naming_it(tmp_path: Path, query: str) -> None:
    message = _refusal(f"sqlite:///{'file:' * ('uri' in query)}{tmp_path}/s.db?{query}")
    name = query.rsplit("&", 1)[-1].split("=")[0]
    assert f"query parameter {name!r}" in message, message
    assert "cached_statements" in message and "uri=true" in message, message
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize(("query", "why"), [
    ("timeout=5", "PN_CONNECT_TIMEOUT_SECONDS"), ("check_same_thread=true", "threads"),
    ("isolation_level=DEFERRED", "BEGIN"), ("detect_types=1", "types")])
def test_sqlite_a_parameter_the_store_sets_itself_is_refused(tmp_path: Path, query: str,
                                                             why: str) -> None:
    message = _refusal(f"sqlite:///{tmp_path}/s.db?{query}")
    assert f"query parameter {query.split('=')[0]!r}" in message and why in message, message


def test_sqlite_uri_parameters_need_a_file_uri(tmp_path: Path) -> None:
    message = _refusal(f"sqlite:///{tmp_path}/s.db?mode=ro")
    assert "query parameter 'mode'" in message and "file:" in message, message
    assert "uri=true" in message, message
    message = _refusal(f"sqlite:///{tmp_path}/s.db?mode=ro&uri=true")
    assert "file:" in message, message
    message = _refusal(f"sqlite:///file:{tmp_path}/s.db?uri=true&mdoe=ro")
    assert "query parameter 'mdoe'" in message and "did you mean mode" in message, message


def test_sqlite_read_only_uri_is_honoured(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    plain = f"sqlite:///{tmp_path}/s.db"
    assert _cli(plain, capsys, "register", "db.t", "--keys", "a")[0] == 0
    read_only = f"sqlite:///file:{tmp_path}/s.db?mode=ro&uri=true&cached_statements=8"
    code, out, _ = _cli(read_only, capsys, "tables")
    assert code == 0 and "db.t" in out
    code, _, err = _cli(read_only, capsys, "register", "db.u", "--keys", "a")
    assert code == 1 and f"store file {tmp_path}/s.db is opened read-only (mode=ro" in err, err


def test_postgres_an_unknown_parameter_is_refused_before_connecting(pg_url: str) -> None:
    message = _refusal(f"{pg_url}?timout=5&password={SECRET}")
    assert "query parameter 'timout'" in message and "sslmode" in message, message
    message = _refusal(f"{pg_url}?sslpasword={SECRET}")
    assert "did you mean sslpassword" in message, message


def test_postgres_connect_timeout_is_the_setting(pg_url: str) -> None:
    message = _refusal(f"{pg_url}?connect_timeout=1")
    assert "'connect_timeout'" in message and "PN_CONNECT_TIMEOUT_SECONDS" in message, message


def test_postgres_driver_parameters_pass_through(pg_url: str) -> None:
    engine = make_engine(f"{pg_url}?application_name=pn_cfg19&sslmode=disable"
                         "&options=-c%20statement_timeout%3D1234", connect_timeout_seconds=4)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SHOW application_name")).scalar() == "pn_cfg19"
            assert conn.execute(text("SHOW statement_timeout")).scalar() == "1234ms"
            # the store's lock deadline stays (3 x the connect timeout)
            assert conn.execute(text("SHOW lock_timeout")).scalar() == "12s"
    finally:
        engine.dispose()


@pytest.mark.parametrize("name", ["password", "sslpassword"])
def test_a_password_in_the_query_stays_out_of_a_store_failure(
        name: str, capsys: pytest.CaptureFixture[str]) -> None:
    # Nothing listens on port 1: the failure names the store, query and all.
    url = f"postgresql+psycopg://pn@127.0.0.1:1/db?{name}={SECRET}&application_name=pn"
    code, _, err = _cli(url, capsys, "tables")
    assert code == 1 and "127.0.0.1:1" in err, err
    assert SECRET not in err and f"{name}=***" in err, err


@pytest.mark.parametrize(("query", "expected"), [
    ("keepalives_idle=abc", "an integer from 1 to 32767"),
    ("keepalives_idle=0", "an integer from 1 to 32767"),
    ("keepalives_interval=5s", "an integer from 1 to 32767"),
    ("keepalives_count=128", "an integer from 1 to 127"),
    ("tcp_user_timeout=-1", "an integer from 0 to 2147483647"),
    ("keepalives=abc", "0 or 1"),
    ("port=70000", "an integer from 1 to 65535"),
    ("sslmode=bogus", "one of disable, allow, prefer, require, verify-ca, verify-full"),
    ("gssencmode=bogus", "one of disable, prefer, require"),
    ("target_session_attrs=rw", "one of any, read-write, read-only, primary, standby"),
    ("ssl_min_protocol_version=TLS1.2", "one of TLSv1, TLSv1.1, TLSv1.2, TLSv1.3"),
])
def test_postgres_a_bad_libpq_value_is_refused_before_connecting(
        pg_url: str, query: str, expected: str) -> None:
    # Before: libpq's own message at the first connection, e.g. 'invalid integer value
    # "abc" for connection option "keepalives_idle"' or 'setsockopt(TCP_KEEPIDLE) failed'.
    name, _, value = query.partition("=")
    message = _refusal(f"{pg_url}?{query}&password={SECRET}")
    assert f"query parameter {name!r}" in message and repr(value) in message, message
    assert expected in message, message


@pytest.mark.parametrize("query", ["keepalives_idle=abc", "sslmode=bogus", "connect_timeout=-1",
                                   "keepalives_idel=5"])
def test_cli_a_bad_libpq_parameter_is_one_line_and_exit_1(
        pg_url: str, query: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(f"{pg_url}?{query}", capsys, "tables")
    name = query.partition("=")[0]
    assert code == 1 and len(err.splitlines()) == 1, (code, err)
    assert f"query parameter {name!r}" in err and SECRET not in err, err


def test_postgres_good_libpq_values_pass(pg_url: str) -> None:
    engine = make_engine(f"{pg_url}?keepalives=1&keepalives_idle=%2B7&keepalives_count=127"
                         "&sslmode=disable&target_session_attrs=any&tcp_user_timeout=0")
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT 1")).scalar() == 1
    finally:
        engine.dispose()
