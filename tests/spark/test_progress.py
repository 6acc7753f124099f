"""The writer's progress line (``progress=True``) on a stream that is not a terminal."""

from __future__ import annotations

import itertools
import re
import time
from pathlib import Path
from typing import Any

import pytest
from partition_notify.writers import NotifyingWriter

pytestmark = pytest.mark.spark

STATUS = re.compile(r"^\[partition-notify\] sales\.slow: (.+) \(\d+ s\)$")


def _slow(value: int) -> int:
    # The workload itself is slow, so that the progress thread reports while tasks run.
    time.sleep(0.8)
    return value


def test_progress_in_a_log_is_one_line_per_change_of_status(spark: Any, spark_app: Any,
                                                            tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType

    slow = F.udf(_slow, IntegerType())
    frame = spark.createDataFrame([(i, "20110228") for i in range(4)], "id INT, datestamp STRING")
    frame = frame.repartition(2).withColumn("id", slow("id"))
    writer = NotifyingWriter(spark_app, "sales", "slow", partition_keys=["datestamp"],
                             location=str(tmp_path / "slow"), progress=True)
    capsys.readouterr()
    writer.write(frame)
    err = capsys.readouterr().err

    assert "\r" not in err, "a carriage return rewrites nothing in a log"
    lines = [line for line in err.splitlines() if line.startswith("[partition-notify] sales.slow")]
    statuses = [STATUS.match(line).group(1) for line in lines]  # type: ignore[union-attr]
    assert len(statuses) >= 2, err  # at least one report while Spark worked, then the end
    assert statuses[-1] == "written"
    repeats = [a for a, b in itertools.pairwise(statuses) if a == b]
    assert not repeats, f"a status that did not change was written again: {statuses}"
