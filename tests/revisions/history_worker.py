"""One process of the concurrency test: random transactions and snapshots, recorded.

Every call is bracketed by ``time.monotonic_ns()`` (one clock for all
processes on Linux), so the checker can order calls of different processes
in real time. The history is written as JSON lines, one file per process.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

TABLES = ("db.t1", "db.t2")
FAMILIES = ("a", "b", "c")
MAX_OPEN = 4


def run(url: str, proc: int, transactions: int, out_path: str, seed: int, barrier: Any) -> None:
    from partition_notify.revisions import RevisionManager
    from partition_notify.store.engine import make_engine

    engine = make_engine(url)
    rm = RevisionManager(engine)
    rng = random.Random(seed)
    history: list[dict[str, Any]] = []
    open_txns: list[Any] = []
    begun = 0

    def record(op: str, call: Any, **fields: Any) -> Any:
        t0 = time.monotonic_ns()
        error = None
        try:
            result = call()
        except Exception as exc:  # recorded; the checker decides what it means
            result, error = None, f"{type(exc).__name__}: {exc}"
        t1 = time.monotonic_ns()
        history.append({"op": op, "proc": proc, "t0": t0, "t1": t1, "error": error, **fields})
        return result

    barrier.wait(120)
    while begun < transactions or open_txns:
        r = rng.random()
        if begun < transactions and (not open_txns or (len(open_txns) < MAX_OPEN and r < 0.45)):
            table = rng.choice(TABLES)
            fams = rng.sample(FAMILIES, rng.randint(1, 2))
            tx = record(
                "begin", lambda t=table, f=fams: rm.begin_write_transaction(t, f, 3600), table=table
            )
            begun += 1
            if tx is not None:
                history[-1].update(rev=tx.revision, families=list(tx.families))
                open_txns.append(tx)
        elif open_txns and (r < 0.8 or begun >= transactions):
            tx = open_txns.pop(rng.randrange(len(open_txns)))
            if rng.random() < 0.75:
                record(
                    "commit",
                    lambda t=tx: rm.commit_write_transaction(t),
                    table=tx.table,
                    rev=tx.revision,
                )
            else:
                record(
                    "abort",
                    lambda t=tx: rm.abort_write_transaction(t),
                    table=tx.table,
                    rev=tx.revision,
                )
        else:
            table = rng.choice(TABLES)
            snap = record("snapshot", lambda t=table: rm.create_snapshot(t), table=table)
            if snap is not None:
                history[-1].update(
                    revisions=dict(snap.revisions),
                    latest=snap.latest_revision,
                    aborted=sorted(snap.aborted),
                )
    engine.dispose()
    with open(out_path, "w", encoding="utf-8") as fh:
        for rec in history:
            fh.write(json.dumps(rec) + "\n")
