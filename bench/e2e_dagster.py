"""Spark commit -> ``serve`` -> a Dagster sensor tick, with real processes; ours vs Dagster's share.

    PYTHONPATH=$PWD .venv/bin/python bench/e2e_dagster.py [--rounds 5] [--interval S]

(needs ``.venv-sched``: ``bash scripts/bootstrap_sched.sh``). Started here,
each in its own process group and all stopped at the end (also on Ctrl-C or a
failure): ``partition-notify serve`` with the HTTP API on a temporary SQLite
store and one Spark driver with the commit protocol on (bench/e2e_writer.py,
as for bench/e2e_airflow.py), ``dagster-daemon run`` on a temporary
DAGSTER_HOME (bench/e2e_dagster_stack.py: our ``partition_set_done_sensor``
and a stock directory-listing sensor, both RUNNING, same interval) and a
read-only reader of the instance (bench/e2e_dagster_reader.py).

Each round: wait a uniformly random part of the interval (so neither sensor
gets a fixed phase), then the Spark job appends to a new partition
``datestamp=<day>`` and marks it done; wait (deadline) until both sensors
have materialized it. Times, one wall clock:

* t0 = the job's commit (``committedAtMs``, the set-done's ``revision``);
* logged = the set-done's ``timestampMs``: from here our sensor can read it;
* tick = the start of the sensor tick that reported it (t1);
* stored = the materialization's timestamp in Dagster's event log (t2).

Ours = logged - t0. Dagster's = stored - logged: the wait for the next tick
(``minimum_interval_seconds``, checked by the daemon every 5 s) and the tick
itself (the code server runs the sensor, which includes our store read, then
the daemon stores the materialization). The sensors request no run: a run
comes from an ``AutomationCondition`` evaluation (its own sensor and interval)
or an asset sensor, the same for both paths, so it is left out.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core_common import machine_note
from e2e_dagster_stack import Reader, start_dagster, write_home
from e2e_procs import Procs, bench_dir, wait_for
from e2e_report import fmt, per_round
from e2e_writer import ROOT, TABLE, Writer, start_writer

#: Dagster's default minimum_interval_seconds, and our sensor's (DEFAULT_INTERVAL_SECONDS).
DAGSTER_DEFAULT_INTERVAL = 30
#: How long a round may wait past two intervals (the daemon's loop, a loaded machine).
ROUND_SLACK_SECONDS = 120.0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--interval", type=int, default=DAGSTER_DEFAULT_INTERVAL,
                   help="both sensors' minimum_interval_seconds (default: Dagster's, "
                        f"{DAGSTER_DEFAULT_INTERVAL} s)")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (logs, DBs)")
    p.add_argument("--seed", type=int, default=None, help="seed of the random write phase")
    p.add_argument("--json", type=Path, default=None, help="also write the raw rounds here")
    args = p.parse_args()
    if args.rounds < 1:
        p.error(f"--rounds {args.rounds}: expected at least 1")
    if args.interval < 1:
        p.error(f"--interval {args.interval}: expected >= 1 second")
    return args


def setup(procs: Procs, tmp: Path, interval: int) -> tuple[Writer, Reader]:
    sched = ROOT / ".venv-sched" / "bin"
    if not (sched / "dagster-daemon").exists():
        raise SystemExit("no .venv-sched: run `bash scripts/bootstrap_sched.sh` first")
    writer = start_writer(procs, tmp)
    home = tmp / "dagster"
    workspace = write_home(home, writer.table_path, TABLE, interval)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DAGSTER_HOME": str(home),
           "PN_STORE_URL": writer.store_url, "PN_TRANSPORT_URL": "embedded://"}
    reader = start_dagster(procs, sched, home, workspace, env,
                           ROOT / "bench" / "e2e_dagster_reader.py")
    return writer, reader


def one_round(i: int, writer: Writer, reader: Reader, procs: Procs, interval: int,
              rng: random.Random) -> dict[str, Any]:
    day = f"r{i:02d}{uuid.uuid4().hex[:6]}"
    time.sleep(rng.uniform(0.0, interval))  # pacing the workload: a random tick phase
    deadline = 2 * interval + ROUND_SLACK_SECONDS
    wrote = writer.write(day, deadline)
    event = writer.wait_set_done(day, deadline, procs.check_alive)
    found: dict[str, Any] = {}

    def both() -> bool:
        found.update(reader.ask("find", event["eventId"], day))
        return found.get("ours") is not None and found.get("stock") is not None

    wait_for(both, deadline, f"round {i}: both sensors to materialize datestamp={day}",
             procs.check_alive)
    return {"day": day, "wrote": wrote, "event": event, **found}


def columns(r: dict[str, Any]) -> dict[str, dict[str, float]]:
    t0 = r["event"]["revision"] / 1000.0
    logged = r["event"]["timestampMs"] / 1000.0
    o, s = r["ours"], r["stock"]

    def d(a: float | None, b: float | None) -> float:
        return float("nan") if a is None or b is None else a - b

    return {
        "ours": {"OURS commit->logged": d(logged, t0), "logged->tick": d(o["tick"], logged),
                 "tick->stored": d(o["stored"], o["tick"]),
                 "DAGSTER": d(o["stored"], logged), "total": d(o["stored"], t0)},
        "stock": {"commit->tick": d(s["tick"], t0), "tick->stored": d(s["stored"], s["tick"]),
                  "total": d(s["stored"], t0)},
        "ticks": {"ours prev->tick": d(o["tick"], o["prev_tick"]),
                  "stock prev->tick": d(s["tick"], s["prev_tick"]),
                  "df.write call": d(r["wrote"]["returned"], r["wrote"]["called"])},
    }


def report(rows: list[dict[str, Any]], interval: int) -> dict[str, Any]:
    cols = [columns(r) for r in rows]
    summary = per_round(cols, ("ours", "stock", "ticks"))
    o, s = summary["ours"], summary["stock"]
    print(f"\n# medians of {len(rows)} rounds (max = p99 at this n); both sensors "
          f"minimum_interval_seconds={interval}"
          + (" (Dagster's default and ours)" if interval == DAGSTER_DEFAULT_INTERVAL else ""))
    print(f"ours     commit -> set-done logged (readable by the sensor): "
          f"{fmt(o['median']['OURS commit->logged'])} "
          f"(max {fmt(o['max']['OURS commit->logged'])})")
    print(f"dagster  logged -> materialization stored {fmt(o['median']['DAGSTER'])} "
          f"(max {fmt(o['max']['DAGSTER'])}): tick wait {fmt(o['median']['logged->tick'])}, "
          f"tick {fmt(o['median']['tick->stored'])}")
    print(f"total    commit -> our sensor's materialization {fmt(o['median']['total'])} "
          f"(max {fmt(o['max']['total'])})")
    print(f"baseline commit -> stock directory sensor's materialization "
          f"{fmt(s['median']['total'])} (max {fmt(s['max']['total'])}); "
          f"ratio baseline/ours total: {s['median']['total'] / o['median']['total']:.2f}x")
    worst = o["max"]["OURS commit->logged"]
    print(f"goal     ours <= 50 ms p99: worst round {fmt(worst)} -> "
          f"{'met' if worst <= 0.050 else 'NOT met'} on this machine at this load")
    return summary


def main() -> int:
    args = parse_args()
    with bench_dir("pn-e2e-dagster-", args.keep) as tmp:
        print(f"# bench/e2e_dagster.py: {args.rounds} rounds; temp dir {tmp}")
        print(machine_note(), flush=True)
        rng = random.Random(args.seed)
        rows: list[dict[str, Any]] = []
        with Procs(tmp / "logs") as procs:
            t = time.monotonic()
            writer, reader = setup(procs, tmp, args.interval)
            print(f"started serve, Spark, dagster-daemon and the reader in "
                  f"{time.monotonic() - t:.0f} s", flush=True)
            for i in range(1, args.rounds + 1):
                rows.append(one_round(i, writer, reader, procs, args.interval, rng))
                print(f"round {i}: done ({machine_note().split(', ', 1)[1]})", flush=True)
            writer.app.close()
        if args.json is not None:
            args.json.write_text(json.dumps(rows, indent=1, default=str))
        report(rows, args.interval)
        print(machine_note(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
