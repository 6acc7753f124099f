"""``df.write.mode("overwrite").saveAsTable(t)`` over an existing managed table.

Spark drops the table (its directory goes, ``_partition_notify`` included) and
runs a CTAS into the empty location: no ``deleteWithJob``, so the job's manifest
named nothing deleted and every partition announced before stayed "present" in
the catalog of announced partitions, their data gone. The CTAS with mode
Overwrite replaces the whole table: its manifest says so (``deleted``: the
table location), and serve drops what the job did not write again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.spark_protocol.helpers import finish_deliveries

KEYS = ["ds", "region"]


def _rows(spark: Any, ds: str) -> Any:
    return spark.createDataFrame([(1, ds, "us"), (2, ds, "eu")], "v INT, ds STRING, region STRING")


def _present(app: Any) -> list[str]:
    info = app.publisher.table("default", "replaced")
    return sorted(p.spec for p in app.store.catalog.partitions(info))


def test_save_as_table_overwrite_drops_what_the_old_table_held(
    pspark: Any, app: Any, serve: Any,
) -> None:
    wh = Path(pspark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
    app.publisher.register_table("default", "replaced", KEYS, location=f"file:{wh / 'replaced'}")
    try:
        _rows(pspark, "1").write.partitionBy(*KEYS).saveAsTable("replaced")
        finish_deliveries(pspark)
        assert _present(app) == ["ds=1/region=eu", "ds=1/region=us"]
        _rows(pspark, "2").write.mode("overwrite").partitionBy(*KEYS).saveAsTable("replaced")
        finish_deliveries(pspark)
        assert [r.ds for r in pspark.table("replaced").select("ds").distinct().collect()] == ["2"]
        assert _present(app) == ["ds=2/region=eu", "ds=2/region=us"]
        # A later append (a CTAS-like command too, in mode append) drops nothing.
        _rows(pspark, "3").write.mode("append").partitionBy(*KEYS).saveAsTable("replaced")
        finish_deliveries(pspark)
        assert _present(app) == ["ds=2/region=eu", "ds=2/region=us",
                                 "ds=3/region=eu", "ds=3/region=us"]
    finally:
        pspark.sql("DROP TABLE IF EXISTS replaced")
