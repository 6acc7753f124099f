"""Damaged rows of the event log are listed for the people on call.

Before: a damaged row was visible only as one ERROR line per process and a
counter; nothing on ``/ui/ops`` or in the CLI, and a restart forgot it. Now
store/damaged_rows.py lists them from the database (bounded: the newest
``scan`` events, at most ``limit`` rows, newest first), and
``partition-notify dead-letters damaged`` prints them as JSON lines. The
browser check of ``/ui/ops`` is tests/ui/test_ops.py. Rows are damaged by SQL
as they are logged (tests/support/damaged_rows.py), on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import uuid

import pytest
from partition_notify.store.damaged_rows import find_damaged
from partition_notify.store.log_headers import damaged_events

from partition_notify.app import App
from partition_notify.cli import main
from tests.support.damaged_rows import damage_on_insert


def _log(app: App, body: str | None) -> list[int]:
    app.publisher.register_table("db", "a", ["ds"])
    damage_on_insert(app, "'[1, 2]'", body)
    return [app.publisher.announce_partitions("db", "a", [f"ds={p}"])[0].event_id
            for p in ("0", "poison1", "1", "poison2", "2")]


def test_damaged_rows_are_listed_newest_first_bounded(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    ids = _log(app, None)
    caplog.clear()
    counted = damaged_events()
    found = find_damaged(app.store, 10)
    assert [d.event_id for d in found.rows] == [ids[3], ids[1]]
    assert (found.first, found.last) == (1, ids[-1])
    d = found.rows[0]
    assert d.table == "db.a" and d.topic_seq == 4 and not d.dead_lettered
    assert d.problem.startswith("field 'headers' is a JSON list, expected a JSON object"), d
    assert d.unverifiable == ""
    # Bounded: the limit, and the scan (only the newest 2 events: one damaged among them).
    assert [d.event_id for d in find_damaged(app.store, 1).rows] == [ids[3]]
    assert [d.event_id for d in find_damaged(app.store, 10, scan=2).rows] == [ids[3]]
    assert find_damaged(app.store, 10, scan=1).rows == []
    # Listing reports nothing: the readers do that, once per event per process.
    assert damaged_events() == counted and not caplog.records


def test_an_unverifiable_row_is_listed_as_such(app: App) -> None:
    ids = _log(app, f"'not a message {uuid.uuid4()}'")
    rows = find_damaged(app.store, 10).rows
    assert [d.event_id for d in rows] == [ids[3], ids[1]]
    why = rows[0].unverifiable
    assert f"event {ids[3]} of topic" in why and "'body' does not decode" in why, why


def test_the_cli_prints_them(app: App, store_url: str,
                             capsys: pytest.CaptureFixture[str]) -> None:
    ids = _log(app, None)
    capsys.readouterr()
    assert main(["--store-url", store_url, "dead-letters", "damaged", "--limit", "1"]) == 0
    out, err = capsys.readouterr()
    lines = [json.loads(x) for x in out.splitlines()]
    assert [(x["source"], x["event_id"], x["table"]) for x in lines] == [
        ("event-log", ids[3], "db.a")], out
    assert "expected a JSON object" in lines[0]["problem"]
    assert f"checked events 1..{ids[-1]}; 1 damaged row(s) shown (at most 1" in err, err
    assert main(["--store-url", store_url, "dead-letters", "damaged", "--scan", "0"]) == 0
    assert [json.loads(x)["event_id"] for x in capsys.readouterr()[0].splitlines()] == [
        ids[3], ids[1]]


@pytest.mark.parametrize("argv", [["--scan", "-1"], ["--limit", "0"], ["--scan", "x"]])
def test_the_cli_refuses_a_bad_bound(argv: list[str], store_url: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--store-url", store_url, "dead-letters", "damaged", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr()[1]
    assert argv[0] in err and repr(argv[1]) in err and "must be an integer >=" in err, err

