"""``spark-sql -e``: a job with no Python driver announces what it wrote.

The flags come from ``partition-notify spark-conf --for spark-sql``; the
writer token from the driver's environment (PN_WRITER_TOKEN).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.http.support import HttpServe
from tests.spark_protocol.helpers import ROOT, Collector, events_of, spool_files, start_serve
from tests.support.ci import require


@pytest.fixture
def http_serve(app: Any, store_file: str, tmp_path: Path) -> Iterator[HttpServe]:
    s = start_serve(store_file, tmp_path / "serve.log")
    yield s
    s.stop()


def test_spark_sql_e_announces(jar: Path, app: Any, writer_token: str, http_serve: HttpServe,
                               tmp_path: Path) -> None:
    import pyspark

    spark_sql = Path(pyspark.__file__).parent / "bin" / "spark-sql"
    require(spark_sql.exists(), f"{spark_sql} is not shipped with this pyspark")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    flags = subprocess.run(
        [sys.executable, "-m", "partition_notify.cli", "spark-conf", "--for", "spark-sql",
         "--serve-url", http_serve.base],
        env=env, capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()
    loc = tmp_path / "clicks"
    app.publisher.register_table("default", "clicks", ["ds"], location=f"file:{loc}")
    col = Collector()
    sub = app.subscriber().subscribe(("default", "clicks"), col)
    sql = (
        f"CREATE TABLE clicks (v INT, ds STRING) USING parquet PARTITIONED BY (ds) "
        f"LOCATION '{loc}'; "
        "INSERT INTO clicks PARTITION (ds='20110228') SELECT 1; "
        "SET spark.partitionnotify.markSetDone=ds=20110301; "
        "INSERT INTO clicks SELECT 2, '20110301';"
    )
    run = subprocess.run(
        [str(spark_sql), "--master", "local[1]", *shlex.split(flags),
         "--conf", "spark.ui.enabled=false",
         "--conf", f"spark.sql.warehouse.dir={tmp_path / 'wh'}",
         "--conf", f"spark.driver.extraJavaOptions=-Dderby.system.home={tmp_path}",
         # a spool serve does not scan: only a successful POST can announce
         "--conf", f"spark.partitionnotify.spoolDir={tmp_path / 'unscanned-spool'}",
         "-e", sql],
        cwd=tmp_path, env={**env, "PN_WRITER_TOKEN": writer_token,
                           "SPARK_HOME": str(spark_sql.parent.parent)},
        capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    col.wait_for(3)
    assert col.adds() == ["ds=20110228", "ds=20110301"]
    assert col.dones() == ["ds=20110301"]
    assert len(events_of(app, "default", "clicks")) == 3
    assert not spool_files(loc)      # delivered over HTTP with the env token
    assert not (tmp_path / "unscanned-spool").exists()
    sub.close()


def test_a_bad_pn_serve_url_is_named_as_the_environment_variable(
    jar: Path, tmp_path: Path
) -> None:
    """The URL came from the driver's environment, not a Spark setting: the refusal says so
    (a user grepping their Spark conf for the bad value would find nothing)."""
    import pyspark

    from tests.spark_protocol.helpers import spark_flags

    spark_sql = Path(pyspark.__file__).parent / "bin" / "spark-sql"
    require(spark_sql.exists(), f"{spark_sql} is not shipped with this pyspark")
    confs = [a for k, v in spark_flags().items() for a in ("--conf", f"{k}={v}")]
    loc = tmp_path / "clicks"
    run = subprocess.run(
        [str(spark_sql), "--master", "local[1]", "--jars", str(jar), *confs,
         "--conf", "spark.ui.enabled=false",
         "--conf", f"spark.sql.warehouse.dir={tmp_path / 'wh'}",
         "--conf", f"spark.driver.extraJavaOptions=-Dderby.system.home={tmp_path}",
         "-e", f"INSERT OVERWRITE DIRECTORY '{loc}' USING parquet SELECT 1 AS v"],
        cwd=tmp_path, env={**os.environ, "PN_SERVE_URL": "serve:8080",
                           "SPARK_HOME": str(spark_sql.parent.parent)},
        capture_output=True, text=True, timeout=600,
    )
    assert run.returncode != 0, run.stderr[-3000:]
    assert ("partition-notify refused the write: environment variable PN_SERVE_URL "
            "'serve:8080' refused: expected http(s)://host:port") in run.stderr, run.stderr[-3000:]
    assert "spark.partitionnotify.serveUrl 'serve:8080'" not in run.stderr
    assert not list(loc.glob("*.parquet"))
