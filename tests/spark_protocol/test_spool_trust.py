"""serve's manifest pick-up against hostile spool contents, with a real ``serve``
process on SQLite and PostgreSQL (issue 22, items 2 and 3).

The signature is computed here from the documented format (docs/security.md),
not with the code under test: key = the lower-case hex SHA-256 of a write
token, HMAC-SHA256 over the manifest body, appended as its last field.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.http.support import HttpServe
from tests.support.net import free_port, wait_until

KEYS = ["ds", "region"]
#: Under compose.yaml's stop_grace_period (30 s), which README documents for serve.
GRACE_SECONDS = 25.0


def signed(doc: dict[str, Any], token: str) -> bytes:
    body = json.dumps(doc, separators=(",", ":")).encode()
    key = hashlib.sha256(token.encode()).hexdigest().encode()
    mac = hmac.new(key, body, hashlib.sha256).hexdigest()
    return body[:-1] + f',"signature":"hmac-sha256:{mac}"}}'.encode()


def manifest(base: str, paths: list[str], **kw: Any) -> dict[str, Any]:
    return {"version": 1, "jobId": kw.pop("jobId", str(uuid.uuid4())), "table": None,
            "outputPath": base, "overwrite": False,
            "partitions": [{"path": p, "location": f"{base}/{p}"} for p in paths], **kw}


@pytest.fixture
def tapp(store_url: str, tmp_path: Path) -> Iterator[Any]:
    from partition_notify.app import build_app
    from partition_notify.http.store import HttpStore

    a = build_app(store_url=store_url, transport_url="embedded://")
    a.publisher.register_table("sales", "orders", KEYS, location=f"file:{tmp_path}/orders")
    a.publisher.register_table("other", "secret", KEYS, location="s3://bucket/secret")
    a.publisher.register_table("lake", "events", KEYS, location=f"file:{tmp_path}/events")
    a.token = HttpStore(a.store).create_token("spark-jobs", "write")[1]
    yield a
    a.close()


def _serve(store_url: str, tmp_path: Path) -> tuple[HttpServe, int]:
    port = free_port()
    s = HttpServe(store_url, tmp_path / "serve.log", env_extra={
        "PN_SPARK_SPOOL_INTERVAL_SECONDS": "0.2", "PN_METRICS_PORT": str(port)}).start()
    return s, port


def _commits_metric(port: int, status: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith(f'pn_spark_commits_total{{status="{status}"}}'):
            return float(line.split()[-1])
    return 0.0


def _specs(app: Any, db: str, table: str) -> list[str]:
    info = app.publisher.table(db, table)
    return sorted(p.spec for p in app.store.catalog.partitions(info))


def test_forged_unsigned_and_other_table_manifests_are_refused(
    tapp: Any, store_url: str, tmp_path: Path
) -> None:
    orders = f"file:{tmp_path}/orders"
    spool = tmp_path / "orders" / "_partition_notify"
    spool.mkdir(parents=True)
    # unsigned, naming another table (the attack of the issue)
    unsigned = manifest("s3://bucket/secret", ["ds=1/region=us"], table="other.secret",
                        overwrite=True, markSetDone="ds=1")
    (spool / "unsigned.json").write_text(json.dumps({**unsigned, "jobId": "unsigned"}))
    # forged: signed with a token serve does not know
    (spool / "forged.json").write_bytes(
        signed(manifest(orders, ["ds=2/region=us"], jobId="forged"), "pn_not-a-real-token"))
    # a validly signed manifest of another table, replayed into this table's spool
    (spool / "replayed.json").write_bytes(
        signed(manifest("s3://bucket/secret", ["ds=3/region=us"], jobId="replayed",
                        table="other.secret"), tapp.token))
    # the one legitimate manifest
    (spool / "good.json").write_bytes(
        signed(manifest(orders, ["ds=4/region=us"], jobId="good"), tapp.token))
    serve, port = _serve(store_url, tmp_path)
    try:
        wait_until(lambda: not (spool / "good.json").exists(), 60, "the good manifest")
        wait_until(lambda: not list(spool.glob("*.json")), 30, "every manifest handled")
        assert _specs(tapp, "sales", "orders") == ["ds=4/region=us"]
        assert _specs(tapp, "other", "secret") == []
        assert tapp.store.log.max_event_id() == 1        # no set-done, no overwrite either
        assert _commits_metric(port, "spooled") == 1
        assert _commits_metric(port, "rejected") == 3
        kept = sorted(p.name for p in spool.iterdir())
        assert kept == ["forged.json.rejected", "replayed.json.rejected",
                        "unsigned.json.rejected"]
        log = serve.text()
        assert "no valid signature" in log and "spool of sales.orders" in log
    finally:
        assert serve.stop(GRACE_SECONDS) == 0


def test_bad_files_do_not_stop_the_pick_up(tapp: Any, store_url: str, tmp_path: Path) -> None:
    orders, events = f"file:{tmp_path}/orders", f"file:{tmp_path}/events"
    spool = tmp_path / "orders" / "_partition_notify"
    spool.mkdir(parents=True)
    os.mkfifo(spool / "a-fifo.json")                        # sorts first
    (spool / "b-dir.json").mkdir()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(spool / "c-socket.json"))                 # unreadable even for root
    (spool / "d-unreadable.json").write_text("{}")
    (spool / "d-unreadable.json").chmod(0)
    with open(spool / "e-huge.json", "wb") as fh:           # sparse: 300 MB, no blocks
        fh.truncate(300 * 1024 * 1024)
    (spool / "f-link.json").symlink_to("/dev/zero")
    (spool / "g-good.json").write_bytes(
        signed(manifest(orders, ["ds=1/region=us"], jobId="g-good"), tapp.token))
    later = tmp_path / "events" / "_partition_notify"
    later.mkdir(parents=True)
    (later / "h-good.json").write_bytes(
        signed(manifest(events, ["ds=1/region=eu"], jobId="h-good"), tapp.token))
    serve, _ = _serve(store_url, tmp_path)
    try:
        wait_until(lambda: not (later / "h-good.json").exists(), 60, "the other table's manifest")
        wait_until(lambda: not (spool / "g-good.json").exists(), 30, "the good manifest")
        assert _specs(tapp, "sales", "orders") == ["ds=1/region=us"]
        assert _specs(tapp, "lake", "events") == ["ds=1/region=eu"]
        bad = ["a-fifo.json", "b-dir.json", "c-socket.json", "d-unreadable.json",
               "e-huge.json", "f-link.json"]
        wait_until(lambda: sorted(p.name for p in spool.iterdir())
                   == [f"{b}.rejected" for b in bad], 30, "the bad files set aside")
        assert (spool / "f-link.json.rejected").is_symlink()  # not followed
    finally:
        started = time.monotonic()
        code = serve.stop(GRACE_SECONDS)
        sock.close()
        assert code == 0 and time.monotonic() - started < GRACE_SECONDS
    log = serve.text()
    for name in ("a-fifo.json", "b-dir.json", "c-socket.json", "e-huge.json", "f-link.json"):
        assert name in log, f"{name} not logged"
    assert "Traceback" not in log


def test_commits_scan_with_bad_files_prints_one_line(
    tapp: Any, store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from partition_notify.cli import main

    spool = tmp_path / "orders" / "_partition_notify"
    spool.mkdir(parents=True)
    (spool / "dir.json").mkdir()
    os.mkfifo(spool / "fifo.json")
    (spool / "good.json").write_bytes(signed(
        manifest(f"file:{tmp_path}/orders", ["ds=1/region=us"], jobId="good"), tapp.token))
    argv = ["--store-url", store_url, "--transport-url", "embedded://", "commits", "scan"]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 1
    stats = json.loads(out)
    assert (stats["announced"], stats["rejected"]) == (1, 2)
    assert out.count("\n") == 1
    assert "Traceback" not in err
    assert _specs(tapp, "sales", "orders") == ["ds=1/region=us"]
