"""Where a Spark commit's "commit -> logged" goes: the driver's part and serve's part.

    PYTHONPATH=$PWD .venv/bin/python bench/spark_commit_split.py [--rounds 20] [--gap S]

The first part of bench/e2e_airflow.py, alone (seconds per round). One Spark
driver (this process, local[2], the commit protocol on) appends to a
partition and marks it done, alternating between two receivers (ABAB):

* ``serve``: a real ``partition-notify serve`` (HTTP API, temporary SQLite
  store, the table registered) behind a transparent timing relay
  (bench/timing_relay.py): commit -> logged, where t0 = ``committedAtMs``
  (taken when ``commitJob`` returned) and logged = the set-done's
  ``timestampMs``, split at the request's first byte at the relay into the
  driver's part and serve's (first byte -> answer, -> logged);
* ``stub``: a bare HTTP/1.1 listener in this process that answers 201 at once
  and never closes an idle connection: commit -> the request's first byte,
  and -> its last byte (the driver's part: the rest of the command, Spark's
  listener bus, the HTTP client, the connection).

``--gap S`` idles S seconds before each counted write: bench/e2e_airflow.py's
commits come ~90 s apart, longer than serve keeps an idle connection.

Then ``serve`` alone: the same manifests POSTed by a Python client, each on a
new connection (as the driver did per commit) and on one kept-alive
connection: request -> answer, and request -> logged.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core_common import machine_note
from e2e_procs import Procs, bench_dir, http_ok, wait_for
from timing_relay import TimingRelay

ROOT = Path(__file__).resolve().parents[1]
DELIVERY_TIMEOUT = 30.0


class Stub:
    """HTTP/1.1, keep-alive, 201 to every request; records when each request arrived."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.got: dict[int, dict[str, float]] = {}  # committedAtMs -> times
        self.connections = 0
        self.cond = threading.Condition()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            conn, _ = self.sock.accept()
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            while True:
                first = None
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    first = first or time.time()
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                while len(buf) < length:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                body, buf = buf[:length], buf[length:]
                last = time.time()
                doc = json.loads(body)
                answer = json.dumps({"status": "announced", "jobId": doc["jobId"],
                                     "table": "bench.orders"}).encode()
                conn.sendall(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(answer), answer))
                with self.cond:
                    self.got[doc["committedAtMs"]] = {"first": first or last, "last": last}
                    self.cond.notify_all()


def start_serve(procs: Procs, tmp: Path) -> tuple[Any, str, str, str]:
    from partition_notify.app import build_app
    from partition_notify.http.store import HttpStore
    from tests.support.net import free_port

    table_path = str(tmp / "warehouse" / "orders")
    store_url = f"sqlite:///{tmp}/pn-store.db"
    app = build_app(store_url=store_url, transport_url="embedded://")
    app.publisher.register_table("bench", "orders", ["datestamp"], location=f"file:{table_path}")
    token = HttpStore(app.store).create_token("bench-split", "write")[1]
    port = free_port()
    serve_url = f"http://127.0.0.1:{port}"
    procs.start("serve", [sys.executable, "-m", "partition_notify.cli", "serve"], {
        **os.environ, "PYTHONPATH": str(ROOT), "PN_STORE_URL": store_url,
        "PN_TRANSPORT_URL": "embedded://", "PN_HTTP_BIND": f"127.0.0.1:{port}"}, cwd=str(ROOT))
    wait_for(lambda: http_ok(f"{serve_url}/readyz"), 60.0, "serve", procs.check_alive)
    return app, serve_url, token, table_path


def logged_ms(app: Any, day: str, timeout: float) -> tuple[int, int]:
    """(committedAtMs, timestampMs) of the set-done of ``datestamp=<day>``, once logged."""
    from partition_notify.contract import SetDoneMessage, decode

    found: list[tuple[int, int]] = []

    def look() -> bool:
        for ev in reversed(app.store.log.events_after(0, limit=100_000)):
            msg = decode(ev.body)
            if isinstance(msg, SetDoneMessage) and msg.spec == f"datestamp={day}":
                found.append((int(msg.revision or 0), int(msg.timestamp_ms or 0)))
                return True
        return False

    # Polled: the set-done is logged by another process after df.write returned.
    deadline = time.monotonic() + timeout
    while not look():
        if time.monotonic() > deadline:
            raise RuntimeError(f"no set-done of datestamp={day} within {timeout:g} s")
        time.sleep(0.01)
    return found[0]


def spark_rounds(args: argparse.Namespace, app: Any, relay: TimingRelay, token: str,
                 table_path: str, stub: Stub) -> dict[str, list[float]]:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from partition_notify.cli.spark import jar_path, spark_settings

    os.environ["PN_WRITER_TOKEN"] = token
    builder = (SparkSession.builder.master("local[2]").appName("pn-bench-split")
               .config("spark.jars", str(jar_path()))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    for key, value in spark_settings(relay.url, None).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")

    def write(day: str, url: str) -> None:
        df = (spark.range(0, 1000, numPartitions=2).withColumn("amount", F.col("id") * 0.5)
              .withColumn("datestamp", F.lit(day)))
        (df.write.mode("append").partitionBy("datestamp")
         .option("partitionnotify.markSetDone", f"datestamp={day}")
         .option("spark.partitionnotify.serveUrl", url)
         .parquet(table_path))

    out: dict[str, list[float]] = {k: [] for k in (
        "serve: commit->logged", "serve: commit->first byte (driver)",
        "serve: first byte->answer (serve)", "serve: first byte->logged (serve)",
        "stub: commit->first byte", "stub: commit->last byte")}
    new_conns = 0
    for i in range(-2, args.rounds):  # two warm-up rounds, not counted
        for kind in ("serve", "stub") if i % 2 == 0 else ("stub", "serve"):
            day = f"{kind}{i + 2:03d}{uuid.uuid4().hex[:4]}"
            if i >= 0 and args.gap > 0:
                time.sleep(args.gap)  # pacing the workload (idle time), not waiting for an event
            rx = relay if kind == "serve" else stub
            before = set(rx.got)
            write(day, rx.url)
            with rx.cond:
                ok = rx.cond.wait_for(lambda b=before, r=rx: set(r.got) - b, DELIVERY_TIMEOUT)
            assert ok, f"the {kind} got no manifest"
            (t0,) = set(rx.got) - before
            got = rx.got[t0]
            if i < 0:
                continue
            if kind == "stub":
                out["stub: commit->first byte"].append(got["first"] - t0 / 1000)
                out["stub: commit->last byte"].append(got["last"] - t0 / 1000)
                continue
            c0, logged = logged_ms(app, day, DELIVERY_TIMEOUT)
            assert c0 == t0, (c0, t0)
            new_conns += got["nth"] == 1
            out["serve: commit->logged"].append((logged - t0) / 1000)
            out["serve: commit->first byte (driver)"].append(got["first"] - t0 / 1000)
            out["serve: first byte->answer (serve)"].append(got["answer"] - got["first"])
            out["serve: first byte->logged (serve)"].append(logged / 1000 - got["first"])
    print(f"serve rounds on a new connection: {new_conns} of {args.rounds}; connections "
          f"{relay.connections}, closed by serve {relay.closed_by_serve}", flush=True)
    spark.stop()
    return out


def serve_alone(args: argparse.Namespace, app: Any, serve_url: str, token: str,
                table_path: str) -> dict[str, list[float]]:
    import httpx

    out: dict[str, list[float]] = {}
    headers = {"Authorization": f"Bearer {token}"}
    kept = httpx.Client(timeout=10, headers=headers)
    for kind in ("new connection", "kept-alive"):
        answer, logged = [], []
        for i in range(args.rounds):
            day = f"py{kind[0]}{i:03d}{uuid.uuid4().hex[:4]}"
            job = str(uuid.uuid4())
            now_ms = int(time.time() * 1000)
            body = {"version": 1, "jobId": job, "table": None,
                    "outputPath": f"file:{table_path}", "overwrite": False,
                    "partitions": [{"path": f"datestamp={day}",
                                    "location": f"file:{table_path}/datestamp={day}"}],
                    "deleted": [], "markSetDone": f"datestamp={day}",
                    "committedAtMs": now_ms, "sparkAppId": "bench"}
            # A client's construction (its TLS context: tens of ms) is not serve's time.
            client = kept if kind == "kept-alive" else httpx.Client(timeout=10, headers=headers)
            t = time.time()
            r = client.post(f"{serve_url}/v1/commits", json=body,
                            headers={"Idempotency-Key": job})
            answer.append(time.time() - t)
            if client is not kept:
                client.close()
            r.raise_for_status()
            logged.append(logged_ms(app, day, DELIVERY_TIMEOUT)[1] / 1000 - t)
            time.sleep(0.05)
        out[f"serve alone, {kind}: request->answer"] = answer
        out[f"serve alone, {kind}: request->logged"] = logged
    kept.close()
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--gap", type=float, default=0.0,
                   help="idle seconds before each counted write (e2e_airflow's are ~90 s apart)")
    p.add_argument("--keep", action="store_true")
    args = p.parse_args()
    with bench_dir("pn-bench-split-", args.keep) as tmp:
        print(f"# bench/spark_commit_split.py: {args.rounds} rounds per receiver, "
              f"{args.gap:g} s idle before each write; temp dir {tmp}")
        print(machine_note(), flush=True)
        with Procs(tmp / "logs") as procs:
            app, serve_url, token, table_path = start_serve(procs, tmp)
            stub = Stub()
            relay = TimingRelay(int(serve_url.rsplit(":", 1)[1]))
            res = spark_rounds(args, app, relay, token, table_path, stub)
            relay.close()
            res.update(serve_alone(args, app, serve_url, token, table_path))
            app.close()
        print(f"\nthe stub accepted {stub.connections} connection(s) for "
              f"{args.rounds + 2} manifests")
        print(f"{'':48}{'median':>9}{'p90':>9}{'max':>9}  (ms)")
        for name, xs in res.items():
            q = sorted(xs)
            print(f"{name:48}{statistics.median(xs) * 1000:9.1f}"
                  f"{q[int(0.9 * (len(q) - 1))] * 1000:9.1f}{max(xs) * 1000:9.1f}")
        print(machine_note())
    return 0


if __name__ == "__main__":
    sys.exit(main())
