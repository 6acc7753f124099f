"""Run as a user who may not write the target (tests/spark/test_permission_denied.py):
a NotifyingWriter write and a SNAPSHOT dataset write, each to a location in a
directory of root's. Prints one JSON line per write: the error's type and text."""

from __future__ import annotations

import json
import sys

from partition_notify.writers import NotifyingWriter
from partition_notify.writers.snapshot_dataset import SnapshotDataset
from pyspark.sql import SparkSession

from partition_notify.app import build_app


def main(store: str, table_location: str, dataset_location: str, scratch: str) -> None:
    spark = (SparkSession.builder.master("local[1]").appName("pn-unprivileged")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
             .config("spark.local.dir", scratch)
             .config("spark.sql.warehouse.dir", f"{scratch}/warehouse").getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    df = spark.createDataFrame([(1, "20110228", "us")], "id INT, datestamp STRING, region STRING")
    with build_app(store_url=store, transport_url="embedded://") as app:
        writes = {
            "writer": lambda: NotifyingWriter(app, "sales", "orders",
                                              partition_keys=["datestamp", "region"],
                                              location=table_location).write(df),
            "dataset": lambda: SnapshotDataset.define(app, "warehouse.customers",
                                                      dataset_location).write(df),
        }
        for name, write in writes.items():
            try:
                write()
                outcome = {"write": name, "error": None, "message": ""}
            except Exception as exc:  # what the user's job sees, reported to the test
                outcome = {"write": name, "error": type(exc).__name__, "message": str(exc)}
            print(json.dumps(outcome), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])
