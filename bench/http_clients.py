"""One ``serve`` process holding N long-polls and N SSE streams vs N Python-subscriber waits.

    PYTHONPATH=. python bench/http_clients.py [--clients 1000] [--rounds 3]
        [--backend sqlite|postgresql]

HTTP side: a real ``partition-notify serve`` (PN_HTTP_BIND) on the store;
this process opens N SSE streams (``GET .../stream``) and, each round, N
long-polls (``GET .../wait``), waits until the server reports them all
registered (``pn_http_waits`` on /metrics), then marks the spec done over
HTTP. Latency = client receive time minus the time just before the POST.

Baseline, same run: N threads in one process each calling
``Subscriber.wait_for_set_done`` (embedded transport on the same store),
then one ``Publisher.send_mark_set_done``; same latency definition.

RSS: of the serve process before clients, with all clients connected; and
of a fresh process holding the N Python waits (its growth over idle).
Medians over rounds of each round's p50 and p99. Clients and server share
the machine's CPUs: on a busy 2-core box the clients' own event loop is part
of what is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil
from core_common import PG_ADMIN_URL, machine_note, pct, scratch_store_url

from partition_notify.app import build_app
from partition_notify.http.store import HttpStore

ROOT = Path(__file__).resolve().parents[1]
TABLE = "bench.events"


def start_serve(url: str, port: int, log: Path, **extra: str) -> subprocess.Popen[bytes]:
    """A serve with the HTTP API on ``port``; ``extra``: more PN_* variables."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PN_STORE_URL": url,
           "PN_TRANSPORT_URL": "embedded://", "PN_HTTP_BIND": f"127.0.0.1:{port}",
           "PN_HTTP_WAIT_MAX_SECONDS": "600", **extra}
    proc = subprocess.Popen([sys.executable, "-m", "partition_notify.cli", "serve"], cwd=ROOT,
                            env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise SystemExit(f"serve exited: {log.read_text()[-2000:]}")
        time.sleep(0.1)
    raise SystemExit("serve did not become ready in 60 s")


def _cpu(p: psutil.Process) -> float:
    t = p.cpu_times()
    return float(t.user + t.system)


def gauge(base: str, name: str) -> float:
    m = re.search(rf"^{name} (\S+)$", httpx.get(base + "/metrics", timeout=30).text, re.M)
    return float(m.group(1)) if m else 0.0


async def until(predicate: object, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not await asyncio.to_thread(predicate):  # type: ignore[arg-type]
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


async def raw_get(base: str, path: str, token: str) -> int:
    """One GET on its own connection, read to the end: the status.

    Not httpx for the long-polls: its connection pool does O(connections)
    bookkeeping per released connection, which with 1,000 finishing at once
    was most of the measured latency (the SSE streams never release theirs).
    """
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}"
                     "\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        length = re.search(rb"(?i)content-length: *(\d+)", head)
        await reader.readexactly(int(length.group(1)) if length else 0)
        return int(head.split(b" ", 2)[1])
    finally:
        writer.close()


async def http_side(base: str, token: str, n: int, rounds: int, rss: psutil.Process
                    ) -> dict[str, list[float]]:
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=n + 10, max_keepalive_connections=n + 10)
    timeout = httpx.Timeout(600, connect=60)
    out: dict[str, list[float]] = {"poll_p50": [], "poll_p99": [], "sse_p50": [], "sse_p99": []}
    received: dict[int, list[float]] = {}
    async with httpx.AsyncClient(base_url=base, headers=headers, limits=limits,
                                 timeout=timeout) as sse, \
            httpx.AsyncClient(base_url=base, headers=headers, limits=limits,
                              timeout=timeout) as polls:

        async def stream() -> None:
            async with sse.stream("GET", f"/v1/tables/{TABLE}/stream") as r:
                async for line in r.aiter_lines():
                    if line.startswith("id:"):
                        received.setdefault(int(line[3:]), []).append(time.time())

        streams = [asyncio.create_task(stream()) for _ in range(n)]
        await until(lambda: gauge(base, "pn_http_streams") >= n, 300, f"{n} streams")
        out["rss_streams_mb"] = [rss.memory_info().rss / 2**20]
        for r in range(rounds):
            spec = f"datestamp=r{r}"
            times: list[float] = []

            async def poll(spec: str = spec, times: list[float] = times) -> None:
                status = await raw_get(base, f"/v1/tables/{TABLE}/wait?spec={spec}&timeout=600",
                                       token)
                times.append(time.time())
                assert status == 200, status

            tasks = [asyncio.create_task(poll()) for _ in range(n)]
            await until(lambda: gauge(base, "pn_http_waits") >= n, 300, f"{n} long-polls")
            out.setdefault("rss_all_mb", []).append(rss.memory_info().rss / 2**20)
            cpu0, me0 = _cpu(rss), _cpu(psutil.Process())
            t0 = time.time()
            done = await polls.post(f"/v1/tables/{TABLE}/set-done", json={"spec": spec})
            event_id = done.json()["setDone"]["eventId"]
            await asyncio.gather(*tasks)
            await until(lambda e=event_id: len(received.get(e, [])) >= n, 120, "every stream")
            out.setdefault("server_cpu_s", []).append(_cpu(rss) - cpu0)
            out.setdefault("client_cpu_s", []).append(_cpu(psutil.Process()) - me0)
            lat_p = [t - t0 for t in times]
            lat_s = [t - t0 for t in received[event_id]]
            out["poll_p50"].append(pct(lat_p, 50))
            out["poll_p99"].append(pct(lat_p, 99))
            out["sse_p50"].append(pct(lat_s, 50))
            out["sse_p99"].append(pct(lat_s, 99))
            print(f"  round {r}: long-poll p50 {pct(lat_p, 50) * 1000:.1f} ms p99 "
                  f"{pct(lat_p, 99) * 1000:.1f} ms; SSE p50 {pct(lat_s, 50) * 1000:.1f} ms "
                  f"p99 {pct(lat_s, 99) * 1000:.1f} ms; CPU serve {out['server_cpu_s'][-1]:.2f} s, "
                  f"clients {out['client_cpu_s'][-1]:.2f} s", flush=True)
        for t in streams:
            t.cancel()
        await asyncio.gather(*streams, return_exceptions=True)
    return out


def python_side(url: str, n: int, rounds: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"p50": [], "p99": [], "rss_mb": []}
    me = psutil.Process()
    with build_app(store_url=url, transport_url="embedded://") as app, app.subscriber() as sub:
        idle = me.memory_info().rss
        db, name = TABLE.split(".")
        for r in range(rounds):
            spec = f"datestamp=p{r}"
            times: list[float] = []
            lock = threading.Lock()
            ready = threading.Barrier(n + 1)

            def wait(spec: str = spec, times: list[float] = times,
                     ready: threading.Barrier = ready, lock: threading.Lock = lock) -> None:
                ready.wait(300)
                sub.wait_for_set_done(db, name, spec, timeout=600)
                with lock:
                    times.append(time.time())

            threads = [threading.Thread(target=wait, daemon=True) for _ in range(n)]
            for t in threads:
                t.start()
            ready.wait(300)
            # Every wait has subscribed once the subscriber holds n subscriptions.
            end = time.monotonic() + 300
            while len(sub._subs) < n and time.monotonic() < end:
                time.sleep(0.05)
            out["rss_mb"].append((me.memory_info().rss - idle) / 2**20)
            cpu0 = _cpu(me)
            t0 = time.time()
            app.publisher.send_mark_set_done(db, name, spec)
            for t in threads:
                t.join(300)
            out.setdefault("cpu_s", []).append(_cpu(me) - cpu0)
            lat = [t - t0 for t in times]
            out["p50"].append(pct(lat, 50))
            out["p99"].append(pct(lat, 99))
            print(f"  round {r}: Python wait p50 {pct(lat, 50) * 1000:.1f} ms p99 "
                  f"{pct(lat, 99) * 1000:.1f} ms; CPU {out['cpu_s'][-1]:.2f} s", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    args = ap.parse_args()
    print(machine_note())
    with scratch_store_url(args.backend, PG_ADMIN_URL) as url:
        app = build_app(store_url=url, transport_url="embedded://")
        app.publisher.register_table(*TABLE.split("."), ["datestamp"])
        token = HttpStore(app.store).create_token("bench", "write")[1]
        app.close()
        port = 18000 + os.getpid() % 1000
        log = Path(tempfile.mkdtemp(prefix="pn-bench-")) / "serve.log"
        proc = start_serve(url, port, log)
        try:
            ps = psutil.Process(proc.pid)
            idle_mb = ps.memory_info().rss / 2**20
            print(f"HTTP: serve idle RSS {idle_mb:.0f} MB; {args.clients} SSE streams + "
                  f"{args.clients} long-polls, {args.rounds} rounds", flush=True)
            h = asyncio.run(http_side(f"http://127.0.0.1:{port}", token, args.clients,
                                      args.rounds, ps))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
        print(f"Python subscriber: {args.clients} threads in wait_for_set_done", flush=True)
        p = python_side(url, args.clients, args.rounds)
    med = statistics.median
    print()
    print(f"{'':34}{'p50 ms':>10}{'p99 ms':>10}{'vs Python p50':>15}")
    for label, p50, p99 in [
        (f"HTTP long-poll x{args.clients}", med(h["poll_p50"]), med(h["poll_p99"])),
        (f"HTTP SSE x{args.clients}", med(h["sse_p50"]), med(h["sse_p99"])),
        (f"Python wait_for_set_done x{args.clients}", med(p["p50"]), med(p["p99"])),
    ]:
        print(f"{label:34}{p50 * 1000:10.1f}{p99 * 1000:10.1f}{p50 / med(p['p50']):14.2f}x")
    print(f"RSS: serve idle {idle_mb:.0f} MB; with {args.clients} streams "
          f"{h['rss_streams_mb'][0]:.0f} MB; with streams + long-polls "
          f"{med(h['rss_all_mb']):.0f} MB. Python waits: +{med(p['rss_mb']):.0f} MB over idle")
    print(f"CPU per round (one set-done to every client): serve {med(h['server_cpu_s']):.2f} s, "
          f"HTTP clients {med(h['client_cpu_s']):.2f} s; Python subscriber process "
          f"{med(p['cpu_s']):.2f} s")


if __name__ == "__main__":
    main()
