"""Commit order, manifest by manifest (no Spark; SQLite and PostgreSQL): what a job
applied after a newer job of its table may still do, and the pick-up's window."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from partition_notify.writers.commit_manifest import apply_manifest, manifest_from_obj

from tests.spark_protocol.test_manifest import manifest


def _apply(mapp: Any, base: str, paths: list[str], at: int, **kw: Any) -> Any:
    return apply_manifest(mapp.publisher, manifest_from_obj(
        manifest(base, paths, committedAtMs=at, **kw)))


def _present(mapp: Any) -> list[str]:
    info = mapp.publisher.table("lake", "events")
    return sorted(p.spec for p in mapp.store.catalog.partitions(info))


def _dones(mapp: Any) -> int:
    from partition_notify.contract import SetDoneMessage, decode

    return sum(isinstance(decode(e.body, {k: str(v) for k, v in e.headers.items()}),
                          SetDoneMessage) for e in mapp.store.log.events_after(0, limit=1000))


def test_a_late_older_overwrite_drops_nothing_a_newer_job_wrote(mapp: Any,
                                                                  tmp_path: Path) -> None:
    base = f"file:{tmp_path}/events"
    _apply(mapp, base, ["ds=1/region=us"], 100)
    _apply(mapp, base, ["ds=2/region=us"], 300)                     # newer append
    late = _apply(mapp, base, ["ds=3/region=us"], 200, overwrite=True, deleted=[base])
    assert late.status == "announced"
    # In commit order: ds=1; the overwrite leaves ds=3; the append adds ds=2.
    assert _present(mapp) == ["ds=2/region=us", "ds=3/region=us"]


def test_a_late_older_append_announces_nothing_a_newer_drop_removed(mapp: Any,
                                                                     tmp_path: Path) -> None:
    base = f"file:{tmp_path}/events"
    _apply(mapp, base, ["ds=2/region=us"], 100)
    _apply(mapp, base, [], 300, dropped=[{"ds": "1"}])              # ALTER TABLE DROP
    late = _apply(mapp, base, ["ds=1/region=us", "ds=3/region=us"], 200, markSetDone="ds=1")
    assert late.status == "announced"
    assert _present(mapp) == ["ds=2/region=us", "ds=3/region=us"]
    assert _dones(mapp) == 0


def test_an_equal_commit_time_is_not_newer(mapp: Any, tmp_path: Path) -> None:
    base = f"file:{tmp_path}/events"
    _apply(mapp, base, ["ds=2/region=us"], 200, overwrite=True, deleted=[base])
    _apply(mapp, base, ["ds=1/region=us"], 200)
    assert _present(mapp) == ["ds=1/region=us", "ds=2/region=us"]


def test_the_pick_up_takes_the_earliest_spooled_beyond_its_bound(
    mapp: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from partition_notify.writers import commit_spool
    from partition_notify.writers.spool_signature import key_of, sign

    from partition_notify.http.store import HttpStore

    monkeypatch.setattr(commit_spool, "MAX_FILES_PER_DIR", 2)
    spool = tmp_path / "events" / "_partition_notify"
    spool.mkdir(parents=True)
    token = HttpStore(mapp.store).create_token("spark", "write")[1]
    base = f"file:{tmp_path}/events"
    # Spooled in this order; their names sort the other way round.
    for i, (name, at) in enumerate([("c", 100), ("b", 200), ("a", 300)]):
        doc = manifest(base, [f"ds={at}/region=us"], committedAtMs=at)
        path = spool / f"{name}.json"
        path.write_bytes(sign(json.dumps(doc).encode(), key_of(token)))
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    keys = HttpStore(mapp.store).signing_keys()
    assert len(commit_spool.scan(mapp.publisher, keys=keys).jobs) == 2
    assert _present(mapp) == ["ds=100/region=us", "ds=200/region=us"]
    assert [p.name for p in spool.iterdir()] == ["a.json"]
