"""An overwrite of the whole table keeps the spool: manifests serve has not picked up yet.

Spark's static overwrite deletes the output path through the commit protocol
(``deleteWithJob``) before it writes; the default spool is a child of it
(``<table>/_partition_notify``). A manifest spooled earlier (serve down, or no
serveUrl) must survive it and be announced once serve picks it up.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.spark_protocol.helpers import (
    DEAD_URL,
    Collector,
    events_of,
    finish_deliveries,
    spool_files,
    start_serve,
    wait_until,
)

KEYS = ["ds", "region"]
SERVE_URL = "spark.partitionnotify.serveUrl"
MODE = "spark.sql.sources.partitionOverwriteMode"


def _rows(spark: Any, ds: str) -> Any:
    return spark.createDataFrame([(1, ds, "us"), (2, ds, "eu")], "v INT, ds STRING, region STRING")


@pytest.fixture
def no_serve(pspark: Any, writer_token: str) -> Iterator[Any]:
    """Serve is down (a dead serveUrl) or not configured: manifests go to the spool."""
    def put(url: str | None, mode: str = "static") -> None:
        if url is None:
            pspark.conf.unset(SERVE_URL)
        else:
            pspark.conf.set(SERVE_URL, url)
        pspark.conf.set(MODE, mode)

    pspark.conf.set("spark.partitionnotify.token", writer_token)
    yield put
    pspark.conf.set(SERVE_URL, DEAD_URL)
    pspark.conf.unset("spark.partitionnotify.token")
    pspark.conf.unset(MODE)


@pytest.mark.parametrize(("url", "mode"), [(DEAD_URL, "static"), (None, "static"),
                                           (None, "dynamic")])
def test_an_overwrite_keeps_manifests_spooled_before_it(
    pspark: Any, app: Any, no_serve: Any, store_file: str, tmp_path: Path,
    url: str | None, mode: str,
) -> None:
    loc = tmp_path / "events"
    app.publisher.register_table("lake", "events", KEYS, location=f"file:{loc}")
    no_serve(url, mode)
    _rows(pspark, "1").write.partitionBy(*KEYS).parquet(str(loc))
    finish_deliveries(pspark)      # the listener spools after the write call returned
    assert len(spool_files(loc)) == 1
    _rows(pspark, "2").write.mode("overwrite").partitionBy(*KEYS).parquet(str(loc))
    finish_deliveries(pspark)
    # The overwrite replaced the data (static: ds=1 is gone) but not the spool.
    assert bool(list(loc.glob("ds=1/region=*/*.parquet"))) == (mode == "dynamic")
    assert len(spool_files(loc)) == 2, sorted((loc / "_partition_notify").iterdir())
    col = Collector()
    sub = app.subscriber().subscribe(("lake", "events"), col)
    serve = start_serve(store_file, tmp_path / "serve.log")
    try:
        wait_until(lambda: not spool_files(loc), what="serve to pick up both manifests")
        # Both applied (serve removes a manifest once applied): every event is logged.
        col.wait_for(len(events_of(app, "lake", "events")))
        # Each partition of each write announced exactly once, in commit order: the
        # static overwrite (the later job) drops what the first one wrote.
        assert col.adds() == ["ds=1/region=eu", "ds=1/region=us",
                              "ds=2/region=eu", "ds=2/region=us"]
        assert col.drops() == (["ds=1/region=eu", "ds=1/region=us"] if mode == "static"
                               else [])
        assert len(col.messages) == 4 + len(col.drops())
    finally:
        serve.stop()
        sub.close()


def test_a_non_partitioned_overwrite_keeps_the_spool_and_the_next_write_works(
    pspark: Any, no_serve: Any, tmp_path: Path
) -> None:
    loc = tmp_path / "flat"
    no_serve(None)
    pspark.createDataFrame([(1,)], "v INT").write.parquet(str(loc))
    finish_deliveries(pspark)
    spooled = spool_files(loc)
    assert len(spooled) == 1
    pspark.createDataFrame([(2,)], "v INT").write.mode("overwrite").parquet(str(loc))
    finish_deliveries(pspark)
    assert set(spooled) < set(spool_files(loc)) and len(spool_files(loc)) == 2
    assert [r.v for r in pspark.read.parquet(str(loc)).collect()] == [2]
    pspark.createDataFrame([(3,)], "v INT").write.mode("append").parquet(str(loc))
    finish_deliveries(pspark)
    assert len(spool_files(loc)) == 3
    assert sorted(r.v for r in pspark.read.parquet(str(loc)).collect()) == [2, 3]
