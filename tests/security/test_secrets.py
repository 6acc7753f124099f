"""Credentials come from settings (SecretStr) and never show up in errors or logs.

Each scenario fails for real (wrong password on the real broker, closed ports,
unreachable database) with logging at DEBUG for every logger, then the
exception text, its whole cause chain, the log records and what the relay
stored as ``last_error`` are searched for the password.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from partition_notify.publisher.relay import Relay
from pydantic import SecretStr
from sqlalchemy import create_engine, text

from partition_notify import cli
from partition_notify.app import build_app
from partition_notify.cli.entry import EXIT_PENDING
from partition_notify.core.errors import ConnectError, PartitionNotifyError, PublishError
from partition_notify.settings import load_settings
from tests.support.accounts import ROOT, SERVICE_USER
from tests.support.net import free_port

SECRET = "s3cret-Pa55word-4f9e"  # what must never leak


def chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        stack += [e.__cause__, e.__context__]


def assert_clean(exc: BaseException, caplog: pytest.LogCaptureFixture) -> None:
    for e in chain(exc):
        assert SECRET not in str(e), f"{type(e).__name__} carries the password: {e}"
        assert SECRET not in repr(e)
        assert SECRET not in repr(getattr(e, "args", ()))
    assert caplog.records, "the failure was not logged at all"
    for r in caplog.records:
        assert SECRET not in r.getMessage(), f"log record {r.name}: {r.getMessage()[:200]}"
        assert SECRET not in repr(r.args)


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    for name in ("stomp.py", "transports", "publisher", "store", "kafka", "sqlalchemy"):
        caplog.set_level(logging.DEBUG, logger=name)  # restored after the test
    return caplog


def test_settings_never_render_the_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PN_BROKER_PASSWORD", SECRET)
    monkeypatch.setenv("PN_BROKER_USERNAME", "pn_service")
    s = load_settings()
    assert isinstance(s.broker_password, SecretStr)
    assert s.broker_password.get_secret_value() == SECRET
    for rendering in (repr(s), str(s), s.model_dump_json(), repr(s.model_dump())):
        assert SECRET not in rendering


def test_wrong_password_on_real_broker(sqlite_url: str, debug_logs: pytest.LogCaptureFixture,
                                       activemq_url: str) -> None:
    app = build_app(store_url=sqlite_url, transport_url=activemq_url, broker_username=SERVICE_USER,
                    broker_password=SecretStr(SECRET), connect_timeout_seconds=5,
                    publish_timeout_seconds=5)
    try:
        app.publisher.register_table("sec", "t", ["ds"])
        with pytest.raises(PublishError) as info:
            app.publisher.announce_partitions("sec", "t", ["ds=1"])
        assert isinstance(info.value.__cause__, ConnectError)
        assert "refused" in str(info.value).lower() or "auth" in str(info.value).lower()
        relay = Relay(app.store, app.transport, publish_timeout=5, writer_grace_seconds=0)
        assert relay.run_once() == 0 and relay.stats.failed_batches == 1
        assert_clean(info.value, debug_logs)
        # The CONNECT frame itself was logged (stomp.py, DEBUG): the check above saw it.
        assert any("passcode:" in r.getMessage() for r in debug_logs.records)
        engine = create_engine(sqlite_url)
        with engine.connect() as conn:
            stored = conn.execute(text("SELECT last_error FROM pn_events")).scalar()
        engine.dispose()
        assert stored and SECRET not in stored
    finally:
        app.close()


@pytest.mark.parametrize("scheme", ["stomp", "kafka"])
def test_password_in_url_userinfo_not_echoed(scheme: str, sqlite_url: str,
                                             debug_logs: pytest.LogCaptureFixture) -> None:
    url = f"{scheme}://pn_service:{SECRET}@127.0.0.1:{free_port()}"
    app = build_app(store_url=sqlite_url, transport_url=url, connect_timeout_seconds=1,
                    publish_timeout_seconds=2)
    try:
        app.publisher.register_table("sec", "t", ["ds"])
        with pytest.raises(PublishError) as info:
            app.publisher.announce_partitions("sec", "t", ["ds=1"])
        assert_clean(info.value, debug_logs)
    finally:
        app.close()


def test_database_password_not_echoed(debug_logs: pytest.LogCaptureFixture) -> None:
    url = f"postgresql+psycopg://pn_reader:{SECRET}@127.0.0.1:{free_port()}/pn"
    with pytest.raises(PartitionNotifyError) as info:
        build_app(store_url=url, transport_url="embedded://", connect_timeout_seconds=1)
    logging.getLogger("tests").warning("store failed: %s", info.value)  # as a caller would
    assert_clean(info.value, debug_logs)


@pytest.mark.parametrize("overrides", [
    {"store_url": f"mysql://u:{SECRET}@db/x", "transport_url": "embedded://"},
    {"transport_url": f"stompp://u:{SECRET}@mq:61613"},
], ids=["store-backend", "transport-scheme"])
def test_bad_url_errors_do_not_echo_password(overrides: dict[str, str], sqlite_url: str) -> None:
    with pytest.raises(PartitionNotifyError) as info:
        build_app(**{"store_url": sqlite_url, **overrides})
    assert SECRET not in str(info.value)


def test_cli_error_line_has_no_password(sqlite_url: str, capsys: pytest.CaptureFixture[str],
                                        debug_logs: pytest.LogCaptureFixture) -> None:
    url = f"stomp://pn_service:{SECRET}@127.0.0.1:{free_port()}"
    base = ["--store-url", sqlite_url, "--transport-url", url]
    assert cli.main([*base, "register", "sec.t", "--keys", "ds"]) == 0
    # Saved, the broker unreachable: exit 5 (delivery pending), one line naming the failure.
    assert cli.main([*base, "announce", "sec.t", "ds=1"]) == EXIT_PENDING
    out, err = capsys.readouterr()
    assert "delivery pending:" in err
    assert SECRET not in out + err
    assert all(SECRET not in r.getMessage() for r in debug_logs.records)


def test_the_many_tables_bench_prints_no_broker_password() -> None:
    """bench/many_tables.py takes the broker's credentials in its --transport URL
    (there is no other way to give them) and echoed that URL in its header. Run
    against a closed port: it fails at the first delivery, after the header."""
    url = f"stomp://{SERVICE_USER}:{SECRET}@127.0.0.1:{free_port()}"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "many_tables.py"), "--n", "10", "--transport", url],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    out = done.stdout + done.stderr
    assert "one subscriber, stomp://" in out, out  # the header was printed
    assert SECRET not in out
