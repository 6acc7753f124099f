"""1,000 deferred Airflow sensors in one triggerer-like process vs poke-mode sensors.

    eval "$(bash scripts/services.sh env)"
    PYTHONPATH=. .venv-sched/bin/python bench/scheduler_triggers.py [--n 1000]
        [--transport stomp://127.0.0.1:61613 | embedded://] [--poke-interval 60]

Deferred (measured): N ``PartitionSetDoneTrigger.run()`` coroutines on one
asyncio loop, as the triggerer runs them, each waiting for its own partition
set. Reported: time to arm all N, broker TCP connections of the process, RSS
before/after arming, and set-done -> trigger-event latency (from just before
``send_mark_set_done`` to the trigger yielding, one set-done at a time),
plus the worst event-loop stall seen by a 10 ms ticker.

Poke mode (query cost measured, latency derived): what users run today is a
sensor that re-runs a query every ``poke_interval`` (Airflow's default 60 s).
We time that query two ways: our own ``PartitionSetDoneSensor.poke()`` (one
indexed look-up on a pooled engine) and a SqlSensor-style poke (a fresh
database connection per poke, as a hook does). Its latency is not measured
(that would take hours): a set-done at a uniformly random moment is seen at
the next poke, so latency ~ U(0, interval) + query: p50 = interval/2,
p99 = 0.99 x interval. N poke sensors also cost N x (query / interval) of
database time and, in poke mode, N worker slots held for the whole wait.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core_common import machine_note, pct, summary_ms

from partition_notify.core.redact import redact_url

DEFAULT_POKE_INTERVAL = 60.0  # BaseSensorOperator's poke_interval default
ARM_TIMEOUT = 600.0


def rss_mb() -> float:
    import psutil

    return float(psutil.Process().memory_info().rss) / 2**20


def broker_connections(port: int | None) -> int:
    import psutil

    if port is None:
        return 0
    conns = psutil.Process().net_connections(kind="tcp")
    return sum(1 for c in conns if c.raddr and c.raddr.port == port and c.status == "ESTABLISHED")


def spec_for(i: int) -> str:
    return f"datestamp=b{i:06d}"


async def deferred(n: int, publisher_app: Any, port: int | None) -> dict[str, Any]:
    from partition_notify.integrations import shared
    from partition_notify.integrations.airflow.triggers import PartitionSetDoneTrigger

    from tests.integrations.test_airflow_event_trigger import Ticker

    before_conns = broker_connections(port)
    rss0 = rss_mb()
    deadline = time.time() + 3600
    # Built before the ticker starts: the triggerer also builds them off the
    # loop's critical path, and building 1,000 objects is not the trigger's cost.
    triggers = [PartitionSetDoneTrigger(table="bench.orders", spec=spec_for(i),
                                        deadline=deadline) for i in range(n)]
    ticker = Ticker()
    ticker.start()
    t0 = time.perf_counter()
    runs = [asyncio.ensure_future(anext(t.run())) for t in triggers]
    armed = await asyncio.to_thread(shared.armed.wait_for, n, ARM_TIMEOUT)
    arm_s = time.perf_counter() - t0
    assert armed, "not every trigger subscribed in time"
    rss1 = rss_mb()
    conns = broker_connections(port) - before_conns
    arm_stall, ticker.worst = ticker.worst, 0.0
    latencies: list[float] = []
    publish: list[float] = []
    for i in range(n):
        t_start = time.perf_counter()
        await asyncio.to_thread(publisher_app.publisher.send_mark_set_done, "bench", "orders",
                                spec_for(i))
        t_pub = time.perf_counter()
        event = await asyncio.wait_for(runs[i], 60)
        latencies.append(time.perf_counter() - t_start)
        publish.append(t_pub - t_start)
        assert event.payload["status"] == "done", event.payload
    ticker.stop()
    return {"arm_s": arm_s, "rss0": rss0, "rss1": rss1, "conns": conns,
            "latency": latencies, "publish": publish, "stall": ticker.worst,
            "arm_stall": arm_stall}


def poke_costs(store_url: str, rounds: int) -> tuple[list[float], list[float]]:
    from partition_notify.integrations.airflow.sensors import PartitionSetDoneSensor
    from sqlalchemy import create_engine, text

    sensor = PartitionSetDoneSensor(task_id="poke", table="bench.orders", spec=spec_for(0),
                                    deferrable=False)
    ours: list[float] = []
    for _ in range(rounds):
        t = time.perf_counter()
        assert sensor.poke({})
        ours.append(time.perf_counter() - t)
    fresh: list[float] = []
    sql = text("SELECT 1 FROM pn_set_done s JOIN pn_tables t ON t.id = s.table_id "
               "WHERE t.db = 'bench' AND t.name = 'orders' AND s.spec = :spec")
    for _ in range(rounds):
        t = time.perf_counter()
        engine = create_engine(store_url)  # a hook makes its connection per poke
        with engine.connect() as conn:
            assert conn.execute(sql, {"spec": spec_for(0)}).first() is not None
        engine.dispose()
        fresh.append(time.perf_counter() - t)
    return ours, fresh


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--transport", default=os.environ.get("PN_TEST_STOMP_URL", "embedded://"))
    ap.add_argument("--poke-interval", type=float, default=DEFAULT_POKE_INTERVAL)
    ap.add_argument("--poke-rounds", type=int, default=200)
    args = ap.parse_args()

    from urllib.parse import urlsplit

    # Airflow writes under its home on import; keep the bench's out of ~/airflow.
    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="pn-bench-airflow-"))

    from partition_notify.app import build_app

    store_url = f"sqlite:///{tempfile.mkdtemp()}/bench.db"
    os.environ["PN_STORE_URL"] = store_url
    os.environ["PN_TRANSPORT_URL"] = args.transport
    stomp = args.transport.startswith("stomp")
    if stomp:
        os.environ.setdefault("PN_BROKER_USERNAME", os.environ.get("PN_TEST_BROKER_USERNAME", ""))
        os.environ.setdefault("PN_BROKER_PASSWORD", os.environ.get("PN_TEST_BROKER_PASSWORD", ""))
    port = urlsplit(args.transport).port if stomp else None

    with build_app() as pub_app:
        pub_app.publisher.register_table("bench", "orders", ["datestamp"])
        res = asyncio.run(deferred(args.n, pub_app, port))
        ours, fresh = poke_costs(store_url, args.poke_rounds)

    p = args.poke_interval
    print(f"# scheduler triggers: {args.n:,} deferred sensors, transport "
          f"{redact_url(args.transport)}, SQLite store")
    print(machine_note())
    print(f"deferred  arm all {args.n:,}: {res['arm_s']:.2f} s; broker TCP connections opened "
          f"by the triggers: {res['conns']}; RSS {res['rss0']:.0f} -> {res['rss1']:.0f} MB "
          f"(+{(res['rss1'] - res['rss0']) * 1024 / args.n:.1f} kB per trigger)")
    print(f"deferred  set-done -> trigger event (measured): {summary_ms(res['latency'])}")
    print(f"          of which the publish call: {summary_ms(res['publish'])}")
    print(f"          worst event-loop stall: {res['arm_stall'] * 1000:.0f} ms while arming, "
          f"{res['stall'] * 1000:.0f} ms while delivering (GIL + OS scheduling included)")
    q50f = pct(fresh, 50)
    print(f"poke      query per poke (measured): pooled {summary_ms(ours)}")
    print(f"          fresh connection per poke (SqlSensor-style): {summary_ms(fresh)}")
    print(f"poke      latency at poke_interval={p:g} s (derived, U(0, interval) + query): "
          f"p50 {p / 2 + q50f:.1f} s, p99 {0.99 * p + q50f:.1f} s")
    print(f"poke      {args.n:,} sensors: {args.n / p:.1f} queries/s, "
          f"{args.n * q50f / p * 100:.2f}% of one DB core (fresh connections), "
          f"{args.n} worker slots held while waiting (poke mode)")
    lat50 = pct(res["latency"], 50)
    print(f"ratio     p50 latency poke/deferred: {(p / 2 + q50f) / lat50:,.0f}x "
          f"(deferred p50 {lat50 * 1000:.1f} ms)")


if __name__ == "__main__":
    main()
