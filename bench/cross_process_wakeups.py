"""Embedded transport across processes: commit -> callback latency and idle CPU.

    PYTHONPATH=. python bench/cross_process_wakeups.py [--n 200] [--rounds 5]
        [--backend sqlite|postgresql|both] [--idle-seconds 5] [--reader embedded|sse]

A subscriber in its own process follows a table; this process publishes one
set-done at a time (the next once the last arrived). With ``--reader sse`` the
other process is a ``serve`` with the HTTP API, and the reader an SSE client
in this process (``GET /v1/tables/bench.wake/stream``, on its own thread): the
figure is then commit -> SSE event through serve's event hub (http/hub.py),
and the idle CPU is serve's, its jobs (relay, purge, ...) included. Two modes,
alternated round by round on one database:

baseline  the previous behaviour: no wake-ups, the log is read every 20 ms
          (``cross_process_wakeups=False, poll_interval_seconds=0.02``; for
          serve PN_CROSS_PROCESS_WAKEUPS=false, PN_POLL_INTERVAL_SECONDS=0.02)
wakeups   the default: PostgreSQL LISTEN/NOTIFY, SQLite inotify + data_version
          (fallback read every 1 s)

Two figures per message, on one clock (``time.time()``, system-wide on Linux):

commit -> callback   from the commit's completion in this process (the event
                     log's after-commit listener) to the callback in the other:
                     issue 20's figure
call -> callback     from the ``send_mark_set_done`` call: the publish itself
                     (SQLite FULL fsync, PostgreSQL round trips) included

Per mode: the median over rounds of each round's p50 and p99, and the
subscriber process's CPU while idle (no commits) as % of one core.
bench/cross_process_trace.py breaks commit -> callback into its stages.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import queue
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
from core_common import backends, machine_note, scratch_store_url
from http_clients import start_serve

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


Round = dict[str, float]
#: Blocks until the reader got the message just published; returns when (time.time()).
Arrival = Callable[[Any], float]


def one_round(url: str, mode: str, n: int, idle: float, reader: str) -> Round:
    with (sse_reader if reader == "sse" else embedded_reader)(url, mode) as (pid, arrival):
        ps = psutil.Process(pid)
        before = ps.cpu_times()
        time.sleep(idle)  # measuring idle CPU: nothing to wait for but time
        after = ps.cpu_times()
        cpu = max(0.0, (after.user + after.system - before.user - before.system) / idle * 100)
        from_commit, from_call = publish(url, mode, n, arrival)
    c, p = statistics.quantiles(from_commit, n=100), statistics.quantiles(from_call, n=100)
    return {"commit_p50": c[49] * 1000, "commit_p99": c[98] * 1000,
            "call_p50": p[49] * 1000, "call_p99": p[98] * 1000, "idle_cpu": cpu}


@contextlib.contextmanager
def embedded_reader(url: str, mode: str) -> Iterator[tuple[int, Arrival]]:
    """A subscriber process; (its pid, arrival by message id)."""
    wakeups, poll = MODES[mode]
    ctx = multiprocessing.get_context("spawn")
    ready, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=subscriber, args=(url, wakeups, poll, ready, out, stop))
    proc.start()

    def arrival(msg: Any) -> float:
        got_id, t_recv = out.get(timeout=TIMEOUT)
        if got_id != msg.message_id:
            raise SystemExit(f"expected {msg.message_id}, got {got_id}")
        return float(t_recv)

    try:
        if not ready.wait(120):
            raise SystemExit("subscriber process did not start")
        assert proc.pid is not None
        yield proc.pid, arrival
    finally:
        stop.set()
        proc.join(30)
        if proc.is_alive():
            proc.kill()


@contextlib.contextmanager
def sse_reader(url: str, mode: str) -> Iterator[tuple[int, Arrival]]:
    """A serve process and an SSE client of it on a thread; (serve's pid, arrival by event id)."""
    wakeups, poll = MODES[mode]
    port = 19000 + os.getpid() % 1000
    log = Path(tempfile.mkdtemp(prefix="pn-bench-")) / "serve.log"
    proc = start_serve(url, port, log, PN_HTTP_ANONYMOUS_READ="true",
                       PN_CROSS_PROCESS_WAKEUPS=str(wakeups).lower(),
                       PN_POLL_INTERVAL_SECONDS=str(poll))
    got: queue.Queue[tuple[int, float]] = queue.Queue()
    opened = threading.Event()
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=httpx.Timeout(None))
    from partition_notify.app import build_app

    with build_app(store_url=url, transport_url="embedded://") as app:
        after = app.store.log.max_event_id()  # replay from here: nothing published is missed

    def follow() -> None:
        with contextlib.suppress(httpx.HTTPError), client.stream(
                "GET", f"/v1/tables/bench.wake/stream?last_event_id={after}") as r:
            opened.set()
            for line in r.iter_lines():
                if line.startswith("id:"):
                    got.put((int(line[3:]), time.time()))

    def arrival(msg: Any) -> float:
        event_id, t_recv = got.get(timeout=TIMEOUT)
        if event_id != msg.event_id:
            raise SystemExit(f"expected event {msg.event_id}, got {event_id}")
        return t_recv

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    try:
        if not opened.wait(60):
            raise SystemExit(f"SSE stream did not open: {log.read_text()[-2000:]}")
        yield proc.pid, arrival
    finally:
        proc.terminate()  # ends the stream, and so the reader thread
        proc.wait(60)
        thread.join(30)
        client.close()


def publish(url: str, mode: str, n: int, arrival: Arrival) -> tuple[list[float], list[float]]:
    """One set-done at a time, the next once the last arrived: (commit->, call->) arrival."""
    from partition_notify.app import build_app

    from_commit: list[float] = []
    from_call: list[float] = []
    with build_app(store_url=url, transport_url="embedded://") as app:
        commits: list[float] = []
        app.store.log.add_listener(lambda: commits.append(time.time()))
        for i in range(n + 20):
            t_call = time.time()
            msg = app.publisher.send_mark_set_done("bench", "wake", f"ds={mode}{i}{t_call}")
            t_recv = arrival(msg)
            if i >= 20:
                from_commit.append(t_recv - commits[-1])
                from_call.append(t_recv - t_call)
            del commits[:-1]  # bounded: only the last commit's time is read
    return from_commit, from_call


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    ap.add_argument("--idle-seconds", type=float, default=5.0)
    ap.add_argument("--reader", choices=["embedded", "sse"], default="embedded",
                    help="the other process: an embedded subscriber, or serve + an SSE client")
    args = ap.parse_args()
    from partition_notify.app import build_app

    for backend in backends(args.backend):
        print(f"\n== {backend}, reader {args.reader}: {args.n} set-dones per round, "
              f"{args.rounds} rounds per mode, alternating ==")
        results: dict[str, list[Round]] = {m: [] for m in MODES}
        print(f"  at start: {machine_note()}")
        with scratch_store_url(backend) as url:
            with build_app(store_url=url, transport_url="embedded://") as app:
                app.publisher.register_table("bench", "wake", ["ds"])
            for r in range(args.rounds):
                order = list(MODES) if r % 2 == 0 else list(reversed(MODES))
                for mode in order:
                    results[mode].append(one_round(url, mode, args.n, args.idle_seconds,
                                                   args.reader))
        report(results)
        print(f"  at end: {machine_note()}")


def report(results: dict[str, list[Round]]) -> None:
    print(f"  {'mode':9} {'commit->callback p50 / p99':>27} {'call->callback p50 / p99':>26}"
          f" {'idle CPU':>9}")
    for mode, rows in results.items():
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        print(f"  {mode:9} {med['commit_p50']:12.2f} / {med['commit_p99']:7.2f} ms"
              f" {med['call_p50']:11.2f} / {med['call_p99']:7.2f} ms"
              f" {med['idle_cpu']:6.2f} %")
    base, ours = results["baseline"], results["wakeups"]
    for key in ("commit_p99", "call_p99"):
        ratio = statistics.median(b[key] / o[key] for b, o in zip(base, ours, strict=True))
        print(f"  {key.replace('_', ' ')} baseline/wakeups, paired by round: {ratio:.1f}x")
    print("  per round (commit->callback p99, ms): " + "; ".join(
        f"{m} " + " ".join(f"{r['commit_p99']:.1f}" for r in rows) for m, rows in results.items()))


if __name__ == "__main__":
    main()
