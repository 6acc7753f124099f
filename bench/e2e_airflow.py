"""Spark commit -> ``serve`` -> Airflow acts, with real processes; ours vs Airflow's share.

    PYTHONPATH=$PWD .venv/bin/python bench/e2e_airflow.py [--rounds 5] [--poke-interval S]
        [--store-url POSTGRES_ADMIN_URL] [--trace]

(needs ``.venv-sched``: ``bash scripts/bootstrap_sched.sh``). Started here,
each in its own process group and all stopped at the end (also on Ctrl-C or a
failure): ``partition-notify serve`` with the HTTP API on a temporary SQLite
store (``--store-url``: a new database on that PostgreSQL server; embedded
transport), one Spark driver (``bench/e2e_spark_child.py``, core venv) with
the commit protocol on, and Airflow 3's ``scheduler``,
``triggerer``, ``dag-processor`` and ``api-server`` (LocalExecutor, SQLite,
a temporary AIRFLOW_HOME with generated DAGs, Airflow's default timings).

Each round: trigger a run of ``pn_e2e_sensor`` (``conf.day`` = a new
partition) with two sensors for ``datestamp=<day>``: ours
(``PartitionSetDoneSensor``, deferrable) and Airflow's stock ``FileSensor``
on the partition directory (poke mode, default ``poke_interval``: the
baseline). Once ours is deferred with its trigger started and the stock
sensor runs, wait until a uniformly random phase of the poke interval (so the
baseline is not flattered or penalised by a fixed phase), then the Spark job
appends to the partition and marks it done. ``pn_e2e_watched`` is scheduled
on an asset whose ``AssetWatcher`` runs our ``PartitionSetDoneEventTrigger``.

Times (one wall clock: every process runs on this machine):

* t0 = the Spark job's commit: ``committedAtMs``, taken by the driver when
  ``commitJob`` returned, carried as the set-done's ``revision``;
* logged = the set-done's ``timestampMs`` (``serve`` logged it);
* t1 = "Trigger fired event" in the triggerer's log (the trigger yielded);
* sensor: the task instance's ``scheduled_when`` (Airflow stored the event),
  ``queued_when``, ``start_date`` and ``end_date`` = t2 (success);
* watcher: the asset event's ``timestamp``, the DAG run's ``queued_at`` and
  ``start_date`` = t2;
* baseline: the ``FileSensor`` task's ``end_date``.

Ours = t1 - t0; Airflow's = t2 - t1. Airflow's stored times come from its
REST API, asked only once both our triggers fired: until then the bench reads
local files (our store, the triggerer's and the trigger's logs), so its own
requests do not take the CPUs of the window it measures (docs/benchmarks.md,
Pass 9).

``--trace`` (bench/cpu_trace.py): from each round's write to its end, sample every
started process group's CPU time and the machine's runnable tasks every tick;
print, per round, who used the CPUs between t0 and logged and between logged and
our later trigger's fired (a slow round is then either our processes' own work or
a neighbour's), and where the request's first byte reached ``serve`` (the
driver talks to serve through bench/timing_relay.py): the driver's part and
serve's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core_common import machine_note, scratch_store_url
from cpu_trace import CpuTrace
from cpu_trace import report as trace_report
from e2e_airflow_stack import (
    Airflow,
    airflow_env,
    start_airflow,
    write_dags,
)
from e2e_procs import Procs, bench_dir, wait_for
from e2e_report import fired_times, log_time, loop_blocks, ours_by_asking, report
from e2e_writer import ROOT, start_writer

#: BaseSensorOperator's poke_interval default (the DAG leaves it unset unless --poke-interval).
AIRFLOW_DEFAULT_POKE = 60.0
#: How long a round may take past one poke interval (task start-up on a loaded machine).
ROUND_SLACK_SECONDS = 240.0
WATCH_CURSOR = "bench-e2e"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--poke-interval", type=float, default=None,
                   help=f"the stock sensor's (default: Airflow's, {AIRFLOW_DEFAULT_POKE:g} s)")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (logs, DBs)")
    p.add_argument("--seed", type=int, default=None, help="seed of the random write phase")
    p.add_argument("--json", type=Path, default=None, help="also write the raw rounds here")
    p.add_argument("--store-url", default=None, metavar="POSTGRES_ADMIN_URL",
                   help="our store on PostgreSQL: a new database on this server for the run, "
                   "dropped afterwards (e.g. postgresql+psycopg://postgres@127.0.0.1:5432/"
                   "postgres); default: a temporary SQLite file")
    p.add_argument("--trace", action="store_true",
                   help="per round, each process group's CPU from commit to logged and "
                   "from logged to our triggers' fired")
    p.add_argument("--compare-asking", action="store_true",
                   help="odd rounds ask Airflow's API at once after the write (as before "
                   "Pass 9), even rounds once both triggers fired; ours printed for each")
    args = p.parse_args()
    if args.rounds < 1:
        p.error(f"--rounds {args.rounds}: expected at least 1")
    if args.poke_interval is not None and args.poke_interval <= 0:
        p.error(f"--poke-interval {args.poke_interval}: expected > 0 seconds")
    return args


class Bench:
    def __init__(self, args: argparse.Namespace, tmp: Path, procs: Procs,
                 store_url: str | None) -> None:
        self.args, self.tmp, self.procs, self.pn_store_url = args, tmp, procs, store_url
        self.poke = args.poke_interval or AIRFLOW_DEFAULT_POKE
        self.rng = random.Random(args.seed)

    def setup(self) -> None:
        from tests.support.net import free_port

        sched = ROOT / ".venv-sched" / "bin"
        if not (sched / "airflow").exists():
            raise SystemExit("no .venv-sched: run `bash scripts/bootstrap_sched.sh` first")
        self.writer = start_writer(self.procs, self.tmp, self.pn_store_url,
                                   timed=self.args.trace)
        self.app, self.store_url = self.writer.app, self.writer.store_url
        self.table_path = self.writer.table_path
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        home = self.tmp / "airflow"
        home.mkdir()
        write_dags(home / "dags", self.table_path, self.poke + ROUND_SLACK_SECONDS,
                   self.args.poke_interval)
        password = uuid.uuid4().hex
        pw_file = home / "passwords.json"
        pw_file.write_text(json.dumps({"pn-bench": password}))
        af_port = free_port()
        af_env = airflow_env(env, home, af_port, self.store_url, pw_file)
        self.airflow: Airflow = start_airflow(self.procs, sched, home, af_port, af_env, password)
        from partition_notify.store.cursors import Cursors

        cursors = Cursors(self.app.store)
        # The watcher's trigger opens its cursor when armed; a new cursor starts at the log's
        # end, so a set-done before that would not fire it.
        wait_for(lambda: cursors.get(WATCH_CURSOR) is not None, 240.0,
                 "the AssetWatcher's trigger to arm", self.procs.check_alive)

    def round(self, i: int) -> dict[str, Any]:
        day = f"r{i:02d}{uuid.uuid4().hex[:6]}"
        run_id = f"e2e_{day}"
        known_watched = {r["dag_run_id"] for r in self.airflow.watched_runs()}
        self.airflow.trigger_sensor_run(run_id, day)
        deadline_s = self.poke + ROUND_SLACK_SECONDS

        def armed() -> bool:
            tis = self.airflow.task_instances(run_id)
            ours, stock = tis.get("ours", {}), tis.get("stock", {})
            return (ours.get("state") == "deferred" and stock.get("state") == "running"
                    and log_time(self.airflow.task_log(run_id, "ours", trigger=True),
                                 " starting") is not None
                    and log_time(self.airflow.task_log(run_id, "stock"), "Poking for") is not None)

        wait_for(armed, deadline_s, f"round {i}: our sensor deferred with its trigger started, "
                 "the FileSensor poking", self.procs.check_alive)
        first_poke = log_time(self.airflow.task_log(run_id, "stock"), "Poking for")
        assert first_poke is not None
        # A uniformly random phase of the poke interval: the stock sensor's latency is then
        # what a write at a random moment sees, neither its best nor its worst case.
        target = first_poke + self.rng.uniform(0.0, self.poke)
        while target < time.time() + 1.0:
            target += self.poke
        time.sleep(target - time.time())  # pacing the workload, not waiting for an event
        trace = self._trace()
        wrote = self.writer.write(day, deadline_s)
        asked = "at once" if self.args.compare_asking and i % 2 else "after fired"
        if asked == "after fired":
            self._wait_fired(day, run_id, deadline_s)
        done = self._wait_done(run_id, day, known_watched, deadline_s)
        if trace is not None:  # kept to the end: the report reads logged -> fired too
            trace.stop()
        return {"day": day, "run_id": run_id, "wrote": wrote, "trace": trace, "asked": asked,
                **done}

    def _trace(self) -> CpuTrace | None:
        if not self.args.trace:
            return None
        groups = {name: proc.pid for name, proc in self.procs.started}
        trace = CpuTrace({**groups, "bench": os.getpgrp()})
        trace.start()
        return trace

    def _wait_fired(self, day: str, run_id: str, timeout: float) -> None:
        """Until both our triggers fired, read only local files: the store and the logs.

        Answering the bench's REST calls took Airflow's api-server 10-30 ms of CPU inside
        the measured window in every round of a traced run that asked at once
        (``--trace``, docs/benchmarks.md Pass 9): CPUs the window needs. Nothing read
        from Airflow's API depends on when it is read, so the bench asks it once our
        share has ended.
        """
        event_id: list[int] = []  # read from the store once it is logged, not every poll

        def fired() -> bool:
            if not event_id:
                ev = self.writer.find_set_done(day)
                if ev is None:
                    return False
                event_id.append(ev["eventId"])
            f = fired_times(self.airflow, self.procs.log_text("triggerer"), event_id[0], run_id)
            return f["sensor"] is not None and f["watcher"] is not None

        wait_for(fired, timeout, f"{run_id}: both our triggers to fire", self.procs.check_alive)

    def _wait_done(self, run_id: str, day: str, known: set[str],
                   timeout: float) -> dict[str, Any]:
        found: dict[str, Any] = {}

        def finished() -> bool:
            if "tis" not in found:
                tis = self.airflow.task_instances(run_id)
                states = {t: tis[t]["state"] for t in ("ours", "stock")}
                if "failed" in states.values():
                    raise RuntimeError(f"{run_id}: a sensor failed: {states}")
                if all(s == "success" for s in states.values()):
                    found["tis"] = tis
            if "watched" not in found:
                for run in self.airflow.watched_runs():
                    if run["dag_run_id"] in known or run["start_date"] is None:
                        continue
                    events = self.airflow.upstream_events(run["dag_run_id"])
                    specs = [e["extra"]["payload"]["spec"] for e in events]
                    if f"datestamp={day}" in specs:
                        found["watched"] = {"run": run, "events": events}
            return len(found) == 2

        wait_for(finished, timeout, f"{run_id}: both sensors to succeed and the watched "
                 "DAG run to start", self.procs.check_alive)
        return found


def main() -> int:
    args = parse_args()
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(bench_dir("pn-e2e-airflow-", args.keep))
        store_url = (None if args.store_url is None else
                     stack.enter_context(scratch_store_url("postgresql", args.store_url)))
        print(f"# bench/e2e_airflow.py: {args.rounds} rounds; temp dir {tmp}; our store: "
              f"{'SQLite in the temp dir' if store_url is None else store_url}")
        print(machine_note(), flush=True)
        rows: list[dict[str, Any]] = []
        with Procs(tmp / "logs") as procs:
            bench = Bench(args, tmp, procs, store_url)
            t = time.monotonic()
            bench.setup()
            print(f"started serve, Spark and Airflow's four processes in "
                  f"{time.monotonic() - t:.0f} s", flush=True)
            for i in range(1, args.rounds + 1):
                r = bench.round(i)
                r["event"] = bench.writer.set_done_of(r["day"])
                r["fired"] = fired_times(bench.airflow, procs.log_text("triggerer"),
                                         r["event"]["eventId"], r["run_id"])
                r["resumed"] = log_time(bench.airflow.task_log(r["run_id"], "ours"), "set-done ",
                                        after=r["event"]["revision"] / 1000)
                r["stock_detect"] = log_time(bench.airflow.task_log(r["run_id"], "stock"),
                                             "Poking for", after=r["event"]["revision"] / 1000)
                rows.append(r)
                print(f"round {i}: done ({machine_note().split(', ', 1)[1]})", flush=True)
            bench.app.close()
            triggerer_log = procs.log_text("triggerer")
        if args.trace:
            trace_report(rows, bench.writer.relay)
            if bench.writer.relay is not None:
                bench.writer.relay.close()
        if args.json is not None:
            args.json.write_text(json.dumps(rows, indent=1, default=str))
        report(rows, bench.poke, args.poke_interval is None)
        if args.compare_asking:
            ours_by_asking(rows)
        blocks = loop_blocks(triggerer_log)
        print(f"triggerer: Airflow warned {len(blocks)} time(s) that its event loop was blocked"
              + (f", longest {max(b for _, b in blocks):.2f} s: "
                 + ", ".join(f"{b:.2f} s at {time.strftime('%H:%M:%S', time.gmtime(t))}Z"
                             for t, b in blocks) if blocks else ""))
        print(machine_note(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
