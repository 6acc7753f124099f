"""A writer that ends without App.close() leaves no event for the relay to send twice.

docs/writers.md shows scripts and PySpark jobs that simply end. Their pending
lazy marks are written at interpreter exit (within the close timeout), so the
relay finds nothing unpublished and a raw consumer on ActiveMQ sees each
event once. Real ActiveMQ, SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.contract.raw_clients import RawStomp, reader_credentials
from tests.transports.stomp_helpers import build, stomp_spec

CHILD = Path(__file__).with_name("_exit_writer.py")
COUNT = 5

pytestmark = pytest.mark.broker


def test_writer_exit_without_close_sends_each_event_once(store_url: str) -> None:
    spec = stomp_spec("activemq")
    assert spec.username and spec.password
    setup = build(spec, store_url, relay_writer_grace_seconds=0.0)
    try:
        info = setup.publisher.register_table("exits", "events", ["ds"])
        raw = RawStomp(spec.url, *reader_credentials("activemq"))
        raw.subscribe(info.topic)
        done = subprocess.run(
            [sys.executable, str(CHILD), store_url, spec.url, spec.username, spec.password,
             str(COUNT)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        # What the relay re-sends: events the writer published but never marked.
        unmarked = setup.store.log.relay_lag()[0]
        resent = setup.relay.run_once()
        # A last event on the same topic: once it arrives, anything re-sent before it has too.
        setup.publisher.send_mark_set_done("exits", "events", "ds=last")
        seen: list[int] = []
        while len(seen) < COUNT + 1:
            got = raw.messages.get(timeout=30)
            seen.append(json.loads(got.body)["eventId"])
        raw.close()
        assert len(seen) == len(set(seen)) == COUNT + 1, f"duplicates on ActiveMQ: {seen}"
        assert (unmarked, resent) == (0, 0), "the writer's marks were lost at exit"
    finally:
        setup.close()
