"""Announcements that used to be lost or wrong (issue 22, items 4 and 5, server side),
on SQLite and PostgreSQL: location spellings, one validation path, ignored
manifests kept, the lost race of ``POST /v1/commits``, our own staging writes."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from partition_notify.core.errors import InvalidManifestError
from tests.spark_protocol.test_spool_trust import manifest, signed

KEYS = ["ds", "region"]


@pytest.fixture
def papp(store_url: str) -> Iterator[Any]:
    from partition_notify.app import build_app
    from partition_notify.http.store import HttpStore

    a = build_app(store_url=store_url, transport_url="embedded://")
    a.token = HttpStore(a.store).create_token("spark-jobs", "write")[1]
    yield a
    a.close()


def _keys(app: Any) -> list[bytes]:
    """What serve verifies with: the live write tokens' keys (the HTTP feature's table)."""
    from partition_notify.http.store import HttpStore

    return HttpStore(app.store).signing_keys()


def _apply_cli(store_url: str, doc: dict[str, Any], tmp_path: Path,
               capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    from partition_notify.cli import main

    f = tmp_path / f"{doc['jobId']}.json"
    f.write_text(json.dumps(doc))
    assert main(["--store-url", store_url, "--transport-url", "embedded://",
                 "commits", "apply", str(f)]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_locations_match_across_spellings(
    papp: Any, store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PN_DEFAULT_FS", "hdfs://NN:8020")
    papp.publisher.register_table("wh", "plain", KEYS, location="/warehouse/plain")
    papp.publisher.register_table("wh", "noport", KEYS, location="hdfs://nn/warehouse/noport")
    papp.publisher.register_table("wh", "ported", KEYS, location="hdfs://nn:8020/warehouse/p")
    cases = [("hdfs://nn:8020/warehouse/plain", "wh.plain"),
             ("hdfs://nn:8020/warehouse/noport", "wh.noport"),
             ("hdfs://nn/warehouse/p", "wh.ported"),
             ("/warehouse/plain", "wh.plain")]          # scheme-less from the Spark side too
    for out, table in cases:
        got = _apply_cli(store_url, manifest(out, ["ds=1/region=us"]), tmp_path, capsys)
        assert (got["status"], got["table"]) == ("announced", table), out
    # another port or another name node is another filesystem
    other = _apply_cli(store_url, manifest("hdfs://nn:9000/warehouse/plain", ["ds=2/region=us"]),
                       tmp_path, capsys)
    assert other["status"] == "ignored"


def test_nul_in_a_location_is_rejected_not_retried(papp: Any, tmp_path: Path) -> None:
    from partition_notify.writers.commit_spool import scan

    loc = f"file:{tmp_path}/events"
    papp.publisher.register_table("lake", "events", KEYS, location=loc)
    spool = tmp_path / "events" / "_partition_notify"
    spool.mkdir(parents=True)
    doc = manifest(loc, ["ds=1/region=us"], jobId="nul")
    doc["partitions"][0]["location"] = f"{loc}/ds=1/region=us\x00evil"
    (spool / "nul.json").write_bytes(signed(doc, papp.token))
    scan(papp.publisher, keys=_keys(papp))
    assert sorted(p.name for p in spool.iterdir()) == ["nul.json.rejected"]
    assert papp.store.log.max_event_id() == 0


def test_ignored_manifest_is_kept_and_applied_once_the_table_exists(
    papp: Any, store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from partition_notify.writers.commit_spool import scan

    from partition_notify.cli import main

    shared = tmp_path / "shared-spool"
    shared.mkdir()
    loc = f"file:{tmp_path}/late"
    (shared / "late.json").write_bytes(
        signed(manifest(loc, ["ds=1/region=us"], jobId="late"), papp.token))
    stats = scan(papp.publisher, [str(shared)], keys=_keys(papp))
    assert stats.ignored == 1
    assert [p.name for p in shared.iterdir()] == ["late.json.ignored"]
    argv = ["--store-url", store_url, "--transport-url", "embedded://", "commits"]
    assert main([*argv, "ignored", str(shared)]) == 0
    assert capsys.readouterr().out.splitlines() == [str(shared / "late.json.ignored")]
    papp.publisher.register_table("lake", "late", KEYS, location=loc)
    assert main([*argv, "scan", "--retry-ignored", str(shared)]) == 0
    assert json.loads(capsys.readouterr().out)["announced"] == 1
    assert list(shared.iterdir()) == []
    assert [p.spec for p in papp.store.catalog.partitions(papp.publisher.table("lake", "late"))] \
        == ["ds=1/region=us"]


def test_ignored_manifests_expire(tmp_path: Path) -> None:
    import os
    import time

    from partition_notify.writers.commit_spool import IGNORED_RETENTION_SECONDS, expire_ignored

    (tmp_path / "old.json.ignored").write_text("{}")
    (tmp_path / "new.json.ignored").write_text("{}")
    past = time.time() - IGNORED_RETENTION_SECONDS - 60
    os.utime(tmp_path / "old.json.ignored", (past, past))
    assert expire_ignored(tmp_path) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["new.json.ignored"]


def test_post_commit_that_loses_the_race_to_the_spool_is_a_duplicate(
    papp: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastapi.testclient import TestClient
    from partition_notify.writers.commit_manifest import apply_manifest, manifest_from_obj

    from partition_notify.http import routes_commits
    from partition_notify.http.app import create_http_app

    loc = f"file:{tmp_path}/events"
    papp.publisher.register_table("lake", "events", KEYS, location=loc)
    doc = manifest(loc, ["ds=1/region=us"], jobId=str(uuid.uuid4()))
    real_plan = routes_commits.plan

    def plan_then_spool_wins(*args: Any, **kw: Any) -> Any:
        target = real_plan(*args, **kw)
        # serve's pick-up of the spooled copy commits between our check and our write
        assert apply_manifest(papp.publisher, manifest_from_obj(doc)).status == "announced"
        return target

    monkeypatch.setattr(routes_commits, "plan", plan_then_spool_wins)
    http = create_http_app(papp, extra_routers=[routes_commits.router])
    with TestClient(http) as client:
        r = client.post("/v1/commits", json=doc, headers={
            "Authorization": f"Bearer {papp.token}", "Idempotency-Key": doc["jobId"]})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "duplicate"
    assert papp.store.log.max_event_id() == 1


def test_staging_commit_is_not_warned_nor_remembered(
    papp: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from partition_notify.writers import commit_manifest
    from partition_notify.writers.commit_manifest import apply_manifest, manifest_from_obj

    papp.publisher.register_table("lake", "events", KEYS, location=f"file:{tmp_path}/events")
    before = len(commit_manifest._unmatched)
    caplog.set_level(logging.INFO)
    for i in range(3):
        staged = f"file:{tmp_path}/events/_pn_staging/2011022{i}T000000-abc/data"
        m = manifest_from_obj(manifest(staged, ["ds=1/region=us"]))
        out = apply_manifest(papp.publisher, m)
        assert out.status == "ignored"
    assert not [r for r in caplog.records if "matches no registered table" in r.getMessage()]
    assert len(commit_manifest._unmatched) == before
    assert papp.store.log.max_event_id() == 0


def test_unmatched_paths_remembered_are_bounded(
    papp: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from partition_notify.writers import commit_manifest
    from partition_notify.writers.commit_manifest import apply_manifest, manifest_from_obj

    papp.publisher.register_table("lake", "events", KEYS, location=f"file:{tmp_path}/events")
    caplog.set_level(logging.WARNING)
    for i in range(1100):
        apply_manifest(papp.publisher, manifest_from_obj(
            manifest(f"file:{tmp_path}/nowhere-{i}", ["ds=1/region=us"])))
    assert len(commit_manifest._unmatched) <= 1024
    first = next(r for r in caplog.records if "nowhere-0" in r.getMessage())
    assert first.levelno == logging.WARNING and f"{tmp_path}/events" in first.getMessage()


def test_register_warns_when_spark_may_not_match(
    store_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from partition_notify.cli import main

    monkeypatch.delenv("PN_DEFAULT_FS", raising=False)
    argv = ["--store-url", store_url, "--transport-url", "embedded://", "register"]
    assert main([*argv, "wh.a", "--keys", "ds", "--location", "/warehouse/a"]) == 0
    err = capsys.readouterr().err
    # A local Spark (fs.defaultFS file:) does match a scheme-less path: not "never".
    assert "may not match" in err and "never" not in err and err.count("\n") == 1
    assert "only if Spark's fs.defaultFS is the local filesystem" in err and "PN_DEFAULT_FS" in err
    assert main([*argv, "wh.q", "--keys", "ds", "--location", "file:/warehouse/q?x=1"]) == 0
    assert "will never match" in capsys.readouterr().err
    assert main([*argv, "wh.b", "--keys", "ds", "--location", "hdfs://nn/warehouse/b"]) == 0
    assert capsys.readouterr().err == ""


def _events(app: Any) -> list[dict[str, Any]]:
    return [json.loads(e.body) for e in app.store.log.events_after(0, 1000)]


def test_custom_location_partition_carries_its_values(papp: Any, tmp_path: Path) -> None:
    from partition_notify.writers.commit_manifest import apply_manifest, manifest_from_obj

    loc = f"file:{tmp_path}/events"
    papp.publisher.register_table("lake", "events", KEYS, location=loc)
    doc = manifest(loc, ["ds=1/region=eu"], markSetDone="ds=1")
    doc["partitions"].append({"path": None, "location": f"file:{tmp_path}/archive/us-copy",
                              "values": {"ds": "1", "region": "us"}})
    out = apply_manifest(papp.publisher, manifest_from_obj(doc))
    assert (out.status, out.messages) == ("announced", 3)
    info = papp.publisher.table("lake", "events")
    assert papp.store.catalog.partition(info, "ds=1/region=us").location \
        == f"file:{tmp_path}/archive/us-copy"
    bad = manifest(loc, [], jobId="bad")
    bad["partitions"] = [{"path": None, "location": "file:/x", "values": {"ds": "2"}}]
    with pytest.raises(InvalidManifestError, match=r"partitions\[0\]\.values"):
        apply_manifest(papp.publisher, manifest_from_obj(bad))


def test_write_into_a_partition_directory_announces_it(papp: Any, tmp_path: Path) -> None:
    from partition_notify.writers.commit_manifest import apply_manifest, manifest_from_obj

    loc = f"file:{tmp_path}/events"
    papp.publisher.register_table("lake", "events", KEYS, location=loc)
    out = apply_manifest(papp.publisher, manifest_from_obj(manifest(f"{loc}/ds=1/region=us", [])))
    assert (out.status, out.messages) == ("announced", 1)
    assert _events(papp)[0]["partitions"] == [{"ds": "1", "region": "us"}]
    assert _events(papp)[0]["locations"] == [f"{loc}/ds=1/region=us"]
    # one level up is no partition: nothing to announce, and no error
    assert apply_manifest(papp.publisher, manifest_from_obj(
        manifest(f"{loc}/ds=2", []))).messages == 0


def test_static_overwrite_drops_what_it_deleted_and_flags_replaces(
    papp: Any, tmp_path: Path
) -> None:
    from partition_notify.writers.commit_manifest import apply_manifest, manifest_from_obj

    loc = f"file:{tmp_path}/events"
    papp.publisher.register_table("lake", "events", KEYS, location=loc)
    first = manifest(loc, ["ds=1/region=us", "ds=1/region=eu", "ds=2/region=us"],
                     committedAtMs=1000)
    apply_manifest(papp.publisher, manifest_from_obj(first))
    # INSERT OVERWRITE ... PARTITION (ds='1'): Spark deleted ds=1, wrote ds=1/region=us
    over = manifest(loc, ["ds=1/region=us"], overwrite=True, committedAtMs=2000,
                    deleted=[f"{loc}/ds=1"])
    assert apply_manifest(papp.publisher, manifest_from_obj(over)).messages == 2
    drop, add = _events(papp)[3:]
    assert (drop["eventType"], drop["partitions"], drop["reason"], drop["revision"]) == \
        ("DROP_PARTITION", [{"ds": "1", "region": "eu"}], "overwrite", 2000)
    assert (add["replace"], add["revision"]) == (True, 2000)
    assert "replace" not in _events(papp)[0] and _events(papp)[0]["revision"] == 1000
    sub = papp.subscriber()
    assert not sub.is_partition_present("lake", "events", "ds=1/region=eu")
    assert sub.is_partition_present("lake", "events", "ds=2/region=us")
    # written again later: announced again, as new
    again = manifest(loc, ["ds=1/region=eu"], committedAtMs=3000)
    assert apply_manifest(papp.publisher, manifest_from_obj(again)).messages == 1
    assert "replace" not in _events(papp)[-1]
    # the whole table overwritten: everything not written again goes
    whole = manifest(loc, ["ds=3/region=us"], overwrite=True, deleted=[loc])
    apply_manifest(papp.publisher, manifest_from_obj(whole))
    info = papp.publisher.table("lake", "events")
    assert [p.spec for p in papp.store.catalog.partitions(info)] == ["ds=3/region=us"]
    assert [e["eventType"] for e in _events(papp)[6:]] == ["DROP_PARTITION"] * 3 + [
        "ADD_PARTITION"]


def test_dropped_specs_drop_what_is_present(papp: Any, tmp_path: Path) -> None:
    """ALTER TABLE ... DROP PARTITION's manifest: no partitions, the dropped specs."""
    from partition_notify.writers.commit_manifest import apply_manifest, manifest_from_obj

    loc = f"file:{tmp_path}/events"
    papp.publisher.register_table("lake", "events", KEYS, location=loc)
    apply_manifest(papp.publisher, manifest_from_obj(
        manifest(loc, ["ds=1/region=us", "ds=1/region=eu", "ds=2/region=us"])))
    drop = manifest(loc, [], table="lake.events", dropped=[{"ds": "1"}])
    assert apply_manifest(papp.publisher, manifest_from_obj(drop)).messages == 2
    assert [(e["eventType"], e["reason"]) for e in _events(papp)[3:]] == [
        ("DROP_PARTITION", "drop")] * 2
    again = manifest(loc, [], table="lake.events", dropped=[{"ds": "1"}])   # nothing left
    assert apply_manifest(papp.publisher, manifest_from_obj(again)).messages == 0
    bad = manifest(loc, [], dropped=[{"nope": "1"}])
    with pytest.raises(InvalidManifestError, match=r"dropped\[0\]"):
        apply_manifest(papp.publisher, manifest_from_obj(bad))


def test_a_deleted_directory_above_the_table_is_refused(papp: Any, tmp_path: Path) -> None:
    """Spark deletes inside the output path or a partition's own location: a ``deleted``
    entry holding the table's location (the lake's root, ``file:/``) dropped every
    announced partition of the table. Refused, naming the entry; nothing logged."""
    from partition_notify.writers.commit_manifest import apply_manifest, manifest_from_obj

    loc = f"file:{tmp_path}/events"
    papp.publisher.register_table("lake", "events", KEYS, location=loc)
    apply_manifest(papp.publisher, manifest_from_obj(
        manifest(loc, ["ds=1/region=us", "ds=2/region=us"])))
    for above in (f"file:{tmp_path}", "file:/"):
        over = manifest(loc, ["ds=3/region=us"], overwrite=True, deleted=[loc, above])
        with pytest.raises(InvalidManifestError, match=r"deleted\[1\].*contains the location"):
            apply_manifest(papp.publisher, manifest_from_obj(over))
    info = papp.publisher.table("lake", "events")
    assert [p.spec for p in papp.store.catalog.partitions(info)] == [
        "ds=1/region=us", "ds=2/region=us"]
    assert len(_events(papp)) == 2
