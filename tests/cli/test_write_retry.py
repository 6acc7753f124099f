"""A retried CLI write never becomes a second message (issue 24).

``mark-done`` while the broker is unreachable saves the set-done (the relay
delivers it) and exits 5, not 1: a script that retries on 1 does not retry.
A script that retries anyway, with the same ``--idempotency-key``, saves and
sends nothing again. Real ActiveMQ; SQLite and PostgreSQL stores.
"""

from __future__ import annotations

import json

import pytest

from partition_notify.cli import main
from partition_notify.cli.entry import EXIT_ERROR, EXIT_PENDING
from tests.contract.raw_clients import RawStomp, reader_credentials
from tests.support.net import free_port
from tests.transports.stomp_helpers import build, stomp_spec

pytestmark = pytest.mark.broker


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, list[str]]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


def test_cli_retry_after_a_broker_outage_is_one_set_done(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, store_url: str
) -> None:
    spec = stomp_spec("activemq")
    assert spec.username and spec.password
    monkeypatch.setenv("PN_BROKER_USERNAME", spec.username)
    monkeypatch.setenv("PN_BROKER_PASSWORD", spec.password)
    monkeypatch.setenv("PN_CONNECT_TIMEOUT_SECONDS", "3")
    app = build(spec, store_url, relay_writer_grace_seconds=0.0)
    try:
        topic = app.publisher.register_table("retry", "orders", ["ds"]).topic
        raw = RawStomp(spec.url, *reader_credentials("activemq"))
        raw.subscribe(topic)
        down = f"stomp://127.0.0.1:{free_port()}"  # nothing listens: the broker is down
        argv = ["--store-url", store_url, "mark-done", "retry.orders", "ds=1",
                "--idempotency-key", "etl-ds-1"]
        code, out, err = _run(capsys, "--transport-url", down, *argv)
        assert code == EXIT_PENDING, (code, err)
        assert len(err) == 1 and "saved" in err[0] and "will be delivered" in err[0], err
        # The script retries anyway, once the broker is back: nothing is logged again.
        code, out, err = _run(capsys, "--transport-url", spec.url, *argv)
        assert code == 0, err
        assert json.loads(out)["eventId"] == 1
        # Another request under the same key is refused, nothing stored.
        code, _, err = _run(capsys, "--transport-url", spec.url, "--store-url", store_url,
                            "mark-done", "retry.orders", "ds=2", "--idempotency-key", "etl-ds-1")
        assert code == EXIT_ERROR and "already used" in err[0], err
        assert app.store.log.max_event_id() == 1, "the retry logged a second set-done"
        assert app.relay.run_once() == 1  # the relay delivers the saved one
        app.publisher.send_mark_set_done("retry", "orders", "ds=last")
        seen = [json.loads(raw.messages.get(timeout=30).body) for _ in range(2)]
        raw.close()
        assert [(m["eventId"], m["partitionSpecString"]) for m in seen] == [
            (1, "ds=1"), (2, "ds=last")]
    finally:
        app.close()
