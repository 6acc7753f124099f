"""Client CPU per durable publish of two source trees, interleaved round by round.

    eval "$(bash scripts/services.sh env)"
    python bench/durable_ab.py --before /work/main=/work/main/.venv/bin/python \\
                               --after /work/wt/x=/work/wt/x/.venv/bin/python [--rounds 16 --n 300]

Why: bench/durable_publish.py runs one tree per process, and on a shared machine the
load moves between two runs a minute apart by more than a pass's cut. Here each tree
runs in its own long-lived process (its own sources on ``PYTHONPATH``, its own venv,
its own scratch SQLite store, the same broker) and the two take turns: round r runs
--n ``send_mark_set_done`` calls in one, then in the other (the order alternating),
so both see the same load. Printed: medians over the rounds of the publishing
thread's CPU (``time.thread_time``), the process's CPU (``time.process_time``: with
the STOMP receiver thread and the mark flusher) and the wall time, per publish.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def child(n_warm: int) -> None:
    """One tree's side: warm up, then answer each line ``N`` with three figures."""
    sys.path.insert(0, HERE)
    from brokers_stomp import app_for

    args = argparse.Namespace(url=os.environ.get("PN_TEST_STOMP_URL", "stomp://127.0.0.1:61613"),
                              user=os.environ.get("PN_TEST_BROKER_USERNAME", "pn_service"),
                              password=os.environ.get("PN_TEST_BROKER_PASSWORD", ""))
    app = app_for(args, f"sqlite:///{tempfile.mkdtemp(prefix='pn-bench-ab-')}/store.db")
    pub = app.publisher
    pub.register_table("bench", "ab", ["datestamp"])
    k = 0
    for k in range(n_warm):
        pub.send_mark_set_done("bench", "ab", f"datestamp=w{k}")
    print("ready", flush=True)
    for line in sys.stdin:
        n = int(line)
        t, p, w = time.thread_time(), time.process_time(), time.perf_counter()
        for _ in range(n):
            k += 1
            pub.send_mark_set_done("bench", "ab", f"datestamp=d{k}")
        print((time.thread_time() - t) / n * 1e6, (time.process_time() - p) / n * 1e6,
              (time.perf_counter() - w) / n * 1e6, flush=True)
    app.close()


def start(tree: str, warm: int) -> subprocess.Popen[str]:
    root, _, python = tree.partition("=")
    proc = subprocess.Popen([python or sys.executable, os.path.abspath(__file__), "--child",
                             "--warm", str(warm)],
                            cwd=root, env={**os.environ, "PYTHONPATH": root},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", tree
    return proc


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--before", help="ROOT=PYTHON: the tree measured first in round 0")
    p.add_argument("--after", help="ROOT=PYTHON")
    p.add_argument("--rounds", type=int, default=16)
    p.add_argument("--n", type=int, default=300, help="publishes per round and tree")
    p.add_argument("--warm", type=int, default=300)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.warm)
        return
    procs = {"before": start(args.before, args.warm), "after": start(args.after, args.warm)}
    figures: dict[str, list[tuple[float, ...]]] = {name: [] for name in procs}
    load0 = os.getloadavg()
    for r in range(args.rounds):
        for name in (list(procs) if r % 2 == 0 else list(reversed(procs))):
            proc = procs[name]
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(f"{args.n}\n")
            proc.stdin.flush()
            figures[name].append(tuple(map(float, proc.stdout.readline().split())))
    for proc in procs.values():
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
    print(f"durable publish, one at a time, interleaved: medians of {args.rounds} rounds "
          f"of {args.n} per tree (per publish)")
    for name, rows in figures.items():
        thread, process, wall = (statistics.median(col) for col in zip(*rows, strict=True))
        print(f"  {name:7} publishing thread CPU {thread:5.0f} us   process CPU "
              f"{process:5.0f} us   wall {wall:6.0f} us")
    load1 = os.getloadavg()
    print(f"load average {load0[0]:.1f} before, {load1[0]:.1f} after (1 min)")


if __name__ == "__main__":
    main()
