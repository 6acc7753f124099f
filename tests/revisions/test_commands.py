"""The functions behind the CLI's revision and dataset commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from partition_notify.revisions import RevisionManager
from partition_notify.revisions.datasets import SnapshotDatasets
from partition_notify.store import Store

from partition_notify.cli import rev_commands as cmd
from partition_notify.core.errors import ConflictError, NotFoundError
from tests.support.clock import FakeClock


def test_transaction_begun_by_one_command_is_finished_by_another(
    store: Store, clock: FakeClock
) -> None:
    began = cmd.begin(RevisionManager(store, clock=clock), "db.t", ["cf"], keep_alive=60)
    json.dumps(began)  # JSON-ready
    other = RevisionManager(store, clock=clock)  # as if a second process
    held = cmd.snapshot(other, "db.t")
    assert held["revisions"] == {"cf": began["revision"] - 1}

    clock.advance(50)
    extended = cmd.keep_alive(other, "db.t", began["revision"])
    assert extended["expiresAt"] == clock.now + 60
    assert [t["revision"] for t in cmd.status(other, "db.t")["running"]] == [began["revision"]]

    assert cmd.commit(other, "db.t", began["revision"])["state"] == "committed"
    assert cmd.snapshot(other, "db.t")["revisions"] == {"cf": began["revision"]}
    assert cmd.snapshot(other, "db.t", 1)["latestRevision"] == 1

    second = cmd.begin(other, "db.t", ["cf"])
    cmd.abort(other, "db.t", second["revision"])
    assert cmd.status(other, "db.t")["aborted"] == [second["revision"]]
    with pytest.raises(ConflictError):
        cmd.commit(other, "db.t", second["revision"])
    with pytest.raises(NotFoundError):
        cmd.commit(other, "db.t", 99)
    assert cmd.tables(other) == ["db.t"]


def test_describe_dataset(datasets: SnapshotDatasets, tmp_path: Path) -> None:
    datasets.define("db.snap", str(tmp_path / "s"), ttl_seconds=60, min_versions=3)
    d = datasets.describe("db.snap")
    assert d == {
        "dataset": "db.snap",
        "location": str(tmp_path / "s"),
        "currentVersion": None,
        "ttlSeconds": 60,
        "minVersions": 3,
        "versions": [],
    }
    with pytest.raises(NotFoundError):
        datasets.describe("db.none")

