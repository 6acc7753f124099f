"""The Spark writer of the end-to-end benches: one driver, one write per line read.

    .venv/bin/python bench/e2e_spark_child.py --table-path P --serve-url U   (PN_WRITER_TOKEN set)

Reads ``write <day>`` lines from stdin; for each, appends a few rows into
partition ``datestamp=<day>`` of the parquet table at ``P`` with the commit
protocol on (the two settings of docs/writers.md) and
``partitionnotify.markSetDone=datestamp=<day>``, then prints one JSON line:
``{"day", "called", "returned"}`` (epoch seconds around ``df.write``). The
commit time itself travels in the messages (``revision`` = ``committedAtMs``).
A separate process: the writer is one in real life, and the schedulers' venv
has no PySpark. Prints ``ready`` once the session is up and warmed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

ROWS = 1000


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--table-path", required=True)
    p.add_argument("--serve-url", required=True)
    args = p.parse_args()
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from partition_notify.cli.spark import jar_path, spark_settings

    builder = (SparkSession.builder.master("local[2]").appName("pn-bench-e2e")
               .config("spark.jars", str(jar_path()))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    for key, value in spark_settings(args.serve_url, None).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")

    def write(day: str) -> None:
        df = (spark.range(0, ROWS, numPartitions=2)
              .withColumn("amount", F.col("id") * 0.5)
              .withColumn("datestamp", F.lit(day)))
        (df.write.mode("append").partitionBy("datestamp")
         .option("partitionnotify.markSetDone", f"datestamp={day}")
         .parquet(args.table_path))

    # Warm the JVM's code paths once, into a directory no table is registered for.
    spark.range(0, 10).write.mode("overwrite").parquet(args.table_path + "_warm")
    print("ready", flush=True)
    for line in sys.stdin:
        cmd, _, day = line.strip().partition(" ")
        if cmd != "write" or not day:
            print(json.dumps({"error": f"expected 'write <day>', got {line.strip()!r}"}),
                  flush=True)
            continue
        called = time.time()
        write(day)
        print(json.dumps({"day": day, "called": called, "returned": time.time()}), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
