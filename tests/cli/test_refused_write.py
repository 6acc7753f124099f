"""A write the broker refuses for good prints one truthful stderr line (saved,
refused, dead-lettered by the relay) and exits 6; the relay then does what the
line says (issue 24). Real ActiveMQ, whose ACL refuses the reader's writes."""

from __future__ import annotations

import pytest
from partition_notify.store.dead_letters import DeadLetters

from partition_notify.cli import main
from partition_notify.cli.entry import EXIT_REFUSED
from tests.contract.raw_clients import reader_credentials
from tests.transports.stomp_helpers import build, stomp_spec

pytestmark = pytest.mark.broker


def test_refused_mark_done_is_one_truthful_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, sqlite_url: str
) -> None:
    spec = stomp_spec("activemq")
    user, password = reader_credentials("activemq")  # may read, may not write
    monkeypatch.setenv("PN_BROKER_USERNAME", user)
    monkeypatch.setenv("PN_BROKER_PASSWORD", password)
    assert main(["--store-url", sqlite_url, "register", "acl.t", "--keys", "ds"]) == 0
    capsys.readouterr()
    code = main(["--store-url", sqlite_url, "--transport-url", spec.url,
                 "mark-done", "acl.t", "ds=1"])
    err = capsys.readouterr().err.splitlines()
    assert code == EXIT_REFUSED, err
    assert len(err) == 1, err
    assert "saved, refused by the broker" in err[0] and "not authorized" in err[0], err
    assert "dead-letters them after PN_RELAY_MAX_ATTEMPTS" in err[0], err
    assert "will be delivered" not in err[0] and "will deliver" not in err[0], err
    # What the line promises: the relay dead-letters it.
    with build(spec, sqlite_url, username=user, password=password, relay_max_attempts=1,
               relay_writer_grace_seconds=0.0) as app:
        app.relay.run_once()
        dead = DeadLetters(app.store).find()
        assert [(d.event_id, d.table) for d in dead] == [(1, "acl.t")], dead
