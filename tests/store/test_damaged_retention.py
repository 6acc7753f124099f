"""A damaged newest retention row never decides a reader's answer.

A row whose stored body no longer parses (cut short, an older version's
fields) or that says something else than its row (another table, another
spec) is skipped: every reader answers from the next-newest valid row, and the
store logs the bad row once, with its id. Written with real SQL into a real
SQLite and PostgreSQL store, as a damaged or older-version row would look.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import Engine, text

from partition_notify.app import App, build_app
from partition_notify.cli import main
from partition_notify.contract import SetDoneMessage, spec

WANTED = "datestamp=1/region=us"


#: How much newer the damaged row is than the good one (its row's event id).
NEWER = 1000


def _cut(body: str) -> str:
    return body[: len(body) // 2]


def _edited(body: str, **fields: object) -> str:
    """``body`` with ``fields`` changed, its eventId the damaged row's own."""
    old = json.loads(body)
    return json.dumps({**old, "eventId": old["eventId"] + NEWER, **fields})


def _spec_unparsable(body: str) -> str:
    return _edited(body, partitionSpec="datestamp")


def _other_table(body: str) -> str:
    return _edited(body, table="returns")


def _other_spec(body: str) -> str:
    return _edited(body, partitionSpec={"datestamp": "2"}, partitionSpecString="datestamp=2")


def _older_version(body: str) -> str:
    """What an older release might have stored: no partitionSpecString."""
    return json.dumps({k: v for k, v in json.loads(_edited(body)).items()
                       if k != "partitionSpecString"})


DAMAGE: dict[str, Callable[[str], str]] = {
    "cut-short": _cut, "spec-unparsable": _spec_unparsable, "other-table": _other_table,
    "other-spec": _other_spec, "older-version": _older_version,
}


def insert_damaged(engine: Engine, good: SetDoneMessage, table_id: int, body: str) -> int:
    """A retention row newer than ``good``, same spec, with ``body``; its row id."""
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO pn_set_done (table_id, spec, event_id, body, published_at, expires_at) "
            "VALUES (:t, :s, :e, :b, :p, 1e12)"),
            {"t": table_id, "s": good.spec, "e": good.event_id + NEWER, "b": body,
             "p": (good.timestamp_ms or 0) / 1000.0})
        return int(conn.execute(text("SELECT max(id) FROM pn_set_done")).scalar_one())


@pytest.fixture
def app(store_url: str) -> Iterator[App]:
    application = build_app(store_url=store_url, transport_url="embedded://")
    yield application
    application.close()


@pytest.fixture(params=sorted(DAMAGE))
def damaged(request: pytest.FixtureRequest, app: App) -> tuple[SetDoneMessage, int]:
    """``datestamp=1`` done, then a damaged newer row for the same spec."""
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    good = app.publisher.send_mark_set_done("sales", "orders", "datestamp=1", revision=1)
    info = app.store.catalog.get_table("sales", "orders")
    body = app.store.retention.set_done_covering(info, [good.spec])[0]
    return good, insert_damaged(app.store.engine, good, info.id, DAMAGE[request.param](body))


def _bad_row_lines(caplog: pytest.LogCaptureFixture, row_id: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if f"row {row_id} " in r.getMessage()]


def test_store_reads_skip_the_damaged_row_and_log_it_once(
    app: App, damaged: tuple[SetDoneMessage, int], caplog: pytest.LogCaptureFixture
) -> None:
    good, row_id = damaged
    info = app.store.catalog.get_table("sales", "orders")
    wanted = spec.covering_specs(spec.parse(WANTED))
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            newest = app.store.retention.newest_covering(info, wanted)
            assert newest is not None
            assert SetDoneMessage.model_validate_json(newest) == good
            bodies = app.store.retention.set_done_covering(info, wanted)
            assert [SetDoneMessage.model_validate_json(b) for b in bodies] == [good]
            history = app.store.retention.set_done_history([info], 0)
            assert [SetDoneMessage.model_validate_json(b) for b in history] == [good]
    lines = _bad_row_lines(caplog, row_id)
    assert len(lines) == 1, lines
    assert "sales.orders" in lines[0] and f"event {good.event_id + NEWER}" in lines[0], lines


def test_python_and_cli_waiters_answer_the_valid_row(
    app: App, damaged: tuple[SetDoneMessage, int], store_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    good, _ = damaged
    with app.subscriber() as sub:
        assert sub.wait_for_set_done("sales", "orders", WANTED, 0).event_id == good.event_id
    assert app.deadlines.wait_for_set_done("sales", "orders", WANTED, 5).event_id \
        == good.event_id
    for extra in ((), ("--fail-on-late",)):
        capsys.readouterr()
        code = main(["--store-url", store_url, "--transport-url", "embedded://", "wait",
                     "sales.orders", WANTED, "--timeout", "5", *extra])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert json.loads(out)["eventId"] == good.event_id, out


def test_the_deadline_checker_judges_from_the_valid_rows(app: App) -> None:
    """The checker read every covering row and json.loads'ed each: a cut-short one
    stopped the whole check run with a JSONDecodeError."""
    from datetime import UTC, datetime

    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    app.deadlines.add("sales", "orders", name="daily", spec_template="datestamp={{ ds_nodash }}",
                      cron="0 0 * * *", deadline="06:00")
    good = app.publisher.send_mark_set_done("sales", "orders", "datestamp=20300101")
    info = app.store.catalog.get_table("sales", "orders")
    body = app.store.retention.set_done_covering(info, [good.spec])[0]
    insert_damaged(app.store.engine, good, info.id, _cut(body))
    at = datetime(2030, 1, 2, 6, 0, 1, tzinfo=UTC).timestamp()
    report = app.deadlines.checker(clock=lambda: at, lookback_seconds=3600).check()
    assert (report.on_time, report.late) == (1, [])


def test_history_replay_and_cli_history_hand_on_only_the_valid_row(
    app: App, damaged: tuple[SetDoneMessage, int], store_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A subscriber's history (what a late scheduler replays) and ``history``: a row
    whose body says another spec was done would announce a completion that never was."""
    good, _ = damaged
    with app.subscriber() as sub:
        got = sub.subscribe("sales.orders", history=True)
        end = app.publisher.send_mark_set_done("sales", "orders", "datestamp=9")
        replayed: list[int] = []
        while not replayed or replayed[-1] != end.event_id:
            msg = got.get(timeout=10)
            assert msg is not None, replayed
            replayed.append(msg.event_id)
        assert replayed == [good.event_id, end.event_id]
        assert [m.event_id for m in sub.set_done_history("sales", "orders")] == replayed
    capsys.readouterr()
    assert main(["--store-url", store_url, "history", "sales.orders"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["eventId"] for line in out] == replayed, out


def test_a_damaged_row_alone_does_not_hide_a_late_partition(app: App) -> None:
    """The checker's last look inside its write transaction counted any covering row:
    a damaged one alone kept the partition from ever being declared late."""
    from datetime import UTC, datetime

    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    app.deadlines.add("sales", "orders", name="daily", spec_template="datestamp={{ ds_nodash }}",
                      cron="0 0 * * *", deadline="06:00")
    other = app.publisher.send_mark_set_done("sales", "orders", "datestamp=20291231")
    info = app.store.catalog.get_table("sales", "orders")
    body = app.store.retention.set_done_covering(info, [other.spec])[0]
    with app.store.engine.begin() as conn:  # its body cut short, its row for 20300101
        conn.execute(text("UPDATE pn_set_done SET spec = 'datestamp=20300101', body = :b"),
                     {"b": _cut(body)})
    at = datetime(2030, 1, 2, 6, 0, 1, tzinfo=UTC).timestamp()
    report = app.deadlines.checker(clock=lambda: at, lookback_seconds=3600).check()
    assert [c.spec for c in report.late] == ["datestamp=20300101"], report
