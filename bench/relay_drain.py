"""Relay drain after a broker outage, next to raw pipelined sends of the same bodies.

    PYTHONPATH=. python bench/relay_drain.py --url stomp://127.0.0.1:61613 [--events 100000]
    PYTHONPATH=. python bench/relay_drain.py --url kafka://127.0.0.1:9092 [--events 100000]
        [--store-url postgresql+psycopg://postgres@127.0.0.1:5432/bench] [--rounds 3]
        [--batch-size N] [--json out.json]

A backlog of ``--events`` add-partition events (``--tables`` tables) is logged
and never published, as after a broker outage. Each round then times

  relay   ``Relay.run_once`` draining the whole backlog: lease a batch, publish
          it, mark it published, until nothing is pending (the store work
          included), and
  raw     the same bodies, headers and topics sent by hand-written pipelined
          clients: stomp.py SENDs with receipts then every RECEIPT awaited, or
          kafka-python ``send`` of everything then every future awaited.

Between rounds the backlog is marked unpublished again (one UPDATE), so every
round drains the same events. Rounds alternate the order; medians are
reported (rates, and this process's CPU per event: on a shared machine the
steadier figure), and the ratio relay/raw [goal >= 0.5x].
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from partition_notify.publisher.relay import Relay, _envelope  # noqa: E402
from partition_notify.store.schema import EventRow  # noqa: E402
from sqlalchemy import update  # noqa: E402

from partition_notify.app import App, build_app  # noqa: E402
from partition_notify.contract import Envelope  # noqa: E402

LOG_CHUNK = 2000


def log_backlog(app: App, events: int, tables: int) -> None:
    """``events`` add-partitions over ``tables`` tables, logged, not published."""
    infos = [app.publisher.register_table("drain", f"t{i}", ["n"]) for i in range(tables)]
    for start in range(0, events, LOG_CHUNK):
        drafts = [app.publisher._partition_draft(infos[i % tables], {"n": str(i)},
                                                 f"/warehouse/drain/t{i % tables}/n={i}", None)
                  for i in range(start, min(start + LOG_CHUNK, events))]
        app.store.log.append(drafts)  # published=False: the broker was down


def backlog_envelopes(app: App) -> list[Envelope]:
    out: list[Envelope] = []
    last = 0
    while batch := app.store.log.events_after(last, 10_000):
        out += [_envelope(e) for e in batch]
        last = batch[-1].event_id
    return out


def reset(app: App) -> None:
    with app.store.engine.begin() as conn:
        conn.execute(update(EventRow).values(published_at=None, lease_owner=None,
                                             lease_until=None, attempts=0))


def drain(app: App, batch_size: int) -> Callable[[], None]:
    def run() -> None:
        relay = Relay(app.store, app.transport, batch_size=batch_size, publish_timeout=120.0,
                      writer_grace_seconds=0.0)
        relay.run_once()
        pending, _ = app.store.log.relay_lag()
        if pending:
            raise SystemExit(f"relay: {pending} events still pending after run_once "
                             f"({relay.stats.failed_batches} failed batches)")
    return run


# ----------------------------------------------------------------------------- raw clients
def raw_stomp(args: argparse.Namespace, envs: list[Envelope]) -> tuple[Callable[[], None], Any]:
    import threading
    import uuid

    import stomp
    from partition_notify.transports.stomp import parse_url

    ep = parse_url(args.url)
    cond = threading.Condition()
    done: set[str] = set()

    class Listener(stomp.ConnectionListener):  # type: ignore[misc]
        def on_receipt(self, frame: Any) -> None:
            with cond:
                done.add(frame.headers["receipt-id"])
                cond.notify_all()

        def on_error(self, frame: Any) -> None:
            print(f"raw stomp.py: broker ERROR: {frame.headers.get('message')}", file=sys.stderr)

    conn = stomp.Connection12(list(ep.hosts), vhost="/", auto_content_length=False)
    conn.set_listener("bench", Listener())
    conn.connect(args.user, args.password, wait=True)

    def run() -> None:
        rids = [uuid.uuid4().hex for _ in envs]
        for rid, e in zip(rids, envs, strict=True):
            conn.send(f"/topic/{e.topic}", e.body,
                      headers={**e.headers, "persistent": "true", "receipt": rid})
        with cond:
            if not cond.wait_for(lambda: done.issuperset(rids), 600):
                raise SystemExit("raw stomp.py: receipts missing after 600 s")
            done.difference_update(rids)

    return run, conn.disconnect


def raw_kafka(args: argparse.Namespace, envs: list[Envelope]) -> tuple[Callable[[], None], Any]:
    from kafka import KafkaProducer
    from partition_notify.transports.kafka.config import parse_url

    ep = parse_url(args.url)
    producer = KafkaProducer(bootstrap_servers=list(ep.bootstrap), acks="all", linger_ms=0,
                             api_version=ep.api_version)

    def run() -> None:
        futures = [producer.send(e.topic, value=e.body, key=e.key.encode(),
                                 headers=[(k, v.encode()) for k, v in e.headers.items()])
                   for e in envs]
        for f in futures:
            f.get(timeout=600)

    return run, lambda: producer.close(timeout=10)


# ----------------------------------------------------------------------------- main
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True, help="stomp://... or kafka://...")
    p.add_argument("--store-url", help="default: SQLite in a temporary directory")
    p.add_argument("--events", type=int, default=100_000)
    p.add_argument("--tables", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch-size", type=int, help="relay batch (default: PN_RELAY_BATCH_SIZE)")
    p.add_argument("--user", default=os.environ.get("PN_TEST_BROKER_USERNAME", "pn_service"))
    p.add_argument("--password",
                   default=os.environ.get("PN_TEST_BROKER_PASSWORD", "pn-service-secret"))
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args()
    stomp_url = args.url.startswith("stomp")
    tmp = tempfile.TemporaryDirectory()
    store_url = args.store_url or f"sqlite:///{tmp.name}/drain.db"
    extra: dict[str, Any] = {}
    if stomp_url:
        from pydantic import SecretStr

        extra = {"broker_username": args.user, "broker_password": SecretStr(args.password)}
    app = build_app(store_url=store_url, transport_url=args.url, connect_timeout_seconds=30.0,
                    publish_timeout_seconds=120.0, **extra)
    batch_size = args.batch_size or app.settings.relay_batch_size
    started = time.perf_counter()
    log_backlog(app, args.events, args.tables)
    logged_s = time.perf_counter() - started
    envs = backlog_envelopes(app)
    raw, close_raw = (raw_stomp if stomp_url else raw_kafka)(args, envs)
    # Warm-up: topics/destinations exist and connections are open before timing.
    raw()
    runs = {"relay": drain(app, batch_size), "raw": raw}
    seconds: dict[str, list[float]] = {k: [] for k in runs}
    cpu: dict[str, list[float]] = {k: [] for k in runs}
    try:
        for r in range(args.rounds):
            order = list(runs.items()) if r % 2 == 0 else list(reversed(runs.items()))
            for name, fn in order:
                reset(app)
                t0, c0 = time.perf_counter(), time.process_time()
                fn()
                seconds[name].append(time.perf_counter() - t0)
                cpu[name].append((time.process_time() - c0) / args.events * 1e6)
    finally:
        close_raw()
        app.close()
    med = {k: statistics.median(v) for k, v in seconds.items()}
    figures = {
        "broker": args.url.split("://")[0], "store": store_url.split(":")[0],
        "events": args.events, "tables": args.tables, "relay_batch_size": batch_size,
        "rounds": args.rounds, "logged_in_s": round(logged_s, 2),
        "relay_s": [round(x, 2) for x in seconds["relay"]],
        "raw_s": [round(x, 2) for x in seconds["raw"]],
        "relay_per_s": round(args.events / med["relay"]),
        "raw_per_s": round(args.events / med["raw"]),
        "ratio": round(med["raw"] / med["relay"], 3),
        "relay_cpu_us": round(statistics.median(cpu["relay"]), 1),
        "raw_cpu_us": round(statistics.median(cpu["raw"]), 1),
    }
    print(f"relay drain of {args.events:,} events ({args.tables} tables, batch {batch_size}, "
          f"{figures['store']} store) on {figures['broker']}, median of {args.rounds}:")
    print(f"  relay  {figures['relay_per_s']:>8,}/s   rounds {figures['relay_s']} s   "
          f"client CPU {figures['relay_cpu_us']} us/event")
    print(f"  raw    {figures['raw_per_s']:>8,}/s   rounds {figures['raw_s']} s   "
          f"client CPU {figures['raw_cpu_us']} us/event")
    ok = "ok" if figures["ratio"] >= 0.5 else "BELOW GOAL"
    print(f"  ratio relay/raw {figures['ratio']:.3f}x  [goal >= 0.5x: {ok}]")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(figures, fh, indent=2)
    tmp.cleanup()


if __name__ == "__main__":
    main()
