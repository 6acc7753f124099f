"""The push sink against a real ``airflow api-server`` process (simple auth manager, JWT)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integrations.conftest import PASSWORD, USER


class Crash(Exception):
    """The sink process dies here."""


def _sink(app: Any, url: str, crash: str | None = None) -> Any:
    from partition_notify.integrations.airflow.push import (
        AirflowClient,
        AirflowPushSettings,
        AirflowPushSink,
    )
    from pydantic import SecretStr

    class CrashingClient(AirflowClient):
        def post_event(self, asset_id: int, partition_key: str, extra: dict[str, object]) -> Any:
            if crash == "before-post":
                raise Crash
            out = super().post_event(asset_id, partition_key, extra)
            if crash == "after-post":
                raise Crash
            return out

    cfg = AirflowPushSettings(url=url, username=USER, password=SecretStr(PASSWORD),
                              assets={"sales.orders": "sales_orders"})
    return AirflowPushSink(app.store, cfg, CrashingClient(url, USER, PASSWORD, 10.0))


def _events_for(sink: Any, msg: Any) -> list[dict[str, Any]]:
    """Airflow's events for ``msg`` (by messageId: tests share one Airflow, not one store)."""
    seen = sink.client.sent_since(sink._asset("sales.orders"), 0.0)
    return [e for e in seen if (e.get("extra") or {}).get("messageId") == msg.message_id]


def _queued_partitions() -> set[str]:
    from airflow.models.asset import AssetPartitionDagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return set(session.scalars(
            select(AssetPartitionDagRun.partition_key)
            .where(AssetPartitionDagRun.target_dag_id == "pn_orders_by_partition")))


@pytest.fixture
def pn_app(airflow_api: str, tmp_path: Path) -> Iterator[Any]:
    from partition_notify.app import build_app

    app = build_app(store_url=f"sqlite:///{tmp_path}/pn.db", transport_url="embedded://")
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    yield app
    app.close()


def test_set_done_becomes_a_partitioned_asset_event_and_run(pn_app: Any, airflow_api: str) -> None:
    sink = _sink(pn_app, airflow_api)
    assert sink.run_once() == 0  # cursor created at the end of the log
    exact = pn_app.publisher.send_mark_set_done("sales", "orders", "datestamp=20110228/region=us")
    coarse = pn_app.publisher.send_mark_set_done("sales", "orders", "datestamp=20110301")
    pn_app.publisher.announce_partitions("sales", "orders", ["datestamp=20110302/region=us"])
    assert sink.run_once() == 2
    assert sink.run_once() == 0
    (ev,) = _events_for(sink, exact)
    assert ev["partition_key"] == "20110228|us"
    assert ev["extra"]["eventId"] == exact.event_id
    assert ev["extra"]["spec"] == "datestamp=20110228/region=us"
    assert [e["partition_key"] for e in _events_for(sink, coarse)] == ["20110301"]
    assert {"20110228|us", "20110301"} <= _queued_partitions()


@pytest.mark.parametrize("where", ["after-post", "before-post"])
def test_crash_and_restart_sends_each_set_done_once(
    pn_app: Any, airflow_api: str, where: str
) -> None:
    _sink(pn_app, airflow_api).run_once()
    day = "20110310" if where == "after-post" else "20110311"
    msg = pn_app.publisher.send_mark_set_done("sales", "orders", f"datestamp={day}/region=eu")
    with pytest.raises(Crash):
        _sink(pn_app, airflow_api, crash=where).run_once()
    expected_before = 1 if where == "after-post" else 0
    restarted = _sink(pn_app, airflow_api)
    assert len(_events_for(restarted, msg)) == expected_before
    restarted.run_once()
    assert len(_events_for(restarted, msg)) == 1
    assert restarted.recovered == expected_before
    assert restarted.run_once() == 0


def test_wrong_password_is_a_push_error_naming_the_call(pn_app: Any, airflow_api: str) -> None:
    from partition_notify.integrations.airflow.push import AirflowPushSettings, AirflowPushSink
    from pydantic import SecretStr

    from partition_notify.core.errors import PushError

    cfg = AirflowPushSettings(url=airflow_api, username=USER, password=SecretStr("wrong"),
                              assets={"sales.orders": "sales_orders"})
    sink = AirflowPushSink(pn_app.store, cfg)
    with pytest.raises(PushError, match="/auth/token: HTTP 401"):
        sink.run_once()  # the whole run fails (not each table): the cursors exist
    pn_app.publisher.send_mark_set_done("sales", "orders", "datestamp=20110312")
    with pytest.raises(PushError, match="/auth/token: HTTP 401"):
        sink.run_once()


def test_serve_runs_the_sink_when_configured(
    pn_app: Any, airflow_api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`partition-notify serve`'s Service schedules the sink from PN_AIRFLOW_* alone."""
    from partition_notify.serve.service import Service

    monkeypatch.setenv("PN_AIRFLOW_URL", airflow_api)
    monkeypatch.setenv("PN_AIRFLOW_USERNAME", USER)
    monkeypatch.setenv("PN_AIRFLOW_PASSWORD", PASSWORD)
    monkeypatch.setenv("PN_AIRFLOW_ASSETS", '{"sales.orders": "sales_orders"}')
    monkeypatch.setenv("PN_AIRFLOW_INTERVAL_SECONDS", "0.2")
    service = Service(pn_app)
    service.start()
    try:
        assert service.scheduler.get_job("airflow-push") is not None
        probe = _sink(pn_app, airflow_api)
        deadline = time.monotonic() + 30
        while probe.cursors.get(service_cursor := probe.cursor) is None:  # first run made it
            assert time.monotonic() < deadline, "the push job never ran"
            time.sleep(0.05)
        msg = pn_app.publisher.send_mark_set_done("sales", "orders", "datestamp=20110320")
        while not _events_for(probe, msg):  # Airflow's API is the only way to see it
            assert time.monotonic() < deadline, f"{service_cursor}: nothing reached Airflow"
            time.sleep(0.1)
    finally:
        service.stop()
    assert [e["partition_key"] for e in _events_for(probe, msg)] == ["20110320"]


def test_two_sinks_never_push_the_same_events(pn_app: Any, airflow_api: str) -> None:
    """Two `serve` processes: while one holds the cursor's lease the other sends nothing."""
    first, second = _sink(pn_app, airflow_api), _sink(pn_app, airflow_api)
    first.run_once()
    msg = pn_app.publisher.send_mark_set_done("sales", "orders", "datestamp=20110325")
    assert first.cursors.claim(first.cursor, first.owner, 60)  # `first` is mid-batch
    assert second.run_once() == 0
    assert _events_for(second, msg) == []
    first.cursors.release(first.cursor, first.owner)
    assert second.run_once() == 1
    assert first.run_once() == 0
    assert len(_events_for(first, msg)) == 1
