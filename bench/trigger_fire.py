"""Set-done logged in another process -> each Airflow trigger of ours yields, side by side.

    PYTHONPATH=$PWD .venv-sched/bin/python bench/trigger_fire.py [--rounds 30]

The "logged -> fired" part of bench/e2e_airflow.py without Airflow's
processes (seconds per round instead of minutes): one asyncio loop runs, as
the triggerer does, one ``PartitionSetDoneEventTrigger`` (the AssetWatcher's,
armed once) and, each round, a new ``PartitionSetDoneTrigger`` (the deferred
sensor's) for that round's partition. A writer process (``serve``'s role)
marks the partition done on the same SQLite store (embedded transport,
synchronous=FULL), so the triggers hear of it through the cross-process
wake-up, as in the triggerer. Times on one wall clock, from the set-done's
``timestampMs`` and from the moment the writer's commit returned. The
watcher's cursor write (run before each hand-over) is
timed by wrapping it: its share of the watcher's figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core_common import machine_note
from e2e_procs import bench_dir

TABLE = "bench.orders"
EVENT_TIMEOUT = 30.0
ARM_TIMEOUT = 120.0

WRITER = """
import json, sys, time
from partition_notify.app import build_app
app = build_app()
print("ready", flush=True)
for line in sys.stdin:
    day = line.strip()
    msg = app.publisher.send_mark_set_done("bench", "orders", f"datestamp={day}")
    print(json.dumps({"committed": time.time(), "logged": msg.timestamp_ms / 1000}), flush=True)
"""


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--seed", type=int, default=None)
    args = p.parse_args()
    if args.rounds < 1:
        p.error(f"--rounds {args.rounds}: expected at least 1")
    return args


def timed_take() -> list[tuple[float, float]]:
    """Wrap the watcher's cursor write to record (start, end) of each call.

    ``CursorTaker.take`` on the log follower's thread; in trees before it,
    ``Cursors.take`` on a worker thread (so one bench file times both).
    """
    spans: list[tuple[float, float]] = []
    try:
        from partition_notify.store.cursor_take import CursorTaker as owner
    except ImportError:  # an older tree: the trigger called Cursors.take
        from partition_notify.store.cursors import Cursors as owner  # type: ignore[assignment]
    original = owner.take

    def take(self: Any, *args: Any) -> Any:
        t = time.time()
        try:
            return original(self, *args)
        finally:
            spans.append((t, time.time()))

    owner.take = take  # type: ignore[method-assign,assignment]
    return spans


async def fired_at(agen: Any) -> tuple[float, dict[str, Any]]:
    event = await asyncio.wait_for(anext(agen), EVENT_TIMEOUT)
    return time.time(), event.payload


async def rounds(args: argparse.Namespace, writer: subprocess.Popen[str],
                 takes: list[tuple[float, float]]) -> list[dict[str, float]]:
    from partition_notify.integrations import shared
    from partition_notify.integrations.airflow.triggers import (
        PartitionSetDoneEventTrigger,
        PartitionSetDoneTrigger,
    )

    assert writer.stdin is not None and writer.stdout is not None
    rng = random.Random(args.seed)
    watcher = PartitionSetDoneEventTrigger(table=TABLE, cursor="bench-trigger-fire").run()
    pending_watch = asyncio.ensure_future(fired_at(watcher))
    ok = await asyncio.to_thread(shared.armed.wait_for, 1, ARM_TIMEOUT)
    assert ok, "the event trigger did not arm"
    out = []
    for i in range(args.rounds):
        day = f"r{i:03d}"
        sensor = PartitionSetDoneTrigger(table=TABLE, spec=f"datestamp={day}",
                                         deadline=time.time() + 600).run()
        pending_sensor = asyncio.ensure_future(fired_at(sensor))
        ok = await asyncio.to_thread(shared.armed.wait_for, 2, ARM_TIMEOUT)
        assert ok, "the sensor trigger did not arm"
        # A random phase: neither trigger's wait starts in step with the write.
        await asyncio.sleep(rng.uniform(0.05, 0.25))
        writer.stdin.write(day + "\n")
        writer.stdin.flush()
        wrote = json.loads(await asyncio.to_thread(writer.stdout.readline))
        committed, logged = wrote["committed"], wrote["logged"]
        (t_sensor, p_sensor), (t_watch, p_watch) = await asyncio.gather(
            pending_sensor, pending_watch)
        assert p_sensor["message"]["spec"] == p_watch["spec"] == f"datestamp={day}"
        await sensor.aclose()
        pending_watch = asyncio.ensure_future(fired_at(watcher))
        take = next(((a, b) for a, b in reversed(takes) if a >= committed - 1.0), (0.0, 0.0))
        out.append({"logged->committed": committed - logged,
                    "logged->sensor": t_sensor - logged, "logged->watcher": t_watch - logged,
                    "committed->sensor": t_sensor - committed,
                    "committed->watcher": t_watch - committed,
                    "watcher take": take[1] - take[0]})
    pending_watch.cancel()
    await watcher.aclose()
    return out


def report(rows: list[dict[str, float]]) -> None:
    names = list(rows[0])
    print("\n" + "".join(f"{n:>20}" for n in names))
    for r in rows:
        print("".join(f"{r[n] * 1000:19.1f} " for n in names))
    for label, f in (("median", statistics.median), ("max", max)):
        print("".join(f"{f(r[n] for r in rows) * 1000:19.1f} " for n in names) + f" {label}")


def main() -> int:
    args = parse_args()
    with bench_dir("pn-bench-trigger-fire-", keep=False) as tmp:
        return run(args, str(tmp))


def run(args: argparse.Namespace, tmp: str) -> int:
    os.environ.setdefault("AIRFLOW_HOME", tmp)
    os.environ["PN_STORE_URL"] = f"sqlite:///{tmp}/store.db"
    os.environ["PN_TRANSPORT_URL"] = "embedded://"
    from partition_notify.integrations import shared

    from partition_notify.app import build_app

    with build_app() as app:
        app.publisher.register_table("bench", "orders", ["datestamp"])
    print(f"# bench/trigger_fire.py: {args.rounds} rounds, SQLite store {tmp}/store.db")
    print(machine_note(), flush=True)
    takes = timed_take()
    writer = subprocess.Popen([sys.executable, "-c", WRITER], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=os.environ)
    try:
        assert writer.stdout is not None
        if writer.stdout.readline().strip() != "ready":
            raise RuntimeError("the writer process did not start")
        rows = asyncio.run(rounds(args, writer, takes))
    finally:
        writer.kill()
        writer.wait(10)
        shared.close_all()
    report(rows)
    print(machine_note())
    return 0


if __name__ == "__main__":
    sys.exit(main())
