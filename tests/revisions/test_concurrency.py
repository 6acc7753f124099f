"""8 processes x 500 transactions against one store, checked from the recorded history."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest
from partition_notify.store import Store

from tests.revisions import history_worker
from tests.revisions.history_checker import check, load
from tests.revisions.history_worker import TABLES

PROCESSES = int(os.environ.get("PN_TEST_RM_PROCESSES", "8"))
TRANSACTIONS = int(os.environ.get("PN_TEST_RM_TRANSACTIONS", "500"))
DEADLINE_SECONDS = 900


@pytest.mark.slow
def test_concurrent_processes_keep_revisions_and_snapshots_safe(
    store_url: str, tmp_path: Path
) -> None:
    store = Store.open(store_url)  # migrated once, before the workers race
    try:  # registered: a snapshot of a name nothing knows is refused
        for table in TABLES:
            db, name = table.split(".")
            store.catalog.register_table(db, name, ["ds"], topic=f"hcat.{table}",
                                         retention_seconds=60)
    finally:
        store.close()
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    paths = [tmp_path / f"history-{i}.jsonl" for i in range(PROCESSES)]
    procs = [
        ctx.Process(
            target=history_worker.run,
            args=(store_url, i, TRANSACTIONS, str(paths[i]), 1000 + i, barrier),
        )
        for i in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    try:
        for p in procs:
            p.join(DEADLINE_SECONDS)
            assert p.exitcode == 0, f"worker {p.pid} exit code {p.exitcode}"
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(10)

    report = check(load(paths))
    figures = report.figures
    print(f"\n{store_url.split(':')[0]} history: {json.dumps(figures)}")
    assert report.violations == []
    assert figures["transactions"] == PROCESSES * TRANSACTIONS
    assert figures["committed"] + figures["aborted"] == figures["transactions"]
    # The run must actually have exercised what is checked.
    assert figures["snapshots"] > TRANSACTIONS
    assert figures["held_back_family_values"] > 0
    assert figures["max_open_at_once"] >= PROCESSES
