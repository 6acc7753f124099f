"""Plain ``df.write.partitionBy(...).parquet`` with Spark's commit protocol vs ours.

    PYTHONPATH=. python bench/spark_commit_protocol.py --partitions 1000 10000 --runs 5

Same session, same DataFrame: the two differ only in
``spark.sql.sources.commitProtocolClass`` (a runtime SQL setting), so they
alternate (ABBA order; drift of a busy machine hits both alike), each into a
fresh directory. The protocol run includes recording the partitions and the
delivery of the manifest: to a real ``partition-notify serve`` over HTTP
with --serve (started here on a temporary SQLite store), else to the spool
directory. The wall time stops when ``df.write`` returns, i.e. what the job
sees; delivery runs on Spark's listener thread after that, and the next run
starts only when it finished (counted as ``deliver``). Medians and their
ratio (goal: <= 1.02). Not a test: the load average is printed too.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PROTOCOL = "org.apache.spark.sql.execution.datasources.SQLHadoopMapReduceCommitProtocol"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--partitions", type=int, nargs="+", default=[1000, 10000])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--rows", type=int, default=500_000)
    p.add_argument("--input-partitions", type=int, default=2)
    p.add_argument("--serve", action="store_true", help="deliver to a real serve over HTTP")
    return p.parse_args()


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.1f} {five:.1f} {fifteen:.1f}"


def main() -> int:
    args = parse_args()
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from partition_notify.cli.spark import LISTENER_CLASS, PROTOCOL_CLASS, jar_path

    tmp = tempfile.mkdtemp(prefix="pn-bench-protocol-")
    spool = os.path.join(tmp, "spool")
    spark = (SparkSession.builder.master("local[2]").appName("pn-bench-commit-protocol")
             .config("spark.jars", str(jar_path()))
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.queryExecutionListeners", LISTENER_CLASS)
             .config("spark.partitionnotify.spoolDir", spool)
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    serve, app = None, None
    if args.serve:
        sys.path.insert(0, str(ROOT))
        from partition_notify.app import build_app
        from partition_notify.http.store import HttpStore
        from tests.spark_protocol.helpers import start_serve

        store_url = f"sqlite:///{tmp}/store.db"
        app = build_app(store_url=store_url, transport_url="embedded://")
        token = HttpStore(app.store).create_token("bench", "write")[1]
        serve = start_serve(store_url, Path(tmp) / "serve.log")
        spark.conf.set("spark.partitionnotify.serveUrl", serve.base)
        spark.conf.set("spark.partitionnotify.token", token)
    print(f"Spark {spark.version} rows={args.rows} input partitions={args.input_partitions} "
          f"delivery={'HTTP serve' if serve else 'spool'}; {load()} on {os.cpu_count()} CPUs",
          flush=True)

    def frame(n: int) -> Any:
        return (spark.range(0, args.rows, numPartitions=args.input_partitions)
                .withColumn("part", (F.col("id") % n).cast("string"))
                .withColumn("amount", F.col("id") * 0.5))

    counter = iter(range(1_000_000))

    def write(df: Any, n: int, protocol: str, name: str) -> tuple[float, float]:
        spark.conf.set("spark.sql.sources.commitProtocolClass", protocol)
        path = os.path.join(tmp, f"{name}_{next(counter)}")
        if app is not None:
            app.publisher.register_table("bench", os.path.basename(path), ["part"],
                                         location=f"file:{path}")
        before = app.store.log.max_event_id() if app is not None else 0
        t = time.perf_counter()
        df.write.partitionBy("part").parquet(path)
        elapsed = time.perf_counter() - t
        deliver = 0.0
        if protocol == PROTOCOL_CLASS:  # wait for the delivery before the next run
            t = time.perf_counter()
            while (app.store.log.max_event_id() - before < n) if app is not None else \
                    not glob.glob(os.path.join(spool, "*.json")):
                time.sleep(0.01)
            deliver = time.perf_counter() - t
            for f in glob.glob(os.path.join(spool, "*.json")):
                os.remove(f)
        shutil.rmtree(path, ignore_errors=True)
        return elapsed, deliver

    write(frame(50), 50, DEFAULT_PROTOCOL, "warm")
    write(frame(50), 50, PROTOCOL_CLASS, "warm")
    summary = []
    for n in args.partitions:
        df = frame(n)
        times: dict[str, list[float]] = {"spark": [], "ours": []}
        delivers: list[float] = []
        for run in range(args.runs):
            order = [("spark", DEFAULT_PROTOCOL), ("ours", PROTOCOL_CLASS)]
            if run % 2:
                order.reverse()
            for label, protocol in order:
                elapsed, deliver = write(df, n, protocol, label)
                times[label].append(elapsed)
                if label == "ours":
                    delivers.append(deliver)
                print(f"  {n:>6} partitions run {run + 1} {label:<5} {elapsed:8.2f}s"
                      f"{f' deliver={deliver:.2f}s' if label == 'ours' else ''}  ({load()})",
                      flush=True)
        a, b = statistics.median(times["spark"]), statistics.median(times["ours"])
        paired = statistics.median(y / x for x, y in zip(times["spark"], times["ours"],
                                                         strict=True))
        summary.append((n, a, b, paired, statistics.median(delivers)))
    print(f"\nmedians of {args.runs} runs ({load()}):")
    print(f"{'partitions':>10} {'spark s':>9} {'ours s':>8} {'ratio':>6} {'paired':>7} "
          f"{'deliver s':>9}")
    for n, a, b, r, d in summary:
        print(f"{n:>10} {a:>9.2f} {b:>8.2f} {b / a:>6.3f} {r:>7.3f} {d:>9.2f}")
    print("ratio = median ours / median spark; paired = median of per-run ratios; "
          "deliver = after df.write returned, until announced (serve) or spooled")
    if serve is not None:
        serve.stop()
    if app is not None:
        app.close()
    spark.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
