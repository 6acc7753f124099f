"""``partition-notify serve`` as real processes against one store and a real broker.

* several serve processes publish every pending entry exactly once, in order;
* a relay process that dies holding a lease is replaced once the lease ends,
  with nothing lost and nothing sent twice;
* SIGTERM drains the batch in flight and exits 0;
* the metrics endpoint serves ``pn_*`` metrics and ``/healthz``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.contract.faults import FaultProxy
from tests.faults.support import BlackHole, Collector, logged_message_ids, stomp_app, tally
from tests.serve.helpers import Spawn, backdate, leases, log_unpublished
from tests.support.accounts import READER_PASSWORD, READER_USER, ROOT
from tests.support.net import free_port, wait_until

PUBLISHED = re.compile(r"relay: published events (\d+)\.\.(\d+) \((\d+)\)")


def published_ranges(*logs: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for text in logs for a, b, _ in PUBLISHED.findall(text)]


def assert_exactly_once(ranges: list[tuple[int, int]], n: int) -> None:
    ids = sorted(i for a, b in ranges for i in range(a, b + 1))
    assert ids == list(range(1, n + 1)), f"published ranges {sorted(ranges)} are not 1..{n} once"


def scrape(port: int, path: str = "/metrics") -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def metric(text: str, name: str) -> float:
    m = re.search(rf"^{name} ([0-9.e+-]+)$", text, re.M)
    assert m, f"{name} missing from /metrics"
    return float(m.group(1))


def test_several_serve_processes_publish_each_entry_once(
    store_url: str, activemq_url: str, serve: Spawn, db_name: str
) -> None:
    n = 300
    writer = stomp_app(store_url, f"stomp://127.0.0.1:{free_port()}", connect_timeout=1.0)
    sub_app = stomp_app(store_url, activemq_url, user=READER_USER, password=READER_PASSWORD)
    try:
        writer.publisher.register_table(db_name, "events", ["n"])
        collect = Collector()
        subscription = sub_app.subscriber().subscribe(f"{db_name}.events", collect)
        log_unpublished(writer, db_name, [f"n={i}" for i in range(n)])
        backdate(store_url, 60)
        port = free_port()
        procs = [
            serve(store_url, activemq_url, relay_batch_size="20", publish_timeout_seconds="5",
                  **({"metrics_port": str(port)} if i == 0 else {}))
            for i in range(3)
        ]
        # Signal handlers are installed before "serving:" is logged; a process
        # still importing when SIGTERM comes would die with -15.
        for p in procs:
            wait_until(lambda p=p: "serving:" in p.text(), 60, "every serve process to start")
        logged = set(logged_message_ids(store_url))
        assert collect.wait_for(logged, 90), f"{collect.delivered(logged)}/{n} delivered"
        wait_until(lambda: writer.store.log.relay_lag()[0] == 0, 10, "every entry marked")

        status, text = scrape(port)
        assert status == 200
        assert metric(text, "pn_store_up") == 1
        wait_until(lambda: metric(scrape(port)[1], "pn_relay_lag_events") == 0, 10,
                   "the lag gauge to reach 0")
        assert scrape(port, "/healthz") == (200, "ok\n")

        for p in procs:
            p.proc.send_signal(signal.SIGTERM)
        for p in procs:
            assert p.exit_code(30) == 0, p.text()[-2000:]
            assert "stopped" in p.text()
        ranges = [published_ranges(p.text()) for p in procs]
        assert_exactly_once([r for rs in ranges for r in rs], n)
        assert metric(text, "pn_relay_published_total") <= sum(b - a + 1 for a, b in ranges[0])
        seqs = [seq for topic, seq in collect.order]
        tally(
            f"serve-x3[{writer.store.dialect}]",
            acknowledged=len(logged),
            delivered=collect.delivered(logged),
            duplicates_suppressed=subscription.duplicates,
            per_process="/".join(str(sum(b - a + 1 for a, b in rs)) for rs in ranges),
            in_order=seqs == sorted(seqs),
        )
        assert subscription.duplicates == 0
        assert seqs == sorted(seqs), "topic order broken across serve processes"
    finally:
        sub_app.close()
        writer.close()


def test_relay_dying_with_lease_is_replaced_nothing_lost(
    store_url: str, activemq_url: str, db_name: str, tmp_path: Path
) -> None:
    n, lease = 50, 5.0
    writer = stomp_app(store_url, f"stomp://127.0.0.1:{free_port()}", connect_timeout=1.0)
    sub_app = stomp_app(store_url, activemq_url, user=READER_USER, password=READER_PASSWORD)
    hole = BlackHole()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs: dict[str, subprocess.Popen[bytes]] = {}

    def relay_process(name: str, url: str, lease_s: float, timeout: float) -> None:
        with open(tmp_path / f"{name}.log", "wb") as log:
            procs[name] = subprocess.Popen(
                [sys.executable, "-m", "tests.faults._relay_child", store_url, url, name,
                 str(lease_s), str(timeout)],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)

    try:
        writer.publisher.register_table(db_name, "events", ["n"])
        collect = Collector()
        subscription = sub_app.subscriber().subscribe(f"{db_name}.events", collect)
        log_unpublished(writer, db_name, [f"n={i}" for i in range(n)])
        backdate(store_url, 60)

        # 'doomed' leases everything, then hangs in publish (its broker never answers).
        relay_process("doomed", hole.url, lease, lease - 1)
        wait_until(lambda: leases(store_url) == {"doomed": n}, 60, "doomed to lease all")
        procs["doomed"].kill()
        assert procs["doomed"].wait(30) == -signal.SIGKILL
        for name in ("heir1", "heir2"):
            relay_process(name, activemq_url, 30.0, 5.0)
        logged = set(logged_message_ids(store_url))
        assert collect.wait_for(logged, 60), f"{collect.delivered(logged)}/{n} delivered"
        wait_until(lambda: writer.store.log.relay_lag()[0] == 0, 10, "every entry marked")
        for name in ("heir1", "heir2"):
            procs[name].kill()
            procs[name].wait(30)
        logs = {k: (tmp_path / f"{k}.log").read_text() for k in procs}
        assert published_ranges(logs["doomed"]) == []
        assert_exactly_once(published_ranges(logs["heir1"], logs["heir2"]), n)
        tally(
            f"relay-dies-with-lease[{writer.store.dialect}]",
            acknowledged=len(logged),
            delivered=collect.delivered(logged),
            duplicates_suppressed=subscription.duplicates,
            lease_s=lease,
        )
        assert collect.max_per_id() == 1 and subscription.duplicates == 0
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(30)
        hole.close()
        sub_app.close()
        writer.close()


def test_sigterm_drains_the_batch_in_flight(
    store_url: str, activemq_url: str, serve: Spawn, db_name: str
) -> None:
    host, port = activemq_url.rsplit("/", 1)[1].split(":")
    proxy = FaultProxy(host, int(port))
    writer = stomp_app(store_url, f"stomp://127.0.0.1:{free_port()}", connect_timeout=1.0)
    try:
        writer.publisher.register_table(db_name, "events", ["n"])
        log_unpublished(writer, db_name, ["n=warm"])
        backdate(store_url, 60)
        proc = serve(store_url, proxy.url(), publish_timeout_seconds="30")
        wait_until(lambda: writer.store.log.relay_lag()[0] == 0, 60, "serve to publish the warm-up")

        proxy.hold_replies()  # the broker gets the batch; serve waits for its receipts
        log_unpublished(writer, db_name, [f"n={i}" for i in range(10)])
        backdate(store_url, 60)
        wait_until(lambda: sum(leases(store_url).values()) == 10 and None not in
                   leases(store_url), 30, "serve to lease the batch")
        proc.proc.send_signal(signal.SIGTERM)
        try:
            proc.proc.wait(timeout=2)
            raise AssertionError("serve exited with a publish in flight: " + proc.text()[-800:])
        except subprocess.TimeoutExpired:
            pass  # still draining, as it should
        proxy.release_replies()
        assert proc.exit_code(30) == 0, proc.text()[-2000:]
        assert writer.store.log.relay_lag()[0] == 0, "the drained batch was marked published"
        assert "stopping: waiting for the relay batch in flight" in proc.text()
        assert published_ranges(proc.text())[-1] == (2, 11)
    finally:
        proxy.close()
        writer.close()
