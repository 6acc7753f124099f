"""STOMP (ActiveMQ) benchmark: partition-notify next to plain stomp.py, in one run.

    PYTHONPATH=. python bench/brokers_stomp.py [--url stomp://127.0.0.1:61613]
        [--store-url postgresql+psycopg://postgres@127.0.0.1:5432/bench] [--json out.json]
        [--only-batch [--log-rows N]]

Rows (goal in brackets):
  sync     raw stomp.py SEND+RECEIPT one at a time  vs  StompTransport.publish of one
           envelope [>= 0.9x]; also Publisher.send_mark_set_done end to end, which adds
           the store's log commit (marks are batched: bench/durable_publish.py).
  batch    raw stomp.py 10,000 pipelined SENDs then all RECEIPTs  vs  StompTransport.publish
           of 10,000 envelopes [>= 0.8x]; also announce_partitions of 10,000 partitions.
  latency  commit -> subscriber callback, p50/p99 [<= 20 ms / <= 100 ms].
  10k      one subscriber process following 10,000 tables: broker connections, threads,
           RSS [1, <= 4, <= 200 MB].

The store is SQLite in a temporary directory unless --store-url names another
(PostgreSQL: pass a database that exists and is empty).
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

import stomp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from broker_common import (  # noqa: E402
    commit_to_callback_latency,
    rate,
    sample_envelopes,
)
from core_common import machine_note  # noqa: E402
from partition_notify.subscriber import Subscriber  # noqa: E402

from partition_notify.app import App, build_app  # noqa: E402
from partition_notify.contract import AnyMessage  # noqa: E402


# ----------------------------------------------------------------------------- raw stomp.py
class RawSender:
    """Plain stomp.py, the way one would write it by hand: receipts awaited with Events."""

    def __init__(self, host: str, port: int, user: str, password: str) -> None:
        self.cond = threading.Condition()
        self.done: set[str] = set()
        outer = self

        class Listener(stomp.ConnectionListener):  # type: ignore[misc]
            def on_receipt(self, frame: Any) -> None:
                with outer.cond:
                    outer.done.add(frame.headers["receipt-id"])
                    outer.cond.notify_all()

            def on_error(self, frame: Any) -> None:
                raise SystemExit(f"broker ERROR: {frame.headers.get('message')}")

        # No heart-beats: an idle reference connection must not time out between rounds.
        self.conn = stomp.Connection12([(host, port)], vhost="/", auto_content_length=False)
        self.conn.set_listener("bench", Listener())
        self.conn.connect(user, password, wait=True)

    def send_sync(self, dest: str, body: bytes, headers: dict[str, str]) -> None:
        rid = uuid.uuid4().hex
        self.conn.send(dest, body, headers={**headers, "persistent": "true", "receipt": rid})
        with self.cond:
            if not self.cond.wait_for(lambda: rid in self.done, 30):
                raise SystemExit("raw stomp.py: no receipt in 30 s")
            self.done.discard(rid)

    def send_pipelined(self, dest: str, bodies: list[bytes], headers: dict[str, str]) -> None:
        rids = [uuid.uuid4().hex for _ in bodies]
        for rid, body in zip(rids, bodies, strict=True):
            self.conn.send(dest, body, headers={**headers, "persistent": "true", "receipt": rid})
        with self.cond:
            if not self.cond.wait_for(lambda: self.done.issuperset(rids), 120):
                raise SystemExit("raw stomp.py: receipts missing after 120 s")
            self.done.difference_update(rids)

    def close(self) -> None:
        self.conn.disconnect()


# ----------------------------------------------------------------------------- helpers


def app_for(args: argparse.Namespace, store_url: str, **extra: Any) -> App:
    from pydantic import SecretStr

    return build_app(store_url=store_url, transport_url=args.url,
                     broker_username=args.user, broker_password=SecretStr(args.password),
                     connect_timeout_seconds=10.0, publish_timeout_seconds=120.0, **extra)




# ----------------------------------------------------------------------------- sections
def interleaved(rounds: int, n: int, runs: dict[str, Callable[[], None]]) -> dict[str, float]:
    """Median rate, and median client CPU per message, of each contender over ``rounds``
    alternating rounds: on a shared machine wall-clock rates are noisy, CPU is steadier."""
    rates: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    for r in range(rounds):
        order = list(runs.items()) if r % 2 == 0 else list(reversed(runs.items()))
        for name, fn in order:
            c0 = time.process_time()
            rates[name].append(rate(n, fn))
            cpu[name].append((time.process_time() - c0) / n * 1e6)
    out = {name: statistics.median(v) for name, v in rates.items()}
    out.update({f"{name}_cpu_us": statistics.median(v) for name, v in cpu.items()})
    return out


def bench_sync(args: argparse.Namespace, app: App, raw: RawSender) -> dict[str, float]:
    n = args.sync_n
    app.publisher.register_table("bench", "sync", ["datestamp"])
    envs = sample_envelopes(app, "sync", n)
    dest = f"/topic/{envs[0].topic}"
    counter = iter(range(10**9))
    out = interleaved(args.rounds, n, {
        "raw": lambda: [raw.send_sync(dest, e.body, e.headers) for e in envs],
        "transport": lambda: [app.transport.publish([e], timeout=30) for e in envs],
        "publisher": lambda: [app.publisher.send_mark_set_done(
            "bench", "sync", f"datestamp=s{next(counter)}") for _ in range(n)],
    })
    return out


def fill_log(app: App, rows: int) -> None:
    """A log of ``rows`` add-partition events made by this tree's publisher, as a service
    that has run a while has: the batch rows then insert into indexes of that size."""
    app.publisher.register_table("bench", "history", ["datestamp", "part"])
    for start in range(0, rows, 10_000):
        app.publisher.announce_partitions("bench", "history", [
            {"datestamp": f"h{start}", "part": f"p{i:05d}"}
            for i in range(min(10_000, rows - start))])


def bench_batch(args: argparse.Namespace, app: App, raw: RawSender) -> dict[str, float]:
    n = args.batch_n
    fill_log(app, args.log_rows)
    app.publisher.register_table("bench", "batch", ["datestamp", "part"])
    envs = sample_envelopes(app, "batch", n)
    dest = f"/topic/{envs[0].topic}"
    counter = iter(range(10**9))

    def announce() -> None:
        day = next(counter)
        app.publisher.announce_partitions("bench", "batch", [
            {"datestamp": f"d{day}", "part": f"p{i:05d}"} for i in range(n)])

    return interleaved(args.rounds, n, {
        "raw": lambda: raw.send_pipelined(dest, [e.body for e in envs], envs[0].headers),
        "transport": lambda: app.transport.publish(envs, timeout=120),
        "publisher": announce,
    })


def bench_latency(args: argparse.Namespace, app: App, store_url: str) -> dict[str, float]:
    # The follower has its own connection, as a scheduler would have.
    return commit_to_callback_latency(app, app_for(args, store_url), args.latency_n)


def bench_many_tables(args: argparse.Namespace, app: App, store_url: str) -> dict[str, Any]:
    n = args.tables
    started = time.perf_counter()
    for i in range(n):
        app.publisher.register_table("many", f"t{i:05d}", ["datestamp"], retention_seconds=3600)
    registered = time.perf_counter() - started
    child = subprocess.Popen(
        [sys.executable, __file__, "--child-follow", str(n), "--store-url", store_url,
         "--url", args.url, "--user", args.user],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PN_BENCH_PASSWORD": args.password})
    assert child.stdin and child.stdout
    ready = json.loads(child.stdout.readline() or "{}")
    if "error" in ready or not ready:
        raise SystemExit(f"follower failed: {ready}")
    target = f"t{n - 1:05d}"
    sent = app.publisher.send_mark_set_done("many", target, "datestamp=1")
    child.stdin.write(sent.message_id + "\n")
    child.stdin.flush()
    result = json.loads(child.stdout.readline() or "{}")
    child.wait(60)
    return {**ready, **result, "register_s": registered}


def child_follow(args: argparse.Namespace) -> None:
    """The measured subscriber process: nothing but one Subscriber on 10,000 tables."""
    import psutil

    args.password = os.environ["PN_BENCH_PASSWORD"]
    app = app_for(args, args.store_url)
    got: dict[str, threading.Event] = {}
    lock = threading.Lock()

    def on_message(msg: AnyMessage) -> None:
        with lock:
            got.setdefault(msg.message_id, threading.Event()).set()

    # First subscription to 10,000 never-used topics makes ActiveMQ create them all.
    sub = Subscriber(app.store, app.transport, timeout_seconds=900)
    started = time.perf_counter()
    try:
        sub.subscribe([("many", f"t{i:05d}") for i in range(args.child_follow)], on_message)
    except Exception as exc:
        print(json.dumps({"error": str(exc)}), flush=True)
        raise
    subscribe_s = time.perf_counter() - started
    proc = psutil.Process()
    port = int(args.url.rsplit(":", 1)[1].split("/")[0])
    conns = [c for c in proc.net_connections("tcp")
             if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED]
    print(json.dumps({"subscribe_s": subscribe_s, "connections": len(conns),
                      "threads": proc.num_threads(), "rss_mb": proc.memory_info().rss / 2**20}),
          flush=True)
    wanted = sys.stdin.readline().strip()
    with lock:
        ev = got.setdefault(wanted, threading.Event())
    delivered = ev.wait(30)
    print(json.dumps({"delivered": delivered, "threads_after": proc.num_threads(),
                      "rss_mb_after": proc.memory_info().rss / 2**20}), flush=True)
    sub.close()
    app.close()


# ----------------------------------------------------------------------------- main
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--url", default=os.environ.get("PN_TEST_STOMP_URL",
                                                   "stomp://127.0.0.1:61613"))
    p.add_argument("--user", default=os.environ.get("PN_TEST_BROKER_USERNAME", "pn_service"))
    p.add_argument("--password", default=os.environ.get("PN_TEST_BROKER_PASSWORD",
                                                        "pn-service-secret"))
    p.add_argument("--store-url", default=None)
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds per row")
    p.add_argument("--sync-n", type=int, default=1000)
    p.add_argument("--batch-n", type=int, default=10_000)
    p.add_argument("--latency-n", type=int, default=500)
    p.add_argument("--tables", type=int, default=10_000)
    p.add_argument("--json", default=None, help="also write the figures here")
    p.add_argument("--log-rows", type=int, default=0,
                   help="add-partition events logged before the batch rows (a log that "
                   "has grown: its indexes are that big)")
    p.add_argument("--only-batch", action="store_true",
                   help="only the batch rows (10,000 pipelined, announce_partitions)")
    p.add_argument("--child-follow", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child_follow:
        child_follow(args)
        return

    tmp = tempfile.mkdtemp(prefix="pn-bench-stomp-")
    store_url = args.store_url or f"sqlite:///{tmp}/store.db"
    hostport = args.url.split("://", 1)[1].split("/")[0]
    host, port = hostport.rsplit(":", 1)
    app = app_for(args, store_url)
    raw = RawSender(host, int(port), args.user, args.password)
    try:
        if args.only_batch:
            batch = bench_batch(args, app, raw)
            report_batch(args, batch)
            print(machine_note())
            return
        sync = bench_sync(args, app, raw)
        batch = bench_batch(args, app, raw)
        latency = bench_latency(args, app, store_url)
        many = bench_many_tables(args, app, store_url)
    finally:
        raw.close()
        app.close()
    figures = {"sync": sync, "batch": batch, "latency": latency, "many_tables": many,
               "store": "sqlite (tmp)" if not args.store_url else "given --store-url",
               "url": args.url}
    report(args, figures)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(figures, fh, indent=2)


def report_batch(args: argparse.Namespace, b: dict[str, float]) -> None:
    print(f"\nSTOMP batch rows (median of {args.rounds} alternating rounds of "
          f"{args.batch_n}, on a log of {args.log_rows:,} earlier events; in brackets: "
          "client CPU per message)")
    print(f"{'raw stomp.py pipelined':34}{b['raw']:>9.0f}/s ({b['raw_cpu_us']:.0f} us)")
    for label, key in (("StompTransport.publish", "transport"),
                       ("announce_partitions end to end", "publisher")):
        print(f"{label:34}{b[key]:>9.0f}/s ({b[key + '_cpu_us']:.0f} us)"
              f"{b[key] / b['raw']:>7.2f}x raw")


def report(args: argparse.Namespace, f: dict[str, Any]) -> None:
    def ok(flag: bool) -> str:
        return "ok  " if flag else "MISS"

    s, b, lat, m = f["sync"], f["batch"], f["latency"], f["many_tables"]
    print(f"\nSTOMP benchmark against {f['url']} (ActiveMQ), store: {f['store']}\n")
    print(f"{'':34}{'raw stomp.py':>16}{'partition-notify':>19}{'ratio':>8}  goal")
    print(f"(median of {args.rounds} alternating rounds; in brackets: client CPU per message)")
    rows = [
        (f"sync, msgs/s ({args.sync_n} x 1)", s, "transport", 0.9),
        ("  end to end incl. store commits", s, "publisher", None),
        (f"batch, msgs/s ({args.batch_n} pipelined)", b, "transport", 0.8),
        ("  announce_partitions end to end", b, "publisher", None),
    ]
    for label, row, key, goal in rows:
        ratio = row[key] / row["raw"]
        raw_col = f"{row['raw']:.0f} ({row['raw_cpu_us']:.0f} us)" if goal else ""
        verdict = f">= {goal}x {ok(ratio >= goal)}" if goal else "(info)"
        print(f"{label:34}{raw_col:>16}{row[key]:>9.0f} ({row[key + '_cpu_us']:.0f} us)"
              f"{ratio:>7.2f}x  {verdict}")
    print(f"\ncommit -> callback latency ({lat['n']} set-done): p50 {lat['p50_ms']:.1f} ms "
          f"{ok(lat['p50_ms'] <= 20)}  p99 {lat['p99_ms']:.1f} ms {ok(lat['p99_ms'] <= 100)}  "
          f"max {lat['max_ms']:.1f} ms")
    print(f"\none subscriber following {args.tables} tables (own process): "
          f"subscribe {m['subscribe_s']:.1f} s, delivered: {m['delivered']}")
    print(f"  connections {m['connections']} {ok(m['connections'] == 1)}  "
          f"threads {m['threads']} {ok(m['threads'] <= 4)}  "
          f"RSS {m['rss_mb']:.0f} MB {ok(m['rss_mb'] <= 200)}  "
          f"(after a delivery: threads {m['threads_after']}, RSS {m['rss_mb_after']:.0f} MB)")


if __name__ == "__main__":
    main()
