"""Commit manifests without Spark: parsing, table resolution, exactly-once by job id,
serve's pick-up of spooled manifests and ``POST /v1/commits`` (real serve), on
SQLite and PostgreSQL."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from partition_notify.writers.commit_locations import normalise_location
from partition_notify.writers.commit_manifest import (
    apply_manifest,
    manifest_from_obj,
    parse_manifest,
)
from partition_notify.writers.commit_spool import scan

from partition_notify.core.errors import InvalidManifestError
from tests.spark_protocol.helpers import start_serve

KEYS = ["ds", "region"]


def manifest(base: str, paths: list[str], **kw: Any) -> dict[str, Any]:
    return {"version": 1, "jobId": kw.pop("jobId", str(uuid.uuid4())), "table": None,
            "outputPath": base, "overwrite": False,
            "partitions": [{"path": p, "location": f"{base}/{p}"} for p in paths], **kw}


@pytest.mark.parametrize(("doc", "field"), [
    ({"version": 2}, "version"),
    ({"jobId": "../etc"}, "jobId"),
    ({"outputPath": ""}, "outputPath"),
    ({"partitions": [{"path": "ds=1"}]}, "partitions.0.location"),
])
def test_bad_manifest_names_the_field(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidManifestError, match=rf"field '{field}'"):
        manifest_from_obj({**manifest("file:/x", ["ds=1/region=us"]), **doc})


@pytest.mark.parametrize(("raw", "fragment"), [
    ('{"version": 1, "jobId": "a", "jobId": "b"}', "manifest: key 'jobId' appears 2 times"),
    ('{"version": 1, "partitions": [{"path": "ds=1", "path": "ds=2"}]}',
     "manifest field 'partitions.0': key 'path' appears 2 times"),
])
def test_a_manifest_repeating_a_key_is_refused(raw: str, fragment: str) -> None:
    # Before: parsed last-wins, the first value silently dropped.
    with pytest.raises(InvalidManifestError) as info:
        parse_manifest(raw.encode())
    assert fragment in str(info.value)


def test_location_spellings() -> None:
    assert normalise_location("/a/b/") == normalise_location("file:///a/b") == "file:/a/b"
    assert normalise_location("s3a://bkt/t") == normalise_location("s3://bkt/t/")


def test_path_resolution_and_exactly_once(mapp: Any, tmp_path: Path) -> None:
    base = f"file:{tmp_path}/events"
    m = manifest_from_obj(manifest(base, ["ds=1/region=us", "ds=1/region=e%2Fu"],
                                   markSetDone="ds=1"))
    first = apply_manifest(mapp.publisher, m)
    assert (first.status, first.table, first.messages) == ("announced", "lake.events", 3)
    assert apply_manifest(mapp.publisher, m).status == "duplicate"
    info = mapp.publisher.table("lake", "events")
    parts = {p.spec: p.values for p in mapp.store.catalog.partitions(info)}
    assert parts["ds=1/region=e%2Fu"] == {"ds": "1", "region": "e/u"}
    assert mapp.store.log.max_event_id() == 3
    # a job that wrote into one partition directory (partitionBy the rest)
    deeper = manifest_from_obj(manifest(f"{base}/ds=2", ["region=us"]))
    assert apply_manifest(mapp.publisher, deeper).status == "announced"
    assert mapp.store.catalog.partition(mapp.publisher.table("lake", "events"), "ds=2/region=us")
    assert apply_manifest(mapp.publisher, manifest_from_obj(
        manifest(f"file:{tmp_path}/other", ["ds=1/region=us"]))).status == "ignored"
    assert mapp.store.log.max_event_id() == 4


def test_manifest_that_does_not_fit_the_table_is_rejected(mapp: Any, tmp_path: Path) -> None:
    m = manifest_from_obj(manifest(f"file:{tmp_path}/events", ["region=us/ds=1"]))
    with pytest.raises(InvalidManifestError, match="partitions\\[0\\]"):
        apply_manifest(mapp.publisher, m)
    assert mapp.store.log.max_event_id() == 0


def test_spool_pick_up(mapp: Any, tmp_path: Path) -> None:
    spool = tmp_path / "events" / "_partition_notify"
    spool.mkdir(parents=True)
    from partition_notify.writers.spool_signature import key_of, sign

    from partition_notify.http.store import HttpStore

    token = HttpStore(mapp.store).create_token("spark", "write")[1]
    good = manifest(f"file:{tmp_path}/events", ["ds=1/region=us"], overwrite=True)
    (spool / f"{good['jobId']}.json").write_bytes(sign(json.dumps(good).encode(), key_of(token)))
    (spool / ".half.json.tmp").write_text("{")
    (spool / "bad.json").write_text("{not json")
    stats = scan(mapp.publisher, keys=HttpStore(mapp.store).signing_keys())
    assert (stats.announced, stats.rejected) == (1, 1)
    assert sorted(p.name for p in spool.iterdir()) == [".half.json.tmp", "bad.json.rejected"]
    assert mapp.store.log.max_event_id() == 1


def test_http_route(mapp: Any, store_url: str, tmp_path: Path) -> None:
    from partition_notify.http.store import HttpStore

    token = HttpStore(mapp.store).create_token("spark", "write")[1]
    serve = start_serve(store_url, tmp_path / "serve.log")
    try:
        url, auth = serve.base + "/v1/commits", {"Authorization": f"Bearer {token}"}
        doc = manifest(f"file:{tmp_path}/events", ["ds=1/region=us"], markSetDone="ds=1")
        hdr = {**auth, "Idempotency-Key": doc["jobId"]}
        r = httpx.post(url, json=doc, headers=hdr, timeout=30)
        assert r.status_code == 201, r.text
        assert r.json() == {"status": "announced", "jobId": doc["jobId"],
                            "table": "lake.events", "announced": 1, "setDone": True}
        again = httpx.post(url, json=doc, headers=hdr, timeout=30)
        assert again.status_code in (200, 201) and mapp.store.log.max_event_id() == 2
        bad = httpx.post(url, json={**doc, "jobId": "x", "version": 9}, headers=auth, timeout=30)
        assert bad.status_code == 422 and "version" in bad.json()["detail"]
        assert bad.headers["content-type"].startswith("application/problem+json")
        assert httpx.post(url, json=doc, timeout=30).status_code == 401
        other = manifest(f"file:{tmp_path}/nobody", ["ds=1/region=us"])
        ign = httpx.post(url, json=other, headers=auth, timeout=30)
        assert (ign.status_code, ign.json()["status"]) == (200, "ignored")
        assert mapp.store.log.max_event_id() == 2
    finally:
        serve.stop()


def test_spark_conf_cli(capsys: pytest.CaptureFixture[str]) -> None:
    from partition_notify.cli import main
    from partition_notify.cli.spark import LISTENER_CLASS, PROTOCOL_CLASS, jar_path

    assert main(["spark-conf", "--for", "spark-sql", "--serve-url", "http://pn:8080/"]) == 0
    out = capsys.readouterr().out
    assert out.split() == ["--jars", str(jar_path()),
                           "--conf", f"spark.sql.sources.commitProtocolClass={PROTOCOL_CLASS}",
                           "--conf", f"spark.sql.queryExecutionListeners={LISTENER_CLASS}",
                           "--conf", "spark.partitionnotify.serveUrl=http://pn:8080"]
    assert main(["spark-conf", "--for", "properties"]) == 0
    assert f"spark.jars {jar_path()}" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["spark-conf", "--serve-url", "pn:8080"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--serve-url 'pn:8080'" in err


def test_commits_apply_cli(store_url: str, tmp_path: Path,
                           capsys: pytest.CaptureFixture[str]) -> None:
    from partition_notify.app import build_app
    from partition_notify.cli import main

    with build_app(store_url=store_url, transport_url="embedded://") as a:
        a.publisher.register_table("lake", "events", KEYS, location=f"file:{tmp_path}/events")
    doc = tmp_path / "m.json"
    doc.write_text(json.dumps(manifest(f"file:{tmp_path}/events", ["ds=1/region=us"])))
    argv = ["--store-url", store_url, "--transport-url", "embedded://", "commits", "apply"]
    assert main([*argv, str(doc)]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "announced"
    assert main([*argv, str(doc)]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "duplicate"
    doc.write_text("{}")
    assert main([*argv, str(doc)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("partition-notify commits apply: error: manifest field 'version'")


def test_write_into_hidden_staging_dir_is_ignored(mapp: Any, tmp_path: Path) -> None:
    """NotifyingWriter stages under <table>/_pn_staging/: with the commit protocol on
    too, that Spark write must not be announced (the Python writer announces it)."""
    staged = f"file:{tmp_path}/events/_pn_staging/20110228T000000-abc/data"
    m = manifest_from_obj(manifest(staged, ["ds=1/region=us"]))
    assert apply_manifest(mapp.publisher, m).status == "ignored"
    assert mapp.store.log.max_event_id() == 0
