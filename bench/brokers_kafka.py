"""Kafka benchmark: partition-notify next to plain kafka-python, in one run.

    PYTHONPATH=. python bench/brokers_kafka.py [--url kafka://127.0.0.1:9092]
        [--store-url postgresql+psycopg://postgres@127.0.0.1:5432/bench] [--json out.json]

Rows (goal in brackets):
  sync     raw KafkaProducer(acks='all').send().get() one at a time  vs
           KafkaTransport.publish of one envelope [>= 0.9x]; also
           Publisher.send_mark_set_done end to end (adds the store's two commits).
  batch    raw 10,000 send()s then every future's get()  vs  KafkaTransport.publish of
           10,000 envelopes [>= 0.8x]; also announce_partitions of 10,000 partitions end
           to end.
  latency  commit -> subscriber callback, p50/p99 [<= 20 ms / <= 100 ms].
  tables   one subscriber process following N tables (topics): broker connections,
           threads, RSS [1, <= 4, <= 200 MB], time to subscribe, one delivery.
  single   the same N tables sharing one topic (PN_TOPIC_POLICY=single, key db.table
           keeps per-table order): what a Kafka deployment with many tables should use.

Both producers use the same settings (acks=all, idempotent, linger 0) and the
same records (real set-done bodies, key db.table, the same headers). The store
is SQLite in a temporary directory unless --store-url names another.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from kafka import KafkaProducer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from broker_common import (  # noqa: E402
    commit_to_callback_latency,
    rate,
    sample_envelopes,
)
from partition_notify.subscriber import Subscriber  # noqa: E402
from partition_notify.transports.kafka.config import parse_url  # noqa: E402

from partition_notify.app import App, build_app  # noqa: E402
from partition_notify.contract import AnyMessage, Envelope  # noqa: E402


# ----------------------------------------------------------------------------- raw kafka-python
class RawProducer:
    """Plain kafka-python, the way one would write it by hand."""

    def __init__(self, url: str) -> None:
        ep = parse_url(url)
        self.producer = KafkaProducer(bootstrap_servers=list(ep.bootstrap), acks="all",
                                      linger_ms=0, api_version=ep.api_version)

    def _send(self, e: Envelope) -> Any:
        return self.producer.send(e.topic, value=e.body, key=e.key.encode(),
                                  headers=[(k, v.encode()) for k, v in e.headers.items()])

    def send_sync(self, envs: list[Envelope]) -> None:
        for e in envs:
            self._send(e).get(timeout=30)

    def send_pipelined(self, envs: list[Envelope]) -> None:
        futures = [self._send(e) for e in envs]
        for f in futures:
            f.get(timeout=120)

    def close(self) -> None:
        self.producer.close(timeout=10)


# ----------------------------------------------------------------------------- helpers


def interleaved(rounds: int, n: int, runs: dict[str, Callable[[], None]]) -> dict[str, float]:
    """Median rate of each contender over ``rounds`` alternating rounds (noise cancels)."""
    rates: dict[str, list[float]] = {name: [] for name in runs}
    for r in range(rounds):
        order = list(runs.items()) if r % 2 == 0 else list(reversed(runs.items()))
        for name, fn in order:
            rates[name].append(rate(n, fn))
    return {name: statistics.median(v) for name, v in rates.items()}


def app_for(args: argparse.Namespace, store_url: str, **settings: Any) -> App:
    return build_app(store_url=store_url, transport_url=args.url,
                     connect_timeout_seconds=30.0, publish_timeout_seconds=120.0, **settings)




# ----------------------------------------------------------------------------- sections
def bench_sync(args: argparse.Namespace, app: App, raw: RawProducer) -> dict[str, float]:
    n = args.sync_n
    app.publisher.register_table("bench", "sync", ["datestamp"])
    envs = sample_envelopes(app, "sync", n)  # also creates the topic: warm for both
    raw.send_sync(envs[:10])
    counter = iter(range(10**9))
    return interleaved(args.rounds, n, {
        "raw": lambda: raw.send_sync(envs),
        "transport": lambda: [app.transport.publish([e], timeout=30) for e in envs],
        "publisher": lambda: [app.publisher.send_mark_set_done(
            "bench", "sync", f"datestamp=s{next(counter)}") for _ in range(n)],
    })


def bench_batch(args: argparse.Namespace, app: App, raw: RawProducer) -> dict[str, float]:
    n = args.batch_n
    app.publisher.register_table("bench", "batch", ["datestamp", "part"])
    envs = sample_envelopes(app, "batch", n)
    counter = iter(range(10**9))

    def announce() -> None:
        day = next(counter)
        app.publisher.announce_partitions("bench", "batch", [
            {"datestamp": f"d{day}", "part": f"p{i:05d}"} for i in range(n)])

    return interleaved(args.rounds, n, {
        "raw": lambda: raw.send_pipelined(envs),
        "transport": lambda: app.transport.publish(envs, timeout=120),
        "publisher": announce,
    })


def bench_latency(args: argparse.Namespace, app: App, store_url: str) -> dict[str, float]:
    # The follower has its own connection, as a scheduler would have.
    return commit_to_callback_latency(app, app_for(args, store_url), args.latency_n)


def bench_many_tables(args: argparse.Namespace, app: App, store_url: str,
                      db: str = "many") -> dict[str, Any]:
    n = args.tables
    started = time.perf_counter()
    for i in range(n):
        app.publisher.register_table(db, f"t{i:05d}", ["datestamp"], retention_seconds=3600)
    registered = time.perf_counter() - started
    child = subprocess.Popen(
        [sys.executable, __file__, "--child-follow", str(n), "--store-url", store_url,
         "--url", args.url, "--child-db", db],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert child.stdin and child.stdout
    ready = json.loads(child.stdout.readline() or "{}")
    if "error" in ready or not ready:
        child.kill()
        child.wait(10)
        return {"error": ready.get("error", "the follower process died"), "register_s": registered}
    target = f"t{n - 1:05d}"
    sent_at = time.perf_counter()
    sent = app.publisher.send_mark_set_done(db, target, "datestamp=1")
    child.stdin.write(sent.message_id + "\n")
    child.stdin.flush()
    result = json.loads(child.stdout.readline() or "{}")
    result["delivery_s"] = time.perf_counter() - sent_at if result.get("delivered") else None
    child.wait(120)
    return {**ready, **result, "register_s": registered}


def child_follow(args: argparse.Namespace) -> None:
    """The measured subscriber process: nothing but one Subscriber on N tables."""
    import psutil

    app = app_for(args, args.store_url)
    got: dict[str, threading.Event] = {}
    lock = threading.Lock()

    def on_message(msg: AnyMessage) -> None:
        with lock:
            got.setdefault(msg.message_id, threading.Event()).set()

    # The first subscription creates the N topics (admin CreateTopics, 1000 per request).
    sub = Subscriber(app.store, app.transport, timeout_seconds=1800)
    started = time.perf_counter()
    try:
        sub.subscribe([(args.child_db, f"t{i:05d}") for i in range(args.child_follow)],
                      on_message)
    except Exception as exc:
        print(json.dumps({"error": str(exc)}), flush=True)
        raise
    subscribe_s = time.perf_counter() - started
    proc = psutil.Process()
    ports = {int(h.rsplit(":", 1)[1]) for h in parse_url(args.url).bootstrap}
    conns = [c for c in proc.net_connections("tcp")
             if c.raddr and c.raddr.port in ports and c.status == psutil.CONN_ESTABLISHED]
    print(json.dumps({"subscribe_s": subscribe_s, "connections": len(conns),
                      "threads": proc.num_threads(),
                      "thread_names": sorted(t.name for t in threading.enumerate()),
                      "rss_mb": proc.memory_info().rss / 2**20}), flush=True)
    wanted = sys.stdin.readline().strip()
    with lock:
        ev = got.setdefault(wanted, threading.Event())
    delivered = ev.wait(args.delivery_wait)
    print(json.dumps({"delivered": delivered, "threads_after": proc.num_threads(),
                      "rss_mb_after": proc.memory_info().rss / 2**20}), flush=True)
    sub.close()
    app.close()


# ----------------------------------------------------------------------------- main
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--url", default=os.environ.get("PN_TEST_KAFKA_URL",
                                                   "kafka://127.0.0.1:9092"))
    p.add_argument("--store-url", default=None)
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds per row")
    p.add_argument("--sync-n", type=int, default=1000)
    p.add_argument("--batch-n", type=int, default=10_000)
    p.add_argument("--latency-n", type=int, default=500)
    p.add_argument("--tables", type=int, default=10_000)
    p.add_argument("--delivery-wait", type=float, default=60.0,
                   help="seconds the N-table follower waits for its one message")
    p.add_argument("--skip", default="", help="comma-separated sections to skip: "
                                              "sync,batch,latency,tables,single")
    p.add_argument("--json", default=None, help="also write the figures here")
    p.add_argument("--child-follow", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--child-db", default="many", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child_follow:
        child_follow(args)
        return

    skip = set(filter(None, args.skip.split(",")))
    tmp = tempfile.mkdtemp(prefix="pn-bench-kafka-")
    store_url = args.store_url or f"sqlite:///{tmp}/store.db"
    app = app_for(args, store_url)
    raw = RawProducer(args.url)
    figures: dict[str, Any] = {"url": args.url, "tables_n": args.tables,
                               "store": "sqlite (tmp)" if not args.store_url else "--store-url"}
    try:
        if "sync" not in skip:
            figures["sync"] = bench_sync(args, app, raw)
        if "batch" not in skip:
            figures["batch"] = bench_batch(args, app, raw)
        if "latency" not in skip:
            figures["latency"] = bench_latency(args, app, store_url)
        if "tables" not in skip:
            figures["many_tables"] = bench_many_tables(args, app, store_url)
        if "single" not in skip:
            shared = app_for(args, store_url, topic_policy="single",
                             topic_prefix=f"pnbench{uuid.uuid4().hex[:8]}")
            try:
                figures["single_topic"] = bench_many_tables(args, shared, store_url, db="one")
            finally:
                shared.close()
    finally:
        raw.close()
        app.close()
    report(args, figures)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(figures, fh, indent=2)


def report(args: argparse.Namespace, f: dict[str, Any]) -> None:
    def ok(flag: bool) -> str:
        return "ok  " if flag else "MISS"

    print(f"\nKafka benchmark against {f['url']}, store: {f['store']}")
    print(f"(median of {args.rounds} alternating rounds per row)\n")
    print(f"{'':36}{'raw kafka-python':>17}{'partition-notify':>18}{'ratio':>8}  goal")
    if "sync" in f:
        s = f["sync"]
        rs = s["transport"] / s["raw"]
        print(f"{'sync, msgs/s (' + str(args.sync_n) + ' x 1, acks=all)':36}{s['raw']:>17.0f}"
              f"{s['transport']:>18.0f}{rs:>7.2f}x  >= 0.9x {ok(rs >= 0.9)}")
        print(f"{'  send_mark_set_done end to end':36}{'':>17}{s['publisher']:>18.0f}"
              f"{s['publisher'] / s['raw']:>7.2f}x  (incl. 2 store commits)")
    if "batch" in f:
        b = f["batch"]
        rb = b["transport"] / b["raw"]
        print(f"{'batch, msgs/s (' + str(args.batch_n) + ' pipelined)':36}{b['raw']:>17.0f}"
              f"{b['transport']:>18.0f}{rb:>7.2f}x  >= 0.8x {ok(rb >= 0.8)}")
        print(f"{'  announce_partitions end to end':36}{'':>17}{b['publisher']:>18.0f}"
              f"{b['publisher'] / b['raw']:>7.2f}x  (incl. store)")
    if "latency" in f:
        lat = f["latency"]
        print(f"\ncommit -> callback latency ({lat['n']} set-done): p50 {lat['p50_ms']:.1f} ms "
              f"{ok(lat['p50_ms'] <= 20)}  p99 {lat['p99_ms']:.1f} ms "
              f"{ok(lat['p99_ms'] <= 100)}  max {lat['max_ms']:.1f} ms")
    for key, label in (("many_tables", "one topic per table"),
                       ("single_topic", "all on one topic (topic_policy=single)")):
        if key not in f:
            continue
        m = f[key]
        if "error" in m:
            print(f"\none subscriber following {args.tables} tables, {label}: FAILED: "
                  f"{m['error']}")
            continue
        took = f"{m['delivery_s']:.2f} s" if m.get("delivery_s") else \
            f"NOT within {args.delivery_wait:g} s"
        print(f"\none subscriber following {args.tables} tables, {label}, own process:\n"
              f"  subscribe {m['subscribe_s']:.1f} s (incl. creating topics), "
              f"one set-done to the last table delivered in {took}")
        print(f"  connections {m['connections']} {ok(m['connections'] == 1)}  "
              f"threads {m['threads']} {ok(m['threads'] <= 4)}  "
              f"RSS {m['rss_mb']:.0f} MB {ok(m['rss_mb'] <= 200)}  "
              f"(after the delivery: threads {m['threads_after']}, "
              f"RSS {m['rss_mb_after']:.0f} MB)")
        print(f"  threads: {', '.join(m['thread_names'])}")


if __name__ == "__main__":
    main()
