"""``/ui`` server-side render time with 10,000 tables and 10,000 partitions.

    PYTHONPATH=. python bench/ui_render.py [--tables 10000] [--partitions 10000]
        [--rounds 40] [--backend sqlite|postgresql] [--before DIR]

A real ``partition-notify serve`` (PN_HTTP_BIND) on a store holding
``--tables`` registered tables, one of which has ``--partitions`` partitions
(100 values of ``datestamp`` x N/100 regions) and a set-done per other day.
Pages: the tables overview (page 1 and a name filter), the board of the big
table, its events page; beside them the baseline yardstick, the JSON API's
``GET /v1/tables`` (every table), which measures how loaded the machine is.

``--before DIR``: a checkout of the code before a change is served too, by
``--before-python`` (that checkout's own venv: an editable install maps
``partition_notify.store`` to its tree, so another venv would mix the two),
on a copy of the same store (stamped at that code's newest migration; later
migrations only add tables); every round asks both servers each page,
alternating which goes first.

Reported per page and server: p50 and p95 (ms) of the full HTTP round trip
over ``--rounds`` rounds, and of what the server says in ``Server-Timing``
(``app``: its wall time for reads plus render; ``cpu``: the CPU time of the
thread that rendered). Goal (issue 19): p95 < 300 ms. The load average is
printed before and after: on a shared machine the wall times are inflated.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import httpx
from core_common import machine_note, pct, scratch_store_url
from sqlalchemy import create_engine, text

from partition_notify.app import build_app
from partition_notify.http.store import HttpStore
from tests.support.net import free_port

BIG = ("bench", "big")
PAGES = ("/v1/tables", "/ui/tables", "/ui/tables?q=db042&page=2", "/ui/tables/bench.big",
         "/ui/tables/bench.big/events")
NOTES = {"/v1/tables": "(yardstick: JSON, all tables)"}


def seed(url: str, tables: int, partitions: int) -> str:
    app = build_app(store_url=url, transport_url="embedded://")
    try:
        pub = app.publisher
        pub.register_table(*BIG, ["datestamp", "region"])
        for i in range(tables - 1):
            pub.register_table(f"db{i % 100:03d}", f"t{i:05d}", ["ds"])
        regions = max(1, partitions // 100)
        for d in range(100):
            day = f"2026{1 + d // 28:02d}{1 + d % 28:02d}"
            pub.announce_partitions(*BIG, [{"datestamp": day, "region": f"r{r:03d}"}
                                           for r in range(regions)])
            if d % 2 == 0:
                pub.send_mark_set_done(*BIG, {"datestamp": day})
        return HttpStore(app.store).create_token("bench", "read")[1]
    finally:
        app.close()


def copy_store(url: str, backend: str, before: Path) -> str:
    """The seeded store again, for the code in ``before``, at that code's newest migration."""
    head = max(p.name.split("_", 1)[0] for p in (before / "store/migrations/versions").glob(
        "[0-9]*_*.py"))
    if backend == "sqlite":
        src = Path(url.removeprefix("sqlite:///"))
        dst = src.with_name("before.db")
        shutil.copyfile(src, dst)
        copy = f"sqlite:///{dst}"
    else:
        base, name = url.rsplit("/", 1)
        admin = create_engine(f"{base}/postgres", isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}_before" TEMPLATE "{name}"'))
        admin.dispose()
        copy = f"{url}_before"
    engine = create_engine(copy)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": head})
    engine.dispose()
    return copy


def start_serve(python: str, root: Path, url: str, port: int, log: Path
                ) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PN_")}
    env |= {"PYTHONPATH": str(root), "PN_STORE_URL": url, "PN_TRANSPORT_URL": "embedded://",
            "PN_HTTP_BIND": f"127.0.0.1:{port}"}
    proc = subprocess.Popen([python, "-m", "partition_notify.cli", "serve"], cwd=root,
                            env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise SystemExit(f"serve exited: {log.read_text()[-2000:]}")
        time.sleep(0.1)
    raise SystemExit("serve did not become ready in 120 s")


def server_timing(header: str) -> dict[str, float]:
    return {k: float(v) for k, v in re.findall(r"(\w+);dur=([\d.]+)", header)}


def run(clients: dict[str, httpx.Client], rounds: int) -> dict[tuple[str, str, str], list[float]]:
    """Samples per (page, server, measure); each round asks every server every page."""
    samples: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    names = list(clients)
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        for path in PAGES:
            for name in order:
                resp, ms = _get(clients[name], path)
                samples[(path, name, "http")].append(ms)
                if resp.status_code != 200:
                    raise SystemExit(f"{name} {path}: {resp.status_code} {resp.text[:300]}")
                for k, v in server_timing(resp.headers.get("server-timing", "")).items():
                    samples[(path, name, k)].append(v)
    return samples


def _get(client: httpx.Client, path: str) -> tuple[httpx.Response, float]:
    """The response and its round trip in ms. A kept-alive connection the server
    closed while the other server was asked (uvicorn closes idle ones after 5 s)
    is opened again and the request timed again."""
    for attempt in (1, 2):
        t0 = time.perf_counter()
        try:
            resp = client.get(path)
        except httpx.TransportError:
            if attempt == 2:
                raise
            continue
        return resp, (time.perf_counter() - t0) * 1000
    raise AssertionError("unreachable")


def report(samples: dict[tuple[str, str, str], list[float]], names: list[str]) -> None:
    print(f"{'page':<34} {'code':<7} {'http p50':>9} {'p95':>7} {'app p50':>8} {'p95':>7} "
          f"{'cpu p50':>8} {'p95':>7}")
    for path in PAGES:
        for name in names:
            cols = []
            for m in ("http", "app", "cpu"):
                s = samples.get((path, name, m))
                cols += [f"{pct(s, 50):.1f}", f"{pct(s, 95):.1f}"] if s else ["-", "-"]
            print(f"{path:<34} {name:<7} {cols[0]:>9} {cols[1]:>7} {cols[2]:>8} {cols[3]:>7} "
                  f"{cols[4]:>8} {cols[5]:>7}  {NOTES.get(path, '')}".rstrip())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    ap.add_argument("--before", type=Path, help="a checkout of the code before, served too")
    ap.add_argument("--before-python", default=sys.executable,
                    help="the interpreter of --before's own venv")
    args = ap.parse_args()
    with scratch_store_url(args.backend) as url:
        t0 = time.monotonic()
        token = seed(url, args.tables, args.partitions)
        print(f"seeded {args.tables} tables, {args.partitions} partitions in "
              f"{time.monotonic() - t0:.0f} s ({args.backend})", file=sys.stderr)
        roots = {"after": (sys.executable, Path(__file__).resolve().parents[1], url)}
        if args.before is not None:
            roots["before"] = (args.before_python, args.before.resolve(),
                               copy_store(url, args.backend, args.before))
        procs, clients = [], {}
        logs = Path(tempfile.mkdtemp(prefix="pn-ui-bench-"))
        try:
            for name, (python, root, store) in roots.items():
                port = free_port()
                procs.append(start_serve(python, root, store, port, logs / f"{name}.log"))
                clients[name] = httpx.Client(
                    base_url=f"http://127.0.0.1:{port}", timeout=30,
                    cookies={"pn_ui_token": token}, headers={"Authorization": f"Bearer {token}"})
            for c in clients.values():  # warm-up: templates compiled, caches filled
                for path in PAGES:
                    c.get(path)
            print(f"# ui_render ({args.backend}): before the run {machine_note()}")
            samples = run(clients, args.rounds)
            print(f"# {args.rounds} rounds, ms; after the run {machine_note()}")
            report(samples, list(clients))
        finally:
            for c in clients.values():
                c.close()
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(60)
                except subprocess.TimeoutExpired:
                    p.kill()  # a loaded machine: serve's orderly stop took over a minute
                    p.wait(10)
            if args.before is not None and args.backend == "postgresql":
                drop_copy(url)


def drop_copy(url: str) -> None:
    base, name = url.rsplit("/", 1)
    admin = create_engine(f"{base}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}_before" WITH (FORCE)'))
    admin.dispose()


if __name__ == "__main__":
    main()
