"""Push poison and recovery against a real ``airflow api-server`` (issue 24).

One table whose set-dones Airflow refuses for good, or whose earlier send
Airflow cannot confirm (3.3.2 answers 500 while a DAG run the event created
is queued), must not hold back the pushes of any other table.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.integrations.conftest import PASSWORD, USER


class Crash(Exception):
    """The sink process dies here."""


def _sink(app: Any, url: str, assets: dict[str, str | int], crash: bool = False,
          **settings: Any) -> Any:
    from partition_notify.integrations.airflow.push import (
        AirflowClient,
        AirflowPushSettings,
        AirflowPushSink,
    )
    from pydantic import SecretStr

    class CrashingClient(AirflowClient):
        def post_event(self, asset_id: int, partition_key: str, extra: dict[str, object]) -> Any:
            out = super().post_event(asset_id, partition_key, extra)
            if crash:
                raise Crash
            return out

    cfg = AirflowPushSettings(url=url, username=USER, password=SecretStr(PASSWORD),
                              assets=assets, **settings)
    return AirflowPushSink(app.store, cfg, CrashingClient(url, USER, PASSWORD, 10.0))


def _airflow_events(message_id: str) -> list[Any]:
    """Airflow's own rows (its API cannot list an event whose run is queued)."""
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return [e for e in session.scalars(select(AssetEvent))
                if (e.extra or {}).get("messageId") == message_id]


@pytest.fixture
def queued() -> Iterator[list[str]]:
    """Runs a test queued; started at teardown, or other tests' listings would answer 500."""
    runs: list[str] = []
    yield runs
    for run_id in runs:
        _start_run(run_id)


def _queue_a_run_for(message_id: str) -> str:
    """What Airflow's scheduler does under max_active_runs: a run created, still queued."""
    from airflow.models.asset import AssetEvent
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState
    from airflow.utils.types import DagRunType
    from sqlalchemy import select

    run_id = f"asset_triggered__{message_id}"
    with create_session() as session:
        (event,) = [e for e in session.scalars(select(AssetEvent))
                    if (e.extra or {}).get("messageId") == message_id]
        run = DagRun("pn_orders_by_partition", run_id, run_type=DagRunType.ASSET_TRIGGERED,
                     state=DagRunState.QUEUED, run_after=datetime.now(UTC))
        session.add(run)
        event.created_dagruns.append(run)
    return run_id


def _start_run(run_id: str) -> None:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import update

    with create_session() as session:
        session.execute(update(DagRun).where(DagRun.run_id == run_id)
                        .values(state="running", start_date=datetime.now(UTC)))


@pytest.fixture
def pn_app(airflow_api: str, tmp_path: Path) -> Iterator[Any]:
    from partition_notify.app import build_app

    app = build_app(store_url=f"sqlite:///{tmp_path}/pn.db", transport_url="embedded://")
    app.publisher.register_table("sales", "orders", ["datestamp", "region"])
    app.publisher.register_table("sales", "returns", ["datestamp"])
    yield app
    app.close()


def test_a_refused_table_is_dead_lettered_and_the_others_keep_flowing(
    pn_app: Any, airflow_api: str
) -> None:
    """Poison: an asset id Airflow does not have (deleted) answers 404 for good."""
    pub = pn_app.publisher
    sink = _sink(pn_app, airflow_api, {"sales.returns": 999_999, "sales.orders": "sales_orders"})
    sink.run_once()
    bad = pub.send_mark_set_done("sales", "returns", "datestamp=20110401")
    good = pub.send_mark_set_done("sales", "orders", "datestamp=20110401/region=us")
    started = time.monotonic()
    sink.run_once()  # today's main: PushError (HTTP 404) on every run, nothing for orders
    latency = time.monotonic() - started
    assert len(_airflow_events(good.message_id)) == 1
    (letter,) = sink.letters.find()
    assert (letter.event_id, letter.table) == (bad.event_id, "sales.returns")
    assert "HTTP 404" in letter.error and sink.dead_lettered == 1
    later = pub.send_mark_set_done("sales", "orders", "datestamp=20110402/region=us")
    assert sink.run_once() == 1  # the poison is not retried; orders go on
    assert len(_airflow_events(later.message_id)) == 1 and _airflow_events(bad.message_id) == []
    print(f"orders pushed {latency:.2f} s after the run began, returns poisoned")

    fixed = _sink(pn_app, airflow_api, {"sales.returns": "sales_returns",
                                        "sales.orders": "sales_orders"})
    fixed.letters.redrive([bad.event_id])  # `dead-letters redrive --source airflow-push`
    assert fixed.run_once() == 1
    assert len(_airflow_events(bad.message_id)) == 1 and fixed.letters.find() == []
    assert fixed.run_once() == 0


def test_serve_job_logs_and_counts_each_dead_letter(
    pn_app: Any, airflow_api: str, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from partition_notify.integrations.airflow.push import push_job

    for name, value in {"URL": airflow_api, "USERNAME": USER, "PASSWORD": PASSWORD,
                        "ASSETS": '{"sales.returns": 999997}'}.items():
        monkeypatch.setenv(f"PN_AIRFLOW_{name}", value)
    counted: list[int] = []
    failures: list[str] = []
    made = push_job(pn_app.store, counted.append,
                    lambda what, exc, event: failures.append(f"{what}: {exc}"))
    assert made is not None
    job, _ = made
    job()  # cursors start at the log's end
    bad = pn_app.publisher.send_mark_set_done("sales", "returns", "datestamp=20110408")
    job()
    job()
    assert counted == [1]  # serve adds these to pn_airflow_push_dead_lettered_total
    assert failures == []  # a dead letter is not a failed run
    (line,) = [r for r in caplog.records
               if getattr(r, "pn_event", None) == "airflow_push.dead_lettered"]
    assert line.levelname == "ERROR" and line.event_id == bad.event_id  # type: ignore[attr-defined]
    assert f"event {bad.event_id} of table sales.returns" in line.getMessage()
    assert "dead-letters list --source airflow-push" in line.getMessage()


def test_serve_counts_push_dead_letters_in_its_metric(
    pn_app: Any, airflow_api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The "airflow-push" entry of serve's JOBS hands the sink the metric's counter."""
    from partition_notify.serve.jobs import JOBS
    from partition_notify.serve.service import Service

    for name, value in {"URL": airflow_api, "USERNAME": USER, "PASSWORD": PASSWORD,
                        "ASSETS": '{"sales.returns": 999995}'}.items():
        monkeypatch.setenv(f"PN_AIRFLOW_{name}", value)
    service = Service(pn_app)
    (push,) = [j for j in JOBS if j.id == "airflow-push"]
    built = push.build(service.runtime)
    assert built is not None
    job, _ = built
    job()  # cursors start at the log's end
    pn_app.publisher.send_mark_set_done("sales", "returns", "datestamp=20110410")
    job()
    job()
    total = service.metrics.registry.get_sample_value("pn_airflow_push_dead_lettered_total")
    assert total == 1.0


def test_a_stale_asset_id_is_looked_up_again_on_404(pn_app: Any, airflow_api: str) -> None:
    """An asset re-created in Airflow has a new id; the cached name→id map must follow."""
    sink = _sink(pn_app, airflow_api, {"sales.orders": "sales_orders"})
    sink.run_once()
    real = sink._asset("sales.orders")
    sink._assets["sales.orders"] = 999_998  # what the cache holds after a re-creation
    msg = pn_app.publisher.send_mark_set_done("sales", "orders", "datestamp=20110403/region=eu")
    assert sink.run_once() == 1  # today's main: PushError (HTTP 404) forever
    assert sink._assets["sales.orders"] == real
    assert len(_airflow_events(msg.message_id)) == 1 and sink.letters.find() == []


def test_recovery_behind_a_queued_run_waits_for_its_table_alone(
    pn_app: Any, airflow_api: str, queued: list[str]
) -> None:
    """Airflow 3.3.2's 500 on listing an event whose run is queued stalls one table only."""
    from partition_notify.core.errors import PushError

    assets: dict[str, str | int] = {"sales.orders": "sales_orders",
                                    "sales.returns": "sales_returns"}
    _sink(pn_app, airflow_api, assets).run_once()
    msg = pn_app.publisher.send_mark_set_done("sales", "orders", "datestamp=20110404/region=us")
    with pytest.raises(Crash):
        _sink(pn_app, airflow_api, assets, crash=True).run_once()
    queued.append(run_id := _queue_a_run_for(msg.message_id))
    restarted = _sink(pn_app, airflow_api, assets)
    with pytest.raises(PushError, match="HTTP 500"):  # the Airflow bug, as reproduced
        restarted.client.sent_since(restarted._asset("sales.orders"), 0.0)
    other = pn_app.publisher.send_mark_set_done("sales", "returns", "datestamp=20110404")
    assert restarted.run_once() == 1  # today's main: PushError (HTTP 500), nothing sent
    assert len(_airflow_events(other.message_id)) == 1
    assert "sales.orders" in restarted.failures  # waits: its event may be the queued one
    assert len(_airflow_events(msg.message_id)) == 1
    _start_run(run_id)  # the run starts: Airflow can list the event again
    assert restarted.run_once() == 0
    assert restarted.recovered == 1 and len(_airflow_events(msg.message_id)) == 1


def test_unconfirmable_send_is_dead_lettered_after_the_settle_timeout(
    pn_app: Any, airflow_api: str, queued: list[str]
) -> None:
    assets: dict[str, str | int] = {"sales.orders": "sales_orders"}
    _sink(pn_app, airflow_api, assets).run_once()
    msg = pn_app.publisher.send_mark_set_done("sales", "orders", "datestamp=20110405/region=us")
    with pytest.raises(Crash):
        _sink(pn_app, airflow_api, assets, crash=True).run_once()
    queued.append(_queue_a_run_for(msg.message_id))
    restarted = _sink(pn_app, airflow_api, assets, settle_timeout_seconds=0.001)
    restarted.run_once()
    (letter,) = restarted.letters.find()
    assert letter.event_id == msg.event_id and "could not say" in letter.error
    assert len(_airflow_events(msg.message_id)) == 1  # not sent twice on a guess


def test_a_restart_takes_over_the_lease_of_its_dead_predecessor(
    pn_app: Any, airflow_api: str
) -> None:
    """After a crash the next `serve` pushes at once, not after the 35 s lease."""
    assets: dict[str, str | int] = {"sales.orders": "sales_orders"}
    sink = _sink(pn_app, airflow_api, assets)
    sink.run_once()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead_owner = f"{socket.gethostname()}:{int(gone.stdout)}:0:deadbeef"
    assert sink.cursors.claim(sink.cursor, dead_owner, sink.lease_seconds)
    live_owner = f"{socket.gethostname()}:{os.getppid()}:0:cafe"  # a live process's lease
    msg = pn_app.publisher.send_mark_set_done("sales", "orders", "datestamp=20110406/region=eu")
    assert sink.run_once() == 1  # today's main: 0 until the lease expires
    assert len(_airflow_events(msg.message_id)) == 1
    assert sink.cursors.claim(sink.cursor, live_owner, sink.lease_seconds)
    pn_app.publisher.send_mark_set_done("sales", "orders", "datestamp=20110407/region=eu")
    assert sink.run_once() == 0  # a live holder keeps its lease


def test_a_redrive_cut_by_a_crash_is_sent_once(pn_app: Any, airflow_api: str) -> None:
    assets: dict[str, str | int] = {"sales.returns": "sales_returns"}
    sink = _sink(pn_app, airflow_api, {"sales.returns": 999_996})
    sink.run_once()
    bad = pn_app.publisher.send_mark_set_done("sales", "returns", "datestamp=20110409")
    sink.run_once()
    assert [d.event_id for d in sink.letters.redrive(None)] == [bad.event_id]
    with pytest.raises(Crash):
        _sink(pn_app, airflow_api, assets, crash=True).run_once()  # POSTed, then died
    restarted = _sink(pn_app, airflow_api, assets)
    assert restarted.run_once() == 0 and restarted.recovered == 1
    assert len(_airflow_events(bad.message_id)) == 1 and restarted.letters.find() == []
