"""The set of damaged events already reported is bounded (store/log_headers.py).

A log with more damaged rows than ``REPORTED_BOUND`` must not grow the set past
it, and every damaged event is still reported (ERROR, counted) at least once;
one forgotten is reported again when read again, as documented; one still
remembered is not. Defect found here: with a bound of 1 the eviction removed
``REPORTED_BOUND // 2`` = 0 entries, so the set grew without limit.
Rows are damaged by SQL as they are logged (tests/support/damaged_rows.py);
the bound is the module attribute, set small for the test.
"""

from __future__ import annotations

import logging

import pytest
from partition_notify.store import log_headers
from partition_notify.store.log_headers import damaged_events

from partition_notify.app import App
from tests.support.damaged_rows import damage_on_insert


def _reports(caplog: pytest.LogCaptureFixture, event_id: int) -> int:
    return sum(1 for r in caplog.records if r.name == log_headers.log.name
               and r.levelno == logging.ERROR and f"event {event_id} " in r.getMessage())


@pytest.mark.parametrize("bound", [1, 4])
def test_more_damaged_rows_than_the_bound(
    app: App, bound: int, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_headers, "REPORTED_BOUND", bound)
    monkeypatch.setattr(log_headers, "_reported", {})
    app.publisher.register_table("db", "a", ["ds"])
    damage_on_insert(app, "'[1, 2]'")
    log = app.store.log
    start, counted = log.max_event_id(), damaged_events()
    ids = []
    for i in range(3 * bound + 2):
        ids.append(app.publisher.announce_partitions("db", "a", [f"ds=poison{i}"])[0].event_id)
        got = log.events_after(ids[-1] - 1, 1)  # read as every follower reads it
        assert got[0].headers["PN_TABLE"] == "db.a"
        assert len(log_headers._reported) <= bound, "the reported set outgrew its bound"
    assert all(_reports(caplog, i) >= 1 for i in ids), "a damaged event was never reported"
    assert damaged_events() - counted >= len(ids)

    caplog.clear()
    log.events_after(ids[-2], 1)  # the newest: still remembered, not reported again
    assert _reports(caplog, ids[-1]) == 0
    log.events_after(start, 1)  # the oldest: forgotten long ago, reported again
    assert _reports(caplog, ids[0]) == 1
    assert len(log_headers._reported) <= bound
