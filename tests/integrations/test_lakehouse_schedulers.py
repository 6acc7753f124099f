"""A scheduler sees an Iceberg table's partitions: pyiceberg commits, ``serve``'s follower
announces them, the unchanged Airflow event trigger and Dagster sensor fire.

This venv (the schedulers') has no pyiceberg: the commits and ``serve`` run with the core
venv's Python (``PN_CORE_PYTHON``, default ``.venv/bin/python``), as a writer and a
``serve`` would in production: other processes sharing the store.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.lakehouse.helpers import logged
from tests.support.accounts import ROOT
from tests.support.ci import require
from tests.support.net import wait_until

CORE_PYTHON = Path(os.environ.get("PN_CORE_PYTHON", ROOT / ".venv" / "bin" / "python"))
#: A commit (a fresh interpreter importing pyiceberg), the follower's next poll and a
#: trigger's wake-up, on 2 shared cores.
EVENT_TIMEOUT = 60.0
KEYS = ["datestamp_day", "region"]


@dataclass
class Lake:
    app: Any
    store_url: str
    catalog_uri: str
    warehouse: Path

    def commit(self, day: str, region: str, set_done: str | None = None) -> int:
        """One pyiceberg append in the core venv; the new snapshot id."""
        out = subprocess.run(
            [str(CORE_PYTHON), "-m", "tests.lakehouse.iceberg_commit", self.catalog_uri,
             str(self.warehouse), day, region, *([set_done] if set_done else [])],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
            text=True, timeout=EVENT_TIMEOUT, check=False)
        assert out.returncode == 0, out.stderr[-2000:]
        return int(out.stdout.strip())

    def set_dones(self) -> list[str]:
        return [m.spec for m in logged(self.app, "sales.orders") if m.kind == "done"]


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[Lake]:
    """``sales.orders`` followed as Iceberg by a ``serve`` process (core venv) on a SQLite store."""
    require(CORE_PYTHON.exists(), f"the core venv's Python {CORE_PYTHON} is missing")
    from partition_notify.writers.lakehouse.schema import BEFORE_FIRST
    from partition_notify.writers.lakehouse.store import LakehouseTables

    from partition_notify.app import build_app

    store_url = f"sqlite:///{tmp_path}/pn.db"
    (tmp_path / "wh").mkdir()
    lake = Lake(build_app(store_url=store_url, transport_url="embedded://"), store_url,
                f"sqlite:///{tmp_path}/catalog.db", tmp_path / "wh")
    info = lake.app.publisher.register_table("sales", "orders", KEYS)
    LakehouseTables(lake.app.store).register(info, "iceberg", catalog="lake",
                                             start=BEFORE_FIRST)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PN_STORE_URL": store_url,
           "PN_TRANSPORT_URL": "embedded://", "PN_ICEBERG_POLL_INTERVAL_SECONDS": "0.2",
           "PN_ICEBERG_CATALOG__LAKE__TYPE": "sql",
           "PN_ICEBERG_CATALOG__LAKE__URI": lake.catalog_uri,
           "PN_ICEBERG_CATALOG__LAKE__WAREHOUSE": lake.warehouse.as_uri()}
    log = tmp_path / "serve.log"
    with open(log, "wb") as fh:
        serve = subprocess.Popen([str(CORE_PYTHON), "-m", "partition_notify.cli", "serve"],
                                 cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: "serving:" in log.read_text() or serve.poll() is not None,
                   EVENT_TIMEOUT, "serve to start")
        assert serve.poll() is None, log.read_text()[-2000:]
        yield lake
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(30)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait(30)
        lake.app.close()


def test_airflow_event_trigger_fires_for_an_iceberg_commits_set_done(
        airflow_home: object, pn_connection: Callable[..., str], lake: Lake) -> None:
    from partition_notify.integrations import shared
    from partition_notify.integrations.airflow.triggers import PartitionSetDoneEventTrigger

    conn_id = pn_connection("pn_lake", extra={"store_url": lake.store_url,
                                               "transport_url": "embedded://"})

    async def main() -> None:
        events = PartitionSetDoneEventTrigger(table="sales.orders", conn_id=conn_id,
                                              cursor="lake").run()
        first = asyncio.ensure_future(anext(events))
        await asyncio.to_thread(shared.armed.wait_for, 1, EVENT_TIMEOUT)
        await asyncio.to_thread(lake.commit, "2026-01-01", "us")  # add-partition only
        snap = await asyncio.to_thread(lake.commit, "2026-01-02", "us",
                                       "datestamp_day=2026-01-02")
        ev = (await asyncio.wait_for(first, EVENT_TIMEOUT)).payload
        assert ev["spec"] == "datestamp_day=2026-01-02", ev
        assert ev["partition_key"] == "2026-01-02" and ev["revision"] == snap
        assert [m.kind for m in logged(lake.app, "sales.orders")] == ["add", "add", "done"]
        await events.aclose()

    asyncio.run(main())


def test_dagster_sensor_reports_the_partitions_an_iceberg_commit_marked_done(
        dagster_available: None, lake: Lake) -> None:
    import dagster as dg
    from partition_notify.integrations.dagster.sensors import partition_set_done_sensor

    pdef = dg.MultiPartitionsDefinition({
        "datestamp_day": dg.DailyPartitionsDefinition(start_date="2026-01-01",
                                                      end_date="2026-02-01"),
        "region": dg.StaticPartitionsDefinition(["eu", "us"]),
    })
    orders = dg.AssetSpec("sales_orders", partitions_def=pdef)
    sensor = partition_set_done_sensor(orders.key, "sales.orders", partitions_def=pdef,
                                       settings=lake.app.settings)
    instance = dg.DagsterInstance.ephemeral()
    lake.commit("2026-01-01", "us", "datestamp_day=2026-01-01/region=us")
    lake.commit("2026-01-02", "eu")  # announced, not done
    lake.commit("2026-01-02", "us", "datestamp_day=2026-01-02")  # the day: both regions
    wait_until(lambda: len(lake.set_dones()) == 2, EVENT_TIMEOUT, "serve to follow the commits")

    result = sensor(dg.build_sensor_context(instance=instance))
    assert sorted(str(e.partition) for e in result.asset_events) == [
        "2026-01-01|us", "2026-01-02|eu", "2026-01-02|us"]
    again = sensor(dg.build_sensor_context(instance=instance, cursor=result.cursor))
    assert list(again.asset_events) == []  # the cursor moved past them
