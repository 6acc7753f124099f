"""Bad arguments to NotifyingWriter fail at once, with an error naming them.

Nothing may reach Spark first: an argument the commit step refuses after
Spark committed would leave a manifest that every later write's recovery
trips over (the table wedged), and a traceback from deep inside says
nothing to the user.
"""

from __future__ import annotations

import pytest
from partition_notify.writers import NotifyingWriter

from partition_notify.core.errors import ValidationError
from tests.spark.test_recovery import age_locks, location
from tests.spark.test_writers import frame, path_writer, rows_for, staging_entries

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("revision", ["7", -1, True, 2**63])
def test_a_bad_revision_is_refused_before_spark_and_the_table_stays_writable(
        spark, spark_app, tmp_path, revision):
    writer = path_writer(spark_app, tmp_path)
    df = frame(spark, rows_for(["20110228"], ["us"]))
    with pytest.raises(ValidationError, match="revision"):
        writer.write(df, revision=revision)
    assert staging_entries(f"file:{location(tmp_path)}") == [], "Spark never ran"
    assert spark_app.store.log.max_event_id() == 0
    age_locks(tmp_path, 3600)  # as if the next write came long after
    result = writer.write(df, mark_set_done="datestamp=20110228")
    assert [m.partitions for m in result.announced] == [
        [{"datestamp": "20110228", "region": "us"}]]


def test_partition_keys_given_as_one_string_are_refused(spark_app, tmp_path):
    # list("datestamp") would register nine one-letter keys.
    with pytest.raises(ValidationError, match="partition_keys"):
        NotifyingWriter(spark_app, "sales", "orders", partition_keys="datestamp",
                        location=str(tmp_path / "orders"))
    assert spark_app.store.catalog.tables() == []


@pytest.mark.parametrize("lease", [float("nan"), float("inf"), "300", True, 0, -1])
def test_lease_seconds_must_be_a_finite_positive_number(spark_app, tmp_path, lease):
    with pytest.raises(ValidationError, match="lease_seconds"):
        path_writer(spark_app, tmp_path, lease_seconds=lease)


@pytest.mark.parametrize("df", [None, [("20110228", "us")], "select 1"])
def test_writing_something_that_is_not_a_dataframe_names_it(spark_app, tmp_path, df):
    writer = path_writer(spark_app, tmp_path)
    with pytest.raises(ValidationError, match="DataFrame"):
        writer.write(df)
    assert spark_app.revisions.running_transactions("sales.orders") == []


@pytest.mark.parametrize("where", ["warehouse/orders", "./orders", "../orders"])
def test_a_relative_location_is_refused(spark_app, where):
    # Each driver would resolve it against its own working directory: two jobs
    # started in different directories would write "the same table" in two places.
    with pytest.raises(ValidationError, match="absolute"):
        NotifyingWriter(spark_app, "sales", "orders", partition_keys=["datestamp"],
                        location=where)
    assert spark_app.store.catalog.tables() == []
