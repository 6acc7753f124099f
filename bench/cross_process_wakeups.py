"""Embedded transport across processes: commit -> callback latency and idle CPU.

    PYTHONPATH=. python bench/cross_process_wakeups.py [--n 200] [--rounds 5]
        [--backend sqlite|postgresql|both] [--idle-seconds 5]

A subscriber in its own process follows a table; this process publishes one
set-done at a time (the next once the last arrived). Two modes, alternated
round by round on one database:

baseline  the previous behaviour: no wake-ups, the log is read every 20 ms
          (``cross_process_wakeups=False, poll_interval_seconds=0.02``)
wakeups   the default: PostgreSQL LISTEN/NOTIFY, SQLite inotify + data_version
          (fallback read every 1 s)

Per mode: the median over rounds of each round's p50 and p99, and the
subscriber process's CPU while idle (no commits) as % of one core.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
from typing import Any

import psutil
from core_common import backends, machine_note, scratch_store_url

TIMEOUT = 30.0
MODES = {"baseline": (False, 0.02), "wakeups": (True, 0.02)}


def subscriber(url: str, wakeups: bool, poll: float, ready: Any, out: Any, stop: Any) -> None:
    from partition_notify.app import build_app

    with build_app(store_url=url, transport_url="embedded://", poll_interval_seconds=poll,
                   cross_process_wakeups=wakeups) as app, app.subscriber() as sub:
        sub.subscribe(("bench", "wake"), lambda m: out.put((m.message_id, time.time())),
                      history=False)
        ready.set()
        stop.wait(3600)


def one_round(url: str, mode: str, n: int, idle: float) -> tuple[float, float, float]:
    from partition_notify.app import build_app

    wakeups, poll = MODES[mode]
    ctx = multiprocessing.get_context("spawn")
    ready, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=subscriber, args=(url, wakeups, poll, ready, out, stop))
    proc.start()
    try:
        if not ready.wait(120):
            raise SystemExit("subscriber process did not start")
        ps = psutil.Process(proc.pid)
        before = ps.cpu_times()
        time.sleep(idle)  # measuring idle CPU: nothing to wait for but time
        after = ps.cpu_times()
        cpu = max(0.0, (after.user + after.system - before.user - before.system) / idle * 100)
        latency: list[float] = []
        with build_app(store_url=url, transport_url="embedded://") as app:
            for i in range(n + 20):
                t0 = time.time()
                msg = app.publisher.send_mark_set_done("bench", "wake", f"ds={mode}{i}{t0}")
                got_id, t_recv = out.get(timeout=TIMEOUT)
                if got_id != msg.message_id:
                    raise SystemExit(f"expected {msg.message_id}, got {got_id}")
                if i >= 20:
                    latency.append(t_recv - t0)
        q = statistics.quantiles(latency, n=100)
        return q[49] * 1000, q[98] * 1000, cpu
    finally:
        stop.set()
        proc.join(30)
        if proc.is_alive():
            proc.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    ap.add_argument("--idle-seconds", type=float, default=5.0)
    args = ap.parse_args()
    from partition_notify.app import build_app

    for backend in backends(args.backend):
        print(f"\n== {backend}: {args.n} set-dones per round, {args.rounds} rounds per mode, "
              "alternating ==")
        results: dict[str, list[tuple[float, float, float]]] = {m: [] for m in MODES}
        with scratch_store_url(backend) as url:
            with build_app(store_url=url, transport_url="embedded://") as app:
                app.publisher.register_table("bench", "wake", ["ds"])
            for r in range(args.rounds):
                order = list(MODES) if r % 2 == 0 else list(reversed(MODES))
                for mode in order:
                    results[mode].append(one_round(url, mode, args.n, args.idle_seconds))
        for mode, rows in results.items():
            p50 = statistics.median(x[0] for x in rows)
            p99 = statistics.median(x[1] for x in rows)
            cpu = statistics.median(x[2] for x in rows)
            print(f"  {mode:9} commit->callback p50 {p50:7.2f} ms  p99 {p99:7.2f} ms  "
                  f"idle CPU {cpu:5.2f} % of a core")
        base, ours = results["baseline"], results["wakeups"]
        ratio = statistics.median(b[1] / o[1] for b, o in zip(base, ours, strict=True))
        print(f"  p99 baseline/wakeups, paired by round: {ratio:.1f}x")
        print(f"  {machine_note()}")


if __name__ == "__main__":
    main()
