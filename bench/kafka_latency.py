"""Kafka commit -> callback latency against idle cost, per ``fetch_max_wait_ms``.

    eval "$(bash scripts/services.sh env)"
    PYTHONPATH=. python bench/kafka_latency.py [--waits 20,5] [--rounds 5] [--n 100]
        [--idle-seconds 3] [--url kafka://127.0.0.1:9092]

A subscriber in its own process follows one table over Kafka with the URL
option ``fetch_max_wait_ms=W``; this process publishes one set-done at a time
(the next once the last arrived) and times publish call -> callback. The first
W in ``--waits`` is the baseline (20: the value the tests and the issue's
"now" figure of 12.1 / 13.7 ms used); the modes alternate round by round.

``--raw``: each round also times the raw clients on the same broker and W, the
floor any client of this broker meets: a ``KafkaConsumer`` (``fetch_max_wait_ms=W``)
in its own process on a topic of its own, and here a ``KafkaProducer(acks="all")``
``send().get()`` per record, the next once the last arrived.

Per mode: medians over rounds of each round's p50 and p99, and, while nobody
publishes, the CPU of the subscriber process and of the broker process (found
by the port it listens on; shared with other users of the broker) as % of one
core. tansu 0.6 answers an empty fetch only after the full W, so W bounds its
delivery latency and sets how many fetches an idle subscriber sends (1000/W a
second). Apache Kafka answers a waiting fetch as soon as a record arrives.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

import psutil
from core_common import machine_note

TIMEOUT = 30.0
WARM_UP = 10


def _url(base: str, wait: int) -> str:
    return f"{base.split('?', 1)[0]}?fetch_max_wait_ms={wait}"


def subscriber(store: str, url: str, table: str, ready: Any, out: Any, stop: Any) -> None:
    from partition_notify.app import build_app

    with build_app(store_url=store, transport_url=url) as app, app.subscriber() as sub:
        sub.subscribe(("bench", table), lambda m: out.put((m.message_id, time.time())),
                      history=False)
        ready.set()
        stop.wait(3600)


def _bootstrap(url: str) -> list[str]:
    """host:port of each broker in a ``kafka://h1:p1,h2:p2?...`` URL."""
    return urlsplit(url.split("?", 1)[0]).netloc.split(",")


def raw_consumer(bootstrap: list[str], topic: str, wait: int, ready: Any, out: Any,
                 stop: Any) -> None:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, fetch_max_wait_ms=wait,
                             enable_auto_commit=False, group_id=None)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_end(tp)
    consumer.position(tp)
    ready.set()
    while not stop.is_set():
        for records in consumer.poll(timeout_ms=250).values():
            for record in records:
                out.put((record.value, time.time()))
    consumer.close()


def raw_round(args: argparse.Namespace, topic: str, wait: int) -> tuple[float, float, float]:
    """(p50, p99, send().get() p50) in ms of the raw clients, as one_round times ours."""
    from kafka import KafkaProducer

    bootstrap = _bootstrap(args.url)
    ctx = multiprocessing.get_context("spawn")
    ready, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=raw_consumer, args=(bootstrap, topic, wait, ready, out, stop))
    proc.start()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        if not ready.wait(120):
            raise SystemExit("raw consumer process did not start")
        latency: list[float] = []
        publish: list[float] = []
        for i in range(args.n + WARM_UP):
            key = f"{wait}-{i}-{uuid.uuid4().hex}".encode()
            t0 = time.time()
            producer.send(topic, key, partition=0).get(timeout=TIMEOUT)
            t1 = time.time()
            got, t_recv = out.get(timeout=TIMEOUT)
            if got != key:
                raise SystemExit(f"raw: expected {key!r}, got {got!r}")
            if i >= WARM_UP:
                latency.append(t_recv - t0)
                publish.append(t1 - t0)
        q = statistics.quantiles(latency, n=100)
        return q[49] * 1000, q[98] * 1000, statistics.median(publish) * 1000
    finally:
        producer.close(5)
        stop.set()
        proc.join(30)
        if proc.is_alive():
            proc.kill()


def create_raw_topic(url: str) -> str:
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = f"pn-bench-raw-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=_bootstrap(url), request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)],
                            timeout_ms=30000)
    finally:
        admin.close()
    return topic


def broker_process(url: str) -> psutil.Process | None:
    """The process listening on the broker's port (None when not on this machine)."""
    port = urlsplit(url.split(",")[0]).port or 9092
    for conn in psutil.net_connections("tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr.port == port and conn.pid:
            return psutil.Process(conn.pid)
    return None


def _cpu(p: psutil.Process | None) -> float:
    if p is None:
        return float("nan")
    t = p.cpu_times()
    return float(t.user + t.system)


def one_round(args: argparse.Namespace, store: str, table: str, wait: int,
              broker: psutil.Process | None) -> tuple[float, float, float, float, float]:
    from partition_notify.app import build_app

    ctx = multiprocessing.get_context("spawn")
    ready, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=subscriber,
                       args=(store, _url(args.url, wait), table, ready, out, stop))
    proc.start()
    try:
        if not ready.wait(120):
            raise SystemExit("subscriber process did not start")
        ps = psutil.Process(proc.pid)
        sub0, broker0 = _cpu(ps), _cpu(broker)
        time.sleep(args.idle_seconds)  # measuring idle CPU: nothing to wait for but time
        sub_cpu = (_cpu(ps) - sub0) / args.idle_seconds * 100
        broker_cpu = (_cpu(broker) - broker0) / args.idle_seconds * 100
        latency: list[float] = []
        publish: list[float] = []
        with build_app(store_url=store, transport_url=args.url) as app:
            for i in range(args.n + WARM_UP):
                t0 = time.time()
                msg = app.publisher.send_mark_set_done("bench", table, f"ds=w{wait}r{i}{t0}")
                t1 = time.time()
                got_id, t_recv = out.get(timeout=TIMEOUT)
                if got_id != msg.message_id:
                    raise SystemExit(f"expected {msg.message_id}, got {got_id}")
                if i >= WARM_UP:
                    latency.append(t_recv - t0)
                    publish.append(t1 - t0)
        q = statistics.quantiles(latency, n=100)
        return q[49] * 1000, q[98] * 1000, sub_cpu, broker_cpu, statistics.median(publish) * 1000
    finally:
        stop.set()
        proc.join(30)
        if proc.is_alive():
            proc.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default=os.environ.get("PN_TEST_KAFKA_URL",
                                                    "kafka://127.0.0.1:9092"))
    ap.add_argument("--waits", default="20,5",
                    help="fetch_max_wait_ms values; the first is the baseline")
    ap.add_argument("--n", type=int, default=100, help="timed set-dones per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--idle-seconds", type=float, default=3.0)
    ap.add_argument("--raw", action="store_true",
                    help="also time raw KafkaProducer/KafkaConsumer at each W (the floor)")
    args = ap.parse_args()
    from partition_notify.app import build_app

    waits = [int(w) for w in args.waits.split(",")]
    broker = broker_process(args.url)
    table = f"lat{uuid.uuid4().hex[:8]}"
    store = f"sqlite:///{os.path.abspath(f'/tmp/pn-bench-kafka-{table}.db')}"
    with build_app(store_url=store, transport_url=args.url) as app:
        app.publisher.register_table("bench", table, ["ds"])
        app.publisher.send_mark_set_done("bench", table, "ds=create-topic")
    print(f"{args.n} set-dones per round, {args.rounds} alternating rounds per mode, "
          f"broker pid {broker.pid if broker else '?'}; {machine_note()}")
    results: dict[int, list[tuple[float, float, float, float, float]]] = {w: [] for w in waits}
    raw: dict[int, list[tuple[float, float, float]]] = {w: [] for w in waits}
    raw_topic = create_raw_topic(args.url) if args.raw else ""
    for r in range(args.rounds):
        for wait in waits if r % 2 == 0 else list(reversed(waits)):
            results[wait].append(one_round(args, store, table, wait, broker))
            if args.raw:
                raw[wait].append(raw_round(args, raw_topic, wait))
    print(f"\n{'fetch_max_wait_ms':>18} {'p50 ms':>8} {'p99 ms':>8} {'idle CPU sub':>13} "
          f"{'idle CPU broker':>16} {'publish call p50':>17}")
    for wait, rows in results.items():
        med = [statistics.median(x[k] for x in rows) for k in range(5)]
        tag = "  (baseline)" if wait == waits[0] else ""
        print(f"{wait:>18} {med[0]:>8.2f} {med[1]:>8.2f} {med[2]:>12.2f}% {med[3]:>15.2f}% "
              f"{med[4]:>14.2f} ms{tag}")
        if args.raw:
            r_med = [statistics.median(x[k] for x in raw[wait]) for k in range(3)]
            print(f"{'raw clients, W=' + str(wait):>18} {r_med[0]:>8.2f} {r_med[1]:>8.2f} "
                  f"{'':>13} {'':>16} {r_med[2]:>14.2f} ms  (send().get())")
    print(f"\n{machine_note()}")


if __name__ == "__main__":
    main()
