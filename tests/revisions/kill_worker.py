"""A writer process that is SIGKILLed in the middle of its Spark job.

``python -m tests.revisions.kill_worker <store_url> <dataset>``: starts a run
of the dataset and writes a DataFrame whose UDF kills this driver process
while the job is running, after part of the output has been written.
"""

from __future__ import annotations

import os
import signal
import sys


def main(url: str, name: str) -> None:
    from partition_notify.writers.snapshot_dataset import SnapshotDataset
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    from partition_notify.app import build_app

    spark = (
        SparkSession.builder.master("local[1]")
        .appName("kill-worker")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    driver = os.getpid()

    def boom(x: int) -> int:
        if x == 150:  # in the second task, after the first has written its file
            os.kill(driver, signal.SIGKILL)
        return x

    app = build_app(store_url=url, transport_url="embedded://")
    ds = SnapshotDataset.open(app, name, keep_alive_seconds=60)
    df = spark.range(0, 200, numPartitions=2).select(
        F.udf(boom, LongType())("id").alias("key"), F.lit("doomed").alias("value")
    )
    run = ds.start()
    print(f"RUN {run.version} {run.path}", flush=True)
    run.write(df)
    run.commit()
    print("UNEXPECTED: committed", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
