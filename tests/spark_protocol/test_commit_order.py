"""Spooled commit manifests take effect in commit order, whichever way they reach serve.

Write A (an append of ds=1) and then a static overwrite B (writes ds=2, so ds=1
is gone) are left in the table's spool while serve is down. The end state must
be B's: ds=1 not in the catalog (it was announced, then dropped), ds=2 there.
A manifest's file name is its job id (random), so the pick-up's file-name order
is a coin toss; the tests make it the unlucky one by renaming the files.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.http.support import HttpServe
from tests.spark_protocol.helpers import (
    DEAD_URL,
    finish_deliveries,
    spool_files,
    start_serve,
    wait_until,
)

KEYS = ["ds", "region"]
SERVE_URL = "spark.partitionnotify.serveUrl"


def _rows(spark: Any, ds: str) -> Any:
    return spark.createDataFrame([(1, ds, "us"), (2, ds, "eu")], "v INT, ds STRING, region STRING")


def _committed_at(path: Path) -> int:
    return int(json.loads(path.read_bytes())["committedAtMs"])


def _present(app: Any) -> list[str]:
    info = app.publisher.table("lake", "events")
    return sorted(p.spec for p in app.store.catalog.partitions(info))


def _events(app: Any) -> list[tuple[str, str]]:
    topic = app.publisher.table("lake", "events").topic
    from partition_notify.contract import decode

    out = []
    for e in app.store.log.events_after(0, limit=100_000):
        if e.topic == topic:
            msg = decode(e.body, {k: str(v) for k, v in e.headers.items()})
            parts = getattr(msg, "partitions", None) or [{}]
            out.append((msg.event_type, "/".join(f"{k}={v}" for k, v in parts[0].items())))
    return out


@pytest.fixture
def lake(pspark: Any, app: Any, writer_token: str, tmp_path: Path) -> Iterator[Path]:
    """lake.events at a local location; the session spools (serve is down)."""
    loc = tmp_path / "events"
    app.publisher.register_table("lake", "events", KEYS, location=f"file:{loc}")
    pspark.conf.set(SERVE_URL, DEAD_URL)
    pspark.conf.set("spark.partitionnotify.token", writer_token)
    pspark.conf.set("spark.sql.sources.partitionOverwriteMode", "static")
    yield loc
    finish_deliveries(pspark)
    pspark.conf.set(SERVE_URL, DEAD_URL)
    pspark.conf.unset("spark.partitionnotify.token")
    pspark.conf.unset("spark.sql.sources.partitionOverwriteMode")


def _spool_a(pspark: Any, loc: Path) -> Path:
    """Write A (ds=1) with serve down: its manifest waits in the spool."""
    _rows(pspark, "1").write.partitionBy(*KEYS).parquet(str(loc))
    finish_deliveries(pspark)
    (a,) = spool_files(loc)
    return a


def _overwrite_b(pspark: Any, loc: Path) -> None:
    _rows(pspark, "2").write.mode("overwrite").partitionBy(*KEYS).parquet(str(loc))
    finish_deliveries(pspark)


def _quiet_serve(store_file: str, log: Path) -> HttpServe:
    """A serve whose background pick-up never comes round again after its first scan."""
    return HttpServe(store_file, log,
                     env_extra={"PN_SPARK_SPOOL_INTERVAL_SECONDS": "3600"}).start()


def _scan(app: Any) -> Any:
    from partition_notify.writers.commit_spool import scan

    from partition_notify.http.store import HttpStore

    return scan(app.publisher, keys=HttpStore(app.store).signing_keys())


def test_the_spool_pick_up_applies_manifests_in_commit_order(
    pspark: Any, app: Any, lake: Path, store_file: str, tmp_path: Path,
) -> None:
    a = _spool_a(pspark, lake)
    _overwrite_b(pspark, lake)
    (b,) = set(spool_files(lake)) - {a}
    assert _committed_at(a) <= _committed_at(b)
    # The unlucky file-name order: the overwrite's manifest first.
    a = a.rename(a.with_name("zzzz-" + a.name))
    b.rename(b.with_name("aaaa-" + b.name))
    serve = start_serve(store_file, tmp_path / "serve.log")
    try:
        wait_until(lambda: not spool_files(lake), what="serve to pick up both manifests")
    finally:
        serve.stop()
    assert _present(app) == ["ds=2/region=eu", "ds=2/region=us"]
    assert sorted(_events(app)) == sorted([
        ("ADD_PARTITION", "ds=1/region=eu"), ("ADD_PARTITION", "ds=1/region=us"),
        ("DROP_PARTITION", "ds=1/region=eu"), ("DROP_PARTITION", "ds=1/region=us"),
        ("ADD_PARTITION", "ds=2/region=eu"), ("ADD_PARTITION", "ds=2/region=us")])
    assert [t for t, _ in _events(app)][:2] == ["ADD_PARTITION"] * 2


def test_a_posted_overwrite_waits_for_the_older_manifests_in_the_spool(
    pspark: Any, app: Any, lake: Path, store_file: str, writer_token: str, tmp_path: Path,
) -> None:
    a = _spool_a(pspark, lake)
    # Serve comes back; its first scan must not take A before B is posted.
    aside = a.rename(tmp_path / a.name)
    serve = _quiet_serve(store_file, tmp_path / "serve.log")
    try:
        shutil.move(aside, a)
        pspark.conf.set(SERVE_URL, serve.base)
        _overwrite_b(pspark, lake)         # posted: serve is up
        assert spool_files(lake) == [], "B was posted: A must be applied before it"
        assert _present(app) == ["ds=2/region=eu", "ds=2/region=us"]
    finally:
        pspark.conf.set(SERVE_URL, DEAD_URL)
        serve.stop()
    assert _scan(app).announced == 0
    assert _present(app) == ["ds=2/region=eu", "ds=2/region=us"]


def test_an_older_manifest_arriving_after_a_newer_overwrite_adds_nothing_it_removed(
    pspark: Any, app: Any, lake: Path, store_file: str, tmp_path: Path,
) -> None:
    a = _spool_a(pspark, lake)
    aside = a.rename(tmp_path / a.name)   # A's driver is slow to leave it (a race)
    serve = _quiet_serve(store_file, tmp_path / "serve.log")
    try:
        pspark.conf.set(SERVE_URL, serve.base)
        _overwrite_b(pspark, lake)
    finally:
        pspark.conf.set(SERVE_URL, DEAD_URL)
        serve.stop()
    assert _present(app) == ["ds=2/region=eu", "ds=2/region=us"]
    shutil.move(aside, a)
    stats = _scan(app)
    assert (stats.announced, stats.rejected, stats.failed) == (1, 0, 0)
    assert spool_files(lake) == []
    # Recorded as applied, but B's overwrite (newer) removed what it wrote: no add.
    assert _present(app) == ["ds=2/region=eu", "ds=2/region=us"]
    assert ("ADD_PARTITION", "ds=1/region=us") not in _events(app)
