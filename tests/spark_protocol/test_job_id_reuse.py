"""A Spark job id names one commit: the same id with other content is refused, never
answered ``duplicate`` (that lost the second job's partitions without a word).

Every way in (``apply_manifest``, the spool pick-up, ``POST /v1/commits``, the CLI)
on SQLite and PostgreSQL; and a store whose jobs were recorded before the content
fingerprint existed (migration 0014 on a 0013 store)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from partition_notify.writers.commit_manifest import apply_manifest, manifest_from_obj
from partition_notify.writers.commit_spool import scan
from sqlalchemy import create_engine, text

from partition_notify.core.errors import InvalidManifestError
from tests.spark_protocol.helpers import start_serve
from tests.spark_protocol.test_manifest import KEYS, manifest


def _pair(tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    base, job = f"file:{tmp_path}/events", str(uuid.uuid4())
    first = manifest(base, ["ds=1/region=us"], jobId=job, committedAtMs=1)
    second = manifest(base, ["ds=2/region=us"], jobId=job, committedAtMs=2)
    return first, second


def test_same_id_other_content_is_refused_and_nothing_logged(mapp: Any, tmp_path: Path) -> None:
    first, second = _pair(tmp_path)
    assert apply_manifest(mapp.publisher, manifest_from_obj(first)).status == "announced"
    with pytest.raises(InvalidManifestError, match=rf"field 'jobId'.*{first['jobId']}"):
        apply_manifest(mapp.publisher, manifest_from_obj(second))
    assert mapp.store.log.max_event_id() == 1
    # the same content again (a retry sends the commit time it sent before, or another)
    again = {**first, "committedAtMs": 99, "sparkAppId": "app-2"}
    assert apply_manifest(mapp.publisher, manifest_from_obj(again)).status == "duplicate"
    assert mapp.store.log.max_event_id() == 1


def test_spool_rejects_the_reused_id(mapp: Any, tmp_path: Path) -> None:
    from partition_notify.writers.spool_signature import key_of, sign

    from partition_notify.http.store import HttpStore

    first, second = _pair(tmp_path)
    assert apply_manifest(mapp.publisher, manifest_from_obj(first)).status == "announced"
    spool = tmp_path / "events" / "_partition_notify"
    spool.mkdir(parents=True)
    token = HttpStore(mapp.store).create_token("spark", "write")[1]
    (spool / "reused.json").write_bytes(sign(json.dumps(second).encode(), key_of(token)))
    stats = scan(mapp.publisher, keys=HttpStore(mapp.store).signing_keys())
    assert (stats.announced, stats.duplicates, stats.rejected) == (0, 0, 1)
    assert [p.name for p in spool.iterdir()] == ["reused.json.rejected"]
    assert mapp.store.log.max_event_id() == 1


def test_http_answers_a_problem_naming_the_job_id(mapp: Any, store_url: str,
                                                  tmp_path: Path) -> None:
    from partition_notify.http.store import HttpStore

    token = HttpStore(mapp.store).create_token("spark", "write")[1]
    first, second = _pair(tmp_path)
    serve = start_serve(store_url, tmp_path / "serve.log")
    try:
        url, auth = serve.base + "/v1/commits", {"Authorization": f"Bearer {token}"}
        assert httpx.post(url, json=first, headers=auth, timeout=30).status_code == 201
        r = httpx.post(url, json=second, headers=auth, timeout=30)
        assert r.status_code == 422, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        assert r.json()["field"] == "body.jobId" and first["jobId"] in r.json()["detail"]
        same = httpx.post(url, json={**first, "committedAtMs": 5}, headers=auth, timeout=30)
        assert (same.status_code, same.json()["status"]) == (200, "duplicate")
        assert mapp.store.log.max_event_id() == 1
    finally:
        serve.stop()


def test_cli_is_one_line_exit_1(mapp: Any, store_url: str, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    from partition_notify.cli import main

    first, second = _pair(tmp_path)
    argv = ["--store-url", store_url, "--transport-url", "embedded://", "commits", "apply"]
    for n, doc in enumerate((first, second)):
        (tmp_path / f"m{n}.json").write_text(json.dumps(doc))
    assert main([*argv, str(tmp_path / "m0.json")]) == 0
    capsys.readouterr()
    assert main([*argv, str(tmp_path / "m1.json")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "jobId" in err and first["jobId"] in err


def test_jobs_recorded_before_the_fingerprint_stay_duplicates(tmp_path: Path) -> None:
    """A 0013 store's recorded job has no fingerprint: it cannot be told apart, so it
    is answered as before (duplicate), and new jobs get one."""
    from partition_notify.store.migrate import migrate

    from partition_notify.app import build_app

    url = f"sqlite:///{tmp_path}/old.db"
    engine = create_engine(url)
    migrate(engine, "0013")
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO pn_spark_commits (job_id, table_id, partitions, "
                          "processed_at) VALUES ('old-job', 1, 1, 1.0)"))
    engine.dispose()
    with build_app(store_url=url, transport_url="embedded://") as a:
        a.publisher.register_table("lake", "events", KEYS, location=f"file:{tmp_path}/events")
        old = manifest(f"file:{tmp_path}/events", ["ds=1/region=us"], jobId="old-job")
        assert apply_manifest(a.publisher, manifest_from_obj(old)).status == "duplicate"
        first, second = _pair(tmp_path)
        assert apply_manifest(a.publisher, manifest_from_obj(first)).status == "announced"
        with pytest.raises(InvalidManifestError, match="jobId"):
            apply_manifest(a.publisher, manifest_from_obj(second))
