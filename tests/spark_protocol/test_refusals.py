"""A setting the commit protocol cannot use refuses the write, with one first line.

What a user of a plain ``df.write`` (the two cluster settings) sees when a
setting is wrong, before anything is written or deleted: the first line of
PySpark's error names the setting, its value and what was expected, with no
Java stack; the write publishes nothing, an overwrite deletes nothing; the next
write (the setting fixed) is announced. ``commit_protocol_errors()`` gives a
PySpark user partition-notify's own ``ConfigurationError``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from partition_notify.writers.spark_errors import commit_protocol_errors

from partition_notify.core.errors import ConfigurationError
from tests.spark_protocol.helpers import Collector, events_of, finish_deliveries, spool_files

KEYS = ["ds", "region"]
REFUSED = "partition-notify refused the write: "
SERVE_URL = "spark.partitionnotify.serveUrl"

CASES = [
    (SERVE_URL, "http://serve:8080  # serve", f"{SERVE_URL} 'http://serve:8080  # serve' "
     "refused: it contains whitespace"),
    (SERVE_URL, "serve:8080", f"{SERVE_URL} 'serve:8080' refused: expected http(s)://host:port"),
    ("spark.partitionnotify.timeoutMs", "10s", "spark.partitionnotify.timeoutMs '10s' refused: "
     "expected a whole number of milliseconds from 1"),
    ("spark.partitionnotify.timeoutMs", "0", "spark.partitionnotify.timeoutMs '0' refused"),
    ("spark.partitionnotify.servUrl", "http://x:1", "unknown setting "
     "'spark.partitionnotify.servUrl'; expected one of spark.partitionnotify.{serveUrl, token"),
    ("spark.partitionnotify.spoolDir", "spool/here", "spark.partitionnotify.spoolDir "
     "'spool/here' refused: expected an absolute path or URI"),
]


def _rows(spark: Any, ds: str) -> Any:
    return spark.createDataFrame([(1, ds, "us"), (2, ds, "eu")], "v INT, ds STRING, region STRING")


def _files(loc: Path, ds: str) -> list[Path]:
    return sorted(loc.glob(f"ds={ds}/region=*/*.parquet"))


@pytest.fixture
def setting(pspark: Any) -> Iterator[Any]:
    """Sets session settings; puts back what was there when the test ends."""
    saved: dict[str, str | None] = {}

    def put(key: str, value: str | None) -> None:
        saved.setdefault(key, pspark.conf.get(key, None))
        if value is None:
            pspark.conf.unset(key)
        else:
            pspark.conf.set(key, value)

    yield put
    for key, value in saved.items():
        if value is None:
            pspark.conf.unset(key)
        else:
            pspark.conf.set(key, value)


def _assert_one_line(exc: BaseException, expected: str, ignore_case: bool = False) -> None:
    text = str(exc)
    first, want = text.splitlines()[0], REFUSED + expected
    if ignore_case:
        first, want = first.lower(), want.lower()
    assert first.startswith(want), text[:2000]
    assert "\tat " not in text and "Py4JJavaError" not in text, text[:2000]


@pytest.mark.parametrize(("key", "value", "expected"), CASES)
def test_a_wrong_setting_refuses_the_write_and_the_next_one_is_announced(
    pspark: Any, app: Any, serve: Any, setting: Any, tmp_path: Path,
    key: str, value: str, expected: str,
) -> None:
    loc = tmp_path / "events"
    app.publisher.register_table("lake", "events", KEYS, location=f"file:{loc}")
    col = Collector()
    sub = app.subscriber().subscribe(("lake", "events"), col)
    _rows(pspark, "1").write.partitionBy(*KEYS).parquet(str(loc))
    col.wait_for(2)
    kept = _files(loc, "1")
    setting(key, value)
    # An overwrite in static mode: Spark deletes before the job; the refusal comes first.
    with pytest.raises(Exception) as refused:
        _rows(pspark, "2").write.mode("overwrite").partitionBy(*KEYS).parquet(str(loc))
    _assert_one_line(refused.value, expected)
    assert _files(loc, "1") == kept and not _files(loc, "2")     # nothing deleted or written
    setting(key, None if key != SERVE_URL else serve.base)
    _rows(pspark, "3").write.mode("append").partitionBy(*KEYS).parquet(str(loc))
    col.wait_for(4)
    assert col.adds() == sorted(f"ds={d}/region={r}" for d in "13" for r in ("eu", "us"))
    assert len(events_of(app, "lake", "events")) == 4
    sub.close()


def test_a_misspelt_write_option_refuses_the_write(
    pspark: Any, app: Any, serve: Any, tmp_path: Path
) -> None:
    loc = tmp_path / "events"
    app.publisher.register_table("lake", "events", KEYS, location=f"file:{loc}")
    write = _rows(pspark, "1").write.partitionBy(*KEYS).option("partitionnotify.markSetDon", "ds=1")
    with pytest.raises(Exception) as refused:
        write.parquet(str(loc))
    # The key as Spark hands it over: lower-cased by Spark 3.5, as given by 4.x.
    _assert_one_line(refused.value, "unknown write option 'partitionnotify.markSetDon'; "
                     "expected partitionnotify.markSetDone", ignore_case=True)
    assert not _files(loc, "1")


def test_a_misspelt_write_option_refuses_a_static_overwrite_before_it_deletes(
    pspark: Any, app: Any, serve: Any, tmp_path: Path
) -> None:
    loc = tmp_path / "events"
    app.publisher.register_table("lake", "events", KEYS, location=f"file:{loc}")
    _rows(pspark, "1").write.partitionBy(*KEYS).parquet(str(loc))
    kept = _files(loc, "1")
    write = (_rows(pspark, "2").write.mode("overwrite").partitionBy(*KEYS)
             .option("partitionnotify.markSetDon", "ds=2"))
    with pytest.raises(Exception) as refused:
        write.parquet(str(loc))
    _assert_one_line(refused.value, "unknown write option 'partitionnotify.markSetDon'; "
                     "expected partitionnotify.markSetDone", ignore_case=True)
    assert _files(loc, "1") == kept and not _files(loc, "2")     # nothing deleted or written


def test_an_unwritable_spool_refuses_the_write_when_it_is_the_only_way(
    pspark: Any, setting: Any, tmp_path: Path
) -> None:
    loc = tmp_path / "events"
    loc.mkdir()
    (loc / "_partition_notify").write_text("a file where the spool directory goes")
    setting(SERVE_URL, None)   # no serve: every announcement goes to the spool
    with pytest.raises(Exception) as refused:
        _rows(pspark, "1").write.mode("append").partitionBy(*KEYS).parquet(str(loc))
    _assert_one_line(refused.value, f"the spool file:{loc}/_partition_notify cannot be written (")
    assert "with no spark.partitionnotify.serveUrl every announcement goes there" in str(
        refused.value)
    assert not _files(loc, "1")
    (loc / "_partition_notify").unlink()
    _rows(pspark, "1").write.mode("append").partitionBy(*KEYS).parquet(str(loc))
    finish_deliveries(pspark)   # the listener spools after the write call returned
    assert len(_files(loc, "1")) >= 2 and len(spool_files(loc)) == 1


def test_pyspark_users_get_our_configuration_error(
    pspark: Any, setting: Any, tmp_path: Path
) -> None:
    setting("spark.partitionnotify.timeoutMs", "ten")
    with pytest.raises(ConfigurationError) as refused, commit_protocol_errors():
        _rows(pspark, "1").write.partitionBy(*KEYS).parquet(str(tmp_path / "events"))
    assert str(refused.value) == (REFUSED + "spark.partitionnotify.timeoutMs 'ten' refused: "
                                  "expected a whole number of milliseconds from 1 to 2147483647")
    assert refused.value.__cause__ is not None           # PySpark's error, for the curious
    with pytest.raises(ZeroDivisionError), commit_protocol_errors():
        print(1 / 0)                                     # not ours: passes through


def test_a_refused_save_as_table_leaves_no_table_and_the_next_one_works(
    pspark: Any, app: Any, serve: Any, setting: Any
) -> None:
    setting("spark.partitionnotify.timeoutMs", "-5")
    with pytest.raises(Exception) as refused:
        _rows(pspark, "1").write.partitionBy(*KEYS).saveAsTable("refused_events")
    _assert_one_line(refused.value, "spark.partitionnotify.timeoutMs '-5' refused")
    assert not pspark.catalog.tableExists("refused_events")
    setting("spark.partitionnotify.timeoutMs", None)
    _rows(pspark, "1").write.partitionBy(*KEYS).saveAsTable("refused_events")
    assert pspark.table("refused_events").count() == 2
    pspark.sql("DROP TABLE refused_events")


def test_a_blank_setting_is_unset_not_refused(
    pspark: Any, app: Any, serve: Any, setting: Any, tmp_path: Path
) -> None:
    """As everywhere else in the protocol (Settings.from): blank means the default."""
    loc = tmp_path / "events"
    app.publisher.register_table("lake", "events", KEYS, location=f"file:{loc}")
    col = Collector()
    sub = app.subscriber().subscribe(("lake", "events"), col)
    setting("spark.partitionnotify.timeoutMs", " ")
    _rows(pspark, "1").write.partitionBy(*KEYS).parquet(str(loc))
    col.wait_for(2)
    sub.close()
