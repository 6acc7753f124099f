"""The retained-row check remembers at most MAX_REMEMBERED rows of each kind.

It keeps the rows it found valid (so the hot look-up decodes a body once) and the
damaged ones it logged (so each is logged once); a long-running serve reads
far more distinct rows than that over a year of retention.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from partition_notify.store.retained_check import MAX_REMEMBERED, RowCheck

from partition_notify.app import build_app


def test_valid_and_damaged_rows_remembered_are_bounded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with build_app(store_url=f"sqlite:///{tmp_path}/s.db", transport_url="embedded://") as app:
        app.publisher.register_table("sales", "orders", ["datestamp"])
        done = app.publisher.send_mark_set_done("sales", "orders", "datestamp=1")
        info = app.store.catalog.get_table("sales", "orders")
        body = app.store.retention.newest_covering(info, ["datestamp=1"])
    assert body is not None
    check = RowCheck()
    extra = 5
    for row_id in range(MAX_REMEMBERED + extra):  # the same body under many row ids
        assert check.ok(info, None, (body, row_id, done.event_id))
    assert len(check._valid) == MAX_REMEMBERED
    with caplog.at_level(logging.WARNING, logger="partition_notify.store.retention"):
        for row_id in range(MAX_REMEMBERED + extra):
            assert not check.ok(info, None, ("{not json", row_id, 1))
        assert not check.ok(info, None, ("{not json", MAX_REMEMBERED + extra - 1, 1))
    assert len(check._logged) == MAX_REMEMBERED
    assert len(caplog.records) == MAX_REMEMBERED + extra  # each once: the last not again
    assert check.skipped == MAX_REMEMBERED + extra + 1
