"""Plain Spark partitioned write vs NotifyingWriter, same DataFrame, same run.

    PYTHONPATH=. python bench/spark_write.py --partitions 1000 10000 --runs 3

For each partition count the two writes alternate (ABBA order, so drift of a
busy machine hits both alike), each into a fresh location; medians of the
wall times and their ratio are printed (goal: notifying / plain <= 1.05). The
notifying write uses the embedded transport on a SQLite store in a temporary
directory unless --store-url / --transport-url say otherwise. Not a test:
timings on a shared machine are noisy, so the load average is printed too.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--partitions", type=int, nargs="+", default=[1000, 10000])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--rows", type=int, default=500_000)
    p.add_argument("--input-partitions", type=int, default=2,
                   help="Spark partitions of the DataFrame (each writes one file per table "
                        "partition it holds)")
    p.add_argument("--master", default=None, help="default: spark-submit's, else local[2]")
    p.add_argument("--base", default=None, help="where tables go (default: a temp dir)")
    p.add_argument("--store-url", default=None)
    p.add_argument("--transport-url", default="embedded://")
    return p.parse_args()


def session(master: str | None) -> Any:
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.appName("pn-bench-spark-write")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    if master:
        builder = builder.master(master)
    elif not SparkConf().contains("spark.master"):
        builder = builder.master("local[2]")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.1f} {five:.1f} {fifteen:.1f}"


def main() -> int:
    args = parse_args()
    from partition_notify.writers import NotifyingWriter
    from partition_notify.writers.hadoop import HadoopFs
    from pyspark.sql import functions as F

    from partition_notify.app import build_app

    tmp = tempfile.mkdtemp(prefix="pn-bench-")
    base = args.base or os.path.join(tmp, "tables")
    store_url = args.store_url or f"sqlite:///{tmp}/store.db"
    spark = session(args.master)
    fs = HadoopFs(spark, base)
    app = build_app(store_url=store_url, transport_url=args.transport_url)
    print(f"Spark {spark.version} master={spark.sparkContext.master} rows={args.rows} "
          f"input partitions={args.input_partitions} store={store_url.split(':')[0]} "
          f"transport={args.transport_url}; {load()} on {os.cpu_count()} CPUs", flush=True)

    def frame(n: int) -> Any:
        return (spark.range(0, args.rows, numPartitions=args.input_partitions)
                .withColumn("part", (F.col("id") % n).cast("string"))
                .withColumn("amount", F.col("id") * 0.5))

    counter = iter(range(1_000_000))

    def plain(df: Any) -> tuple[float, dict[str, float]]:
        path = f"{base}/plain_{next(counter)}"
        t = time.perf_counter()
        df.write.partitionBy("part").parquet(path)
        elapsed = time.perf_counter() - t
        fs.delete(path)
        return elapsed, {}

    def notifying(df: Any) -> tuple[float, dict[str, float]]:
        name = f"bench_{next(counter)}"
        path = f"{base}/{name}"
        t = time.perf_counter()
        writer = NotifyingWriter(app, "bench", name, partition_keys=["part"], location=path)
        result = writer.write(df)
        elapsed = time.perf_counter() - t
        assert len(result.announced) == len(result.partitions)
        fs.delete(path)
        return elapsed, {"spark": result.spark_seconds, "commit": result.commit_seconds,
                         **result.steps, "announced": float(len(result.announced))}

    # Warm-up: JIT, class loading, the store's first transaction.
    plain(frame(50))
    notifying(frame(50))

    summary = []
    for n in args.partitions:
        df = frame(n)
        times: dict[str, list[float]] = {"plain": [], "notifying": []}
        parts: dict[str, list[float]] = {"spark": [], "list": [], "commit": []}
        for run in range(args.runs):
            order = [("plain", plain), ("notifying", notifying)]
            if run % 2:
                order.reverse()
            for label, fn in order:
                elapsed, extra = fn(df)
                times[label].append(elapsed)
                for k in parts:
                    if k in extra:
                        parts[k].append(extra[k])
                detail = "".join(f" {k}={v:.2f}s" for k, v in extra.items()
                                 if k not in ("announced", "replace", "catalog"))
                announced = f" announced={int(extra['announced'])}" if extra else ""
                print(f"  {n:>6} partitions run {run + 1} {label:<9} {elapsed:8.2f}s"
                      f"{detail}{announced}  ({load()})", flush=True)
        p, q = statistics.median(times["plain"]), statistics.median(times["notifying"])
        paired = statistics.median(b / a for a, b in zip(times["plain"], times["notifying"],
                                                          strict=True))
        summary.append((n, p, q, paired, *(statistics.median(parts[k]) for k in parts)))

    print(f"\nmedians of {args.runs} runs ({load()}):")
    print(f"{'partitions':>10} {'plain s':>9} {'notifying s':>12} {'ratio':>6} {'paired':>7}   "
          "notifying = spark job + list/manifest + commit (move, log)")
    for n, p, q, r, s, li, c in summary:
        print(f"{n:>10} {p:>9.2f} {q:>12.2f} {q / p:>6.3f} {r:>7.3f}   "
              f"{s:.2f} + {li:.2f} + {c:.2f}")
    print("ratio = median notifying / median plain; paired = median of per-run ratios")
    app.close()
    spark.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
