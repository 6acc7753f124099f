"""One jar for Spark 3.5 (Scala 2.12) and 4.x (Scala 2.13); on any other Spark
the protocol is Spark's own, says so in one ERROR line, and never fails the job.

The whole tests/spark_protocol suite runs on both lines (scripts/test.sh runs
it once more with .venv-spark35); this file holds what is about versions.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.http.support import HttpServe
from tests.spark_protocol.helpers import (
    ROOT,
    Collector,
    events_of,
    spark_flags,
    spool_files,
    start_serve,
)

KEYS = ["ds", "region"]

# A driver started with the README's old, broken serveUrl (an inline comment in
# spark-defaults.conf), then given the right one. Its JVM first believes it is
# Spark 3.4.1 and writes one table so; then (the pretence lifted) a sentinel
# table, whose announcement proves the settings, the token and serve would have
# announced the first write; then a path no table is registered at.
_DRIVER = """
import json, sys
from pyspark.sql import SparkSession
jar, url, conf = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
b = SparkSession.builder.master("local[1]").config("spark.jars", jar)
for k, v in conf.items():
    b = b.config(k, v)
s = b.getOrCreate()
jvm = s.sparkContext._jvm
log4j = jvm.org.apache.logging.log4j
log4j.core.config.Configurator.setLevel("io.partitionnotify", log4j.Level.INFO)
s.conf.set("spark.partitionnotify.serveUrl", url)
rows = s.createDataFrame([(1, "1", "us"), (2, "1", "eu")], "v INT, ds STRING, region STRING")
for i, loc in enumerate(sys.argv[4:]):
    rows.write.partitionBy("ds", "region").parquet(loc)
    print("rows", s.read.parquet(loc).count(), flush=True)
    jvm.java.lang.System.clearProperty("partitionnotify.sparkVersion")
s.stop()
"""
#: What the README's spark-defaults.conf block made of the serve URL before it was fixed.
BROKEN_URL = "http://partition-notify:8080     # serve with PN_HTTP_BIND"


@pytest.fixture
def http_serve(app: Any, store_file: str, tmp_path: Path) -> Iterator[HttpServe]:
    s = start_serve(store_file, tmp_path / "serve.log")
    yield s
    s.stop()


def test_unsupported_spark_bad_url_and_what_the_driver_log_says(
    jar: Path, app: Any, writer_token: str, http_serve: HttpServe, tmp_path: Path
) -> None:
    """One driver: a job on an unsupported Spark writes as Spark does, announces
    nothing and logs one ERROR; a malformed serveUrl is refused at start-up; the
    log says announced or ignored as serve answered (not 'HTTP 200' for both)."""
    loc, sentinel, nobody = tmp_path / "events", tmp_path / "sentinel", tmp_path / "nobody"
    for name, where in (("events", loc), ("sentinel", sentinel)):
        app.publisher.register_table("lake", name, KEYS, location=f"file:{where}")
    col = Collector()
    sub = app.subscriber().subscribe(("lake", "sentinel"), col)
    unscanned = tmp_path / "unscanned-spool"
    conf = {
        **spark_flags(BROKEN_URL),
        "spark.ui.enabled": "false",
        "spark.partitionnotify.spoolDir": str(unscanned),
        "spark.driver.extraJavaOptions": "-Dpartitionnotify.sparkVersion=3.4.1",
    }
    run = subprocess.run(
        [sys.executable, "-c", _DRIVER, str(jar), http_serve.base, json.dumps(conf),
         str(loc), str(sentinel), str(nobody)],
        cwd=tmp_path, capture_output=True, text=True, timeout=900,
        env={**os.environ, "PN_WRITER_TOKEN": writer_token, "PYSPARK_PYTHON": sys.executable},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["rows", "2"] * 3   # every job wrote its data
    log = [ln for ln in run.stderr.splitlines() if "partition-notify:" in ln]

    def lines(*needles: str) -> list[str]:
        return [ln for ln in log if all(n in ln for n in needles)]

    assert len(lines("ERROR", "serveUrl", "refused: it contains whitespace")) == 1, log
    unsupported = lines("ERROR", "Spark 3.4.1 is not supported (supported: 3.5.x and 4.x)")
    assert len(unsupported) == 1 and f"at file:{loc}" in unsupported[0], log
    assert len(lines("announced 2 partition(s) of lake.sentinel")) == 1, log
    assert len(lines("WARN", "NOT announced: serve ignored it", f"file:{nobody}")) == 1, log
    claims = [ln for ln in log if re.search(r"\bannounced \d+ partition", ln)]
    assert len(claims) == 1, log                      # nothing else claims success
    col.wait_for(2)                                   # the sentinel write was announced
    assert col.adds() == ["ds=1/region=eu", "ds=1/region=us"]
    assert events_of(app, "lake", "events") == []     # the pretend-3.4 write was not
    assert not spool_files(loc) and not unscanned.exists()
    sub.close()


def test_spark_conf_refuses_an_unsupported_spark_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from partition_notify.cli import main
    from partition_notify.cli.spark import SUPPORTED_SPARK, jar_path

    for version in ("3.5.0", "3.5.9", "4.0.1", "4.3.0"):
        assert main(["spark-conf", "--spark-version", version]) == 0
        assert capsys.readouterr().out.split()[:2] == ["--jars", str(jar_path())]
    for version in ("3.4.1", "5.0.0", "3", "x.y"):
        with pytest.raises(SystemExit) as exc:
            main(["spark-conf", "--spark-version", version])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"--spark-version {version!r}" in err
    # The CLI and the jar state the same supported versions.
    java = (ROOT / "writers/jvm/src/io/partitionnotify/spark/SparkCompat.java").read_text()
    assert re.search(r'SUPPORTED = "([^"]+)"', java)[1] == SUPPORTED_SPARK  # type: ignore[index]
