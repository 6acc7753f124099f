"""``serve``'s part of a Spark commit: ``POST /v1/commits`` request -> answer, by tree.

    PYTHONPATH=$PWD .venv/bin/python bench/serve_commit.py [--rounds 5] [--n 40] \
        [--before-python /path/to/old/tree/.venv/bin/python]

One real ``partition-notify serve`` per tree (HTTP API, its own temporary SQLite
store, the table registered with a location, a write token), started with that
tree's Python. This process posts commit manifests as the JVM commit protocol
does (one partition and the job's set-done, ``Idempotency-Key`` = job id) on one
kept-alive connection, ``--n`` per round, 50 ms apart (commits are not
pipelined). Rounds alternate between the trees (ABAB).

The baseline, in the same rounds and on the same connection: ``GET /healthz``,
an async route that touches nothing: the HTTP stack's own round trip. The
figure that matters is commit minus that floor.

Without ``--before-python`` only this tree is measured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core_common import machine_note
from e2e_procs import Procs, http_ok, wait_for

ROOT = Path(__file__).resolve().parents[1]
PAUSE = 0.05


class Side:
    """One tree's ``serve``: its store, table, token and a kept-alive client."""

    def __init__(self, name: str, python: str, tmp: Path, procs: Procs, port: int) -> None:
        import httpx

        self.name = name
        self.table_path = str(tmp / name / "warehouse" / "orders")
        env = {**os.environ, "PN_STORE_URL": f"sqlite:///{tmp / name}/pn-store.db",
               "PN_TRANSPORT_URL": "embedded://", "PN_HTTP_BIND": f"127.0.0.1:{port}"}
        env.pop("PYTHONPATH", None)  # each tree's own installed package
        (tmp / name).mkdir(parents=True)
        cli = [python, "-m", "partition_notify.cli"]

        def run(*args: str) -> str:
            out = subprocess.run([*cli, *args], env=env, capture_output=True, text=True,
                                 timeout=120, check=True)
            return out.stdout

        run("register", "bench.orders", "--keys", "datestamp",
            "--location", f"file:{self.table_path}")
        token = run("token", "create", "--name", "bench", "--role", "write").strip().split()[-1]
        procs.start(f"serve-{name}", [*cli, "serve"], env, cwd=str(tmp))
        self.url = f"http://127.0.0.1:{port}"
        wait_for(lambda: http_ok(f"{self.url}/readyz"), 60.0, f"serve ({name})",
                 procs.check_alive)
        self.client = httpx.Client(timeout=10, headers={"Authorization": f"Bearer {token}"})

    def commit(self, i: int) -> float:
        day = f"d{i:05d}{uuid.uuid4().hex[:6]}"
        job = str(uuid.uuid4())
        body = {"version": 1, "jobId": job, "table": None,
                "outputPath": f"file:{self.table_path}", "overwrite": False,
                "partitions": [{"path": f"datestamp={day}",
                                "location": f"file:{self.table_path}/datestamp={day}"}],
                "deleted": [], "markSetDone": f"datestamp={day}",
                "committedAtMs": int(time.time() * 1000), "sparkAppId": "bench"}
        t = time.perf_counter()
        r = self.client.post(f"{self.url}/v1/commits", json=body,
                             headers={"Idempotency-Key": job})
        took = time.perf_counter() - t
        if r.status_code != 201 or r.json().get("status") != "announced":
            raise RuntimeError(f"{self.name}: {r.status_code} {r.text[:200]}")
        return took

    def floor(self) -> float:
        t = time.perf_counter()
        self.client.get(f"{self.url}/healthz").raise_for_status()
        return time.perf_counter() - t


def one_round(side: Side, n: int, start: int) -> tuple[float, float]:
    """Medians (s) of ``n`` commits and ``n`` floor round trips, interleaved."""
    commits, floors = [], []
    for i in range(n):
        commits.append(side.commit(start + i))
        time.sleep(PAUSE)  # pacing: a commit at a time, as Spark jobs do
        floors.append(side.floor())
    return statistics.median(commits), statistics.median(floors)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--n", type=int, default=40, help="commits per round")
    p.add_argument("--before-python", help="the Python of another tree (its venv)")
    args = p.parse_args()
    from tests.support.net import free_port

    pythons = {"this tree": sys.executable}
    if args.before_python:
        pythons = {"before": args.before_python, **pythons}
    with tempfile.TemporaryDirectory(prefix="pn-serve-commit-") as d, Procs(Path(d)) as procs:
        sides = [Side(f"s{k}", py, Path(d), procs, free_port())
                 for k, py in enumerate(pythons.values())]
        names = list(pythons)
        for side in sides:  # warm-up, not counted
            one_round(side, 5, 0)
        got: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
        print(f"# start: {machine_note()}", flush=True)
        for r in range(args.rounds):
            order = list(zip(names, sides, strict=True))
            for name, side in order if r % 2 == 0 else order[::-1]:
                got[name].append(one_round(side, args.n, 1000 * (r + 1)))
        print(f"# end: {machine_note()}")
    print(f"# POST /v1/commits (1 partition + set-done), request -> answer, ms; "
          f"median per round of {args.n}, then the median of {args.rounds} rounds")
    print(f"{'tree':<12}{'commit':>10}{'floor (GET /healthz)':>24}{'commit - floor':>18}"
          "   per round (commit)")
    for name in names:
        c = statistics.median(x[0] for x in got[name]) * 1000
        f = statistics.median(x[1] for x in got[name]) * 1000
        rounds = " ".join(f"{x[0] * 1000:.1f}" for x in got[name])
        print(f"{name:<12}{c:>10.2f}{f:>24.2f}{c - f:>18.2f}   {rounds}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
