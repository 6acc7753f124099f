"""Where the embedded transport's cross-process latency goes, stage by stage.

    PYTHONPATH=. python bench/cross_process_trace.py [--backend sqlite|postgresql|both]
        [--n 200] [--poll 1.0]

One subscriber process follows a table with wake-ups on (fallback read every
``max(--poll, 1 s)``); this process publishes one set-done at a time. Every
stage is stamped with ``time.time()`` (one clock for both processes on Linux):

publisher   call     ``send_mark_set_done`` called
            commit   the log's after-commit listener ran (the commit completed)
            return   the call returned
subscriber  wake     the waker called ``on_commit`` (the database's signal arrived,
                     and for SQLite the settle saw ``data_version`` move)
            inotify  (SQLite) the WAL write's inotify event was read, settle begins
            read0/1  the consumer's log read that returned the event began / ended
            empties  log reads that returned nothing between wake and that read
            disp     the dispatcher took the message off its queue
            cb       the callback ran

The subscriber's stamps come from wrapping the library's methods in the
subscriber process (measurement only; bench/cross_process_wakeups.py gives the
un-instrumented figures). Printed: p50 / p90 / p99 of each stage's interval,
and the messages whose commit -> callback was over 5 ms, stage by stage.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import statistics
import time
from collections.abc import Callable
from typing import Any

from core_common import backends, machine_note, scratch_store_url

TIMEOUT = 30.0
WARMUP = 20
STAGES = ("call", "commit", "return", "inotify", "wake", "read0", "read1", "disp", "cb")
INTERVALS = (("call", "commit"), ("commit", "wake"), ("inotify", "wake"), ("commit", "inotify"),
             ("wake", "read0"), ("read0", "read1"), ("read1", "disp"), ("disp", "cb"),
             ("commit", "cb"), ("call", "cb"), ("commit", "return"))


def _stamp_on(cls: Any, name: str, stamps: dict[str, Any], key: str,
              when: Callable[[Any], bool] = lambda _: True, at_end: bool = False) -> None:
    """Wrap ``cls.name`` to record the first call (since the last callback) under ``key``."""
    original = getattr(cls, name)

    @functools.wraps(original)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        t = time.time()
        result = original(*args, **kwargs)
        if when(result) and key not in stamps:
            stamps[key] = time.time() if at_end else t
        return result

    setattr(cls, name, wrapped)


def _instrument(stamps: dict[str, Any]) -> None:
    from partition_notify.store.event_log import EventLog
    from partition_notify.store.wakeups import InotifyWaker
    from partition_notify.subscriber.subscriber import Subscriber
    from partition_notify.transports.embedded import CommitSignal

    _stamp_on(CommitSignal, "committed", stamps, "wake")
    # The inotify parser: ``_events`` (pending, touched) since the wake file, ``_relevant`` before.
    parser = "_events" if hasattr(InotifyWaker, "_events") else "_relevant"
    _stamp_on(InotifyWaker, parser, stamps, "inotify",
              when=lambda r: any(r) if isinstance(r, tuple) else bool(r))
    _stamp_on(Subscriber, "_decode", stamps, "disp")
    original = EventLog.events_after

    @functools.wraps(original)
    def events_after(self: Any, *args: Any, **kwargs: Any) -> Any:
        t0 = time.time()
        batch = original(self, *args, **kwargs)
        if batch and "read0" not in stamps:
            stamps["read0"], stamps["read1"] = t0, time.time()
        elif not batch and "wake" in stamps:
            stamps["empties"] = stamps.get("empties", 0) + 1
        return batch

    EventLog.events_after = events_after  # type: ignore[method-assign]


def subscriber(url: str, poll: float, ready: Any, out: Any, stop: Any) -> None:
    stamps: dict[str, Any] = {}
    _instrument(stamps)
    from partition_notify.app import build_app

    def on_message(m: Any) -> None:
        stamps["cb"] = time.time()
        out.put((m.message_id, dict(stamps)))
        stamps.clear()

    with build_app(store_url=url, transport_url="embedded://", poll_interval_seconds=poll,
                   cross_process_wakeups=True) as app, app.subscriber() as sub:
        sub.subscribe(("bench", "trace"), on_message, history=False)
        ready.set()
        stop.wait(3600)


def publish(url: str, n: int, out: Any) -> list[dict[str, float]]:
    from partition_notify.app import build_app

    rows: list[dict[str, float]] = []
    with build_app(store_url=url, transport_url="embedded://") as app:
        commits: list[float] = []
        app.store.log.add_listener(lambda: commits.append(time.time()))
        for i in range(n + WARMUP):
            t_call = time.time()
            msg = app.publisher.send_mark_set_done("bench", "trace", f"ds={i}_{t_call}")
            t_return = time.time()
            got_id, stamps = out.get(timeout=TIMEOUT)
            if got_id != msg.message_id:
                raise SystemExit(f"expected {msg.message_id}, got {got_id}")
            if i >= WARMUP:
                rows.append({"call": t_call, "commit": commits[-1], "return": t_return,
                             **stamps})
    return rows


def run(url: str, n: int, poll: float) -> list[dict[str, float]]:
    ctx = multiprocessing.get_context("spawn")
    ready, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=subscriber, args=(url, poll, ready, out, stop))
    proc.start()
    try:
        if not ready.wait(120):
            raise SystemExit("subscriber process did not start")
        return publish(url, n, out)
    finally:
        stop.set()
        proc.join(30)
        if proc.is_alive():
            proc.kill()


def report(rows: list[dict[str, float]]) -> None:
    for a, b in INTERVALS:
        xs = [(r[b] - r[a]) * 1000 for r in rows if a in r and b in r]
        if len(xs) < 2:
            continue
        q = statistics.quantiles(xs, n=100)
        print(f"  {a:>7} -> {b:<7} n={len(xs):4}  p50 {q[49]:6.2f}  p90 {q[89]:6.2f}  "
              f"p99 {q[98]:6.2f}  max {max(xs):6.2f} ms")
    empties = [r.get("empties", 0) for r in rows]
    print(f"  empty log reads between wake and the read that found the event: "
          f"{sum(empties)} over {len(rows)} messages")
    slow = [r for r in rows if (r["cb"] - r["commit"]) * 1000 > 5.0]
    print(f"  {len(slow)} messages over 5 ms commit -> callback; stages (ms after commit):")
    for r in slow[:12]:
        cols = " ".join(f"{s}={(r[s] - r['commit']) * 1000:6.2f}" for s in STAGES if s in r)
        print(f"    {cols} empties={r.get('empties', 0)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--poll", type=float, default=0.02)
    ap.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    args = ap.parse_args()
    from partition_notify.app import build_app

    for backend in backends(args.backend):
        print(f"\n== {backend}: {args.n} set-dones, one at a time, stages (ms) ==")
        with scratch_store_url(backend) as url:
            with build_app(store_url=url, transport_url="embedded://") as app:
                app.publisher.register_table("bench", "trace", ["ds"])
            report(run(url, args.n, args.poll))
        print(f"  {machine_note()}")


if __name__ == "__main__":
    main()
