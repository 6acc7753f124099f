"""Withdrawals on SQLite and PostgreSQL: what they remove, what rules retract, restatement.

Real stores (the ``store_url`` fixture), the embedded transport and the real
evaluator ``serve`` runs; messages are read back from the event log as a
consumer sees them, and "done" is asked the way ``wait``/``is-set-done`` ask it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from partition_notify.app import App, build_app
from partition_notify.contract import (
    PartitionDoneRetractedMessage,
    PartitionWithdrawnMessage,
    decode,
    spec,
)
from partition_notify.core.errors import InvalidSpecError, ValidationError, WaitTimeout
from tests.rules.test_evaluator import derived, regions, run


@pytest.fixture
def app(store_url: str) -> Iterator[App]:
    application = build_app(store_url=store_url, transport_url="embedded://")
    yield application
    application.close()


def retractions(app: App) -> list[PartitionDoneRetractedMessage]:
    return [m for ev in app.store.log.events_after(0, 100_000)
            if isinstance(m := decode(ev.body), PartitionDoneRetractedMessage)]


def is_done(app: App, table: str, wanted: str) -> bool:
    """What ``is-set-done`` answers (HTTP covering, ``wait --timeout 0``)."""
    info = app.publisher.table(*table.split("."))
    return bool(app.store.retention.set_done_covering(info, spec.covering_specs(
        spec.parse(wanted))))


def announce(app: App, ds: str, *regions_: str) -> None:
    for r in regions_:
        app.publisher.announce_partitions("sales", "orders", [{"datestamp": ds, "region": r}])


def test_withdrawal_removes_partitions_and_set_dones_sharing_a_partition(app: App) -> None:
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    announce(app, "20260101", "us", "eu")
    announce(app, "20260102", "us")
    for s in ("datestamp=20260101", "region=us", "datestamp=20260102", "region=eu"):
        app.publisher.send_mark_set_done("sales", "orders", s)
    msg = app.publisher.withdraw("sales", "orders", "datestamp=20260101/region=us",
                                 reason="bad data: duplicated rows")
    assert isinstance(msg, PartitionWithdrawnMessage)
    assert msg.partitions == [{"datestamp": "20260101", "region": "us"}]
    # Sharing a partition with the withdrawn one: the day and the region; not the others.
    assert [sd.spec for sd in msg.set_dones] == ["datestamp=20260101", "region=us"]
    assert msg.reason == "bad data: duplicated rows"
    assert not is_done(app, "sales.orders", "datestamp=20260101/region=apac")
    assert not is_done(app, "sales.orders", "region=us")
    assert is_done(app, "sales.orders", "datestamp=20260102")
    assert is_done(app, "sales.orders", "datestamp=20260101/region=eu")  # region=eu still is
    info = app.publisher.table("sales", "orders")
    present = {p.spec for p in app.store.catalog.partitions(info)}
    assert present == {"datestamp=20260101/region=eu", "datestamp=20260102/region=us"}
    # Restatement: today's re-announce at a new revision, then set-done again.
    [again] = app.publisher.announce_partitions(
        "sales", "orders", [{"datestamp": "20260101", "region": "us"}], revision=2)
    assert again.revision == 2
    app.publisher.send_mark_set_done("sales", "orders", "datestamp=20260101", revision=2)
    assert is_done(app, "sales.orders", "datestamp=20260101/region=us")


def test_wait_answers_not_done_after_a_withdrawal(app: App) -> None:
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    first = app.publisher.send_mark_set_done("sales", "orders", "datestamp=20260101")
    with app.subscriber() as sub:
        assert sub.wait_for_set_done("sales", "orders", "datestamp=20260101/region=us",
                                     timeout=0).event_id == first.event_id
        app.publisher.withdraw("sales", "orders", "datestamp=20260101", reason="bad")
        with pytest.raises(WaitTimeout):
            sub.wait_for_set_done("sales", "orders", "datestamp=20260101/region=us", timeout=0)
        again = app.publisher.send_mark_set_done("sales", "orders", "datestamp=20260101")
        assert sub.wait_for_set_done("sales", "orders", "datestamp=20260101/region=us",
                                     timeout=0).event_id == again.event_id


def test_withdraw_then_retract_then_re_announce_derives_again(app: App) -> None:
    regions(app)
    announce(app, "20260101", "us", "eu", "apac")
    [first] = run(app)
    assert is_done(app, "sales.orders", "datestamp=20260101")
    w = app.publisher.withdraw("sales", "orders", "datestamp=20260101/region=eu",
                               reason="bad data")
    report = app.rules.evaluator().run_once()
    assert report.derived == []
    [r] = report.retracted
    assert (r.db, r.table, r.spec, r.rule) == ("sales", "orders", "datestamp=20260101", "regions")
    assert r.retracted_event_id == first.event_id
    assert [(i.table, i.value, i.event_id) for i in r.withdrawn] == [
        ("sales.orders", "eu", w.event_id)]
    assert retractions(app) == [r]
    assert not is_done(app, "sales.orders", "datestamp=20260101")
    assert app.rules.evaluator().run_once().retracted == []  # once
    # Only the withdrawn input is missing: re-announcing it derives the spec again.
    announce(app, "20260101", "eu")
    [second] = run(app)
    assert second.spec == "datestamp=20260101" and second.event_id > first.event_id
    assert second.derived_from is not None
    assert {i.value: i.event_id for i in second.derived_from.inputs}["eu"] > w.event_id
    assert is_done(app, "sales.orders", "datestamp=20260101")
    assert len(derived(app)) == 2 and len(retractions(app)) == 1


def test_a_withdrawal_before_the_rule_fired_uncounts_the_input(app: App) -> None:
    regions(app)
    announce(app, "20260101", "us", "eu")
    assert run(app) == []
    app.publisher.withdraw("sales", "orders", "datestamp=20260101/region=eu", reason="bad")
    announce(app, "20260101", "apac")
    assert run(app) == []  # eu no longer counts
    assert app.rules.evaluator().run_once().retracted == []
    announce(app, "20260101", "eu")
    [msg] = run(app)
    assert msg.spec == "datestamp=20260101"


def test_add_withdraw_add_in_one_batch_counts_in_log_order(app: App) -> None:
    regions(app)
    announce(app, "20260101", "us", "eu")
    app.publisher.withdraw("sales", "orders", "datestamp=20260101/region=us", reason="bad")
    announce(app, "20260101", "apac")
    assert run(app) == []  # us was withdrawn after it came: not counted
    announce(app, "20260101", "us")
    [msg] = run(app)
    assert msg.derived_from is not None
    assert {i.value for i in msg.derived_from.inputs} == {"us", "eu", "apac"}


def test_cross_table_input_withdrawn_retracts_the_target(app: App) -> None:
    for t in ("orders", "returns"):
        app.publisher.register_table("sales", t, ["datestamp", "region"])
    app.publisher.register_table("reports", "daily", ["datestamp"])
    app.rules.add("reports.daily", name="inputs", kind="cross-table",
                  params={"inputs": ["sales.orders", "sales.returns"], "by": ["datestamp"]})
    for t in ("orders", "returns"):
        app.publisher.send_mark_set_done("sales", t, "datestamp=20260101")
    [first] = run(app)
    assert is_done(app, "reports.daily", "datestamp=20260101")
    # One bad partition of an input takes its day's set-done back, and the target's.
    app.publisher.announce_partitions("sales", "returns", [{"datestamp": "20260101",
                                                            "region": "us"}])
    app.publisher.withdraw("sales", "returns", "datestamp=20260101/region=us", reason="bad")
    [r] = app.rules.evaluator().run_once().retracted
    assert (r.db, r.table, r.spec, r.retracted_event_id) == (
        "reports", "daily", "datestamp=20260101", first.event_id)
    assert [i.value for i in r.withdrawn] == ["sales.returns"]
    assert not is_done(app, "reports.daily", "datestamp=20260101")
    app.publisher.send_mark_set_done("sales", "returns", "datestamp=20260101", revision=2)
    [second] = run(app)
    assert second.event_id > first.event_id
    assert is_done(app, "reports.daily", "datestamp=20260101")


def test_bad_withdrawals_say_field_and_value(app: App) -> None:
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    with pytest.raises(InvalidSpecError, match="hour"):
        app.publisher.withdraw("sales", "orders", "hour=1", reason="bad")
    with pytest.raises(ValidationError, match=r"withdrawal reason of sales\.orders must be 1"):
        app.publisher.withdraw("sales", "orders", "datestamp=1", reason="  ")
    with pytest.raises(ValidationError, match=r"withdrawal reason of sales\.orders must be a str"):
        app.publisher.withdraw("sales", "orders", "datestamp=1", reason=None)  # type: ignore[arg-type]
    assert app.store.log.max_event_id() == 0


def test_like_wildcards_and_escapes_in_values_match_exactly(app: App) -> None:
    """The withdrawal's SQL match (store/withdrawals.py) is a LIKE: ``_``, ``%`` and
    Hive-escaped ``/`` in values must match themselves only."""
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    values = ["a_b", "axb", "a%b", "a%25b", "a/b", "a"]
    app.publisher.announce_partitions("sales", "orders", [
        {"datestamp": "1", "region": v} for v in values])
    for v in values:
        app.publisher.send_mark_set_done("sales", "orders", {"datestamp": "1", "region": v})
    for v in ("a_b", "a%b", "a/b"):
        msg = app.publisher.withdraw("sales", "orders", {"datestamp": "1", "region": v},
                                     reason="bad")
        assert msg.partitions == [{"datestamp": "1", "region": v}], v
        assert [sd.spec for sd in msg.set_dones] == [
            spec.canonical({"datestamp": "1", "region": v})], v
    info = app.publisher.table("sales", "orders")
    assert sorted(p.values["region"] for p in app.store.catalog.partitions(info)) == [
        "a", "a%25b", "axb"]
