"""Measurements shared by the broker benchmarks (brokers_stomp.py, brokers_kafka.py)."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable

from partition_notify.subscriber import Subscriber

from partition_notify.app import App
from partition_notify.contract import AnyMessage, Envelope, to_envelope


def rate(n: int, fn: Callable[[], None]) -> float:
    started = time.perf_counter()
    fn()
    return n / (time.perf_counter() - started)


def sample_envelopes(app: App, table: str, n: int) -> list[Envelope]:
    """Real set-done envelopes (same size and headers as production ones)."""
    msgs = [app.publisher.send_mark_set_done("bench", table, f"datestamp={i}")
            for i in range(min(n, 50))]
    envs = [to_envelope(m) for m in msgs]
    return [envs[i % len(envs)] for i in range(n)]


def commit_to_callback_latency(app: App, follower: App, n: int) -> dict[str, float]:
    """Publish ``n`` set-done one at a time; time commit -> ``follower``'s callback.

    ``follower`` has its own connection, as a scheduler would; it is closed here.
    """
    app.publisher.register_table("bench", "latency", ["datestamp"])
    lat: list[float] = []
    got = threading.Semaphore(0)

    def on_message(msg: AnyMessage) -> None:
        assert msg.timestamp_ms is not None
        lat.append(time.time() * 1000 - msg.timestamp_ms)
        got.release()

    sub = Subscriber(follower.store, follower.transport, timeout_seconds=30)
    try:
        sub.subscribe(("bench", "latency"), on_message, history=False)
        for i in range(n):
            app.publisher.send_mark_set_done("bench", "latency", f"datestamp={i}")
            if not got.acquire(timeout=10):
                raise SystemExit(f"latency: message {i} not delivered in 10 s")
    finally:
        sub.close()
        follower.close()
    lat.sort()
    return {"p50_ms": statistics.median(lat), "p99_ms": lat[max(int(len(lat) * 0.99) - 1, 0)],
            "max_ms": lat[-1], "n": len(lat)}
