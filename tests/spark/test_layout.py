"""The pure parts of the writers: partition paths, manifests, SQL and glob quoting."""

from __future__ import annotations

import pytest
from partition_notify.writers.hadoop import glob_escape
from partition_notify.writers.layout import (
    Manifest,
    attempt_for,
    new_write_id,
    parse_partition_path,
)
from partition_notify.writers.target import quote_identifier, sql_string

from partition_notify.contract import spec
from partition_notify.core.errors import InvalidSpecError


def test_partition_paths_are_unescaped_as_spark_escaped_them():
    keys = ["datestamp", "region"]
    got = parse_partition_path("datestamp=20110228/region=eu%2Fwest%3A1 x%25", keys)
    assert got == {"datestamp": "20110228", "region": "eu/west:1 x%"}
    assert list(got) == keys
    null = parse_partition_path("datestamp=1/region=__HIVE_DEFAULT_PARTITION__", keys)
    assert null["region"] == spec.HIVE_DEFAULT_PARTITION
    # Round trip with the contract's own path form.
    assert spec.path(got, keys) == "datestamp=20110228/region=eu%2Fwest%3A1 x%25"


@pytest.mark.parametrize("rel", ["datestamp=1", "region=us/datestamp=1", "datestamp=1/regionus",
                                 "datestamp=1/region=bad%zz"])
def test_unexpected_partition_directories_are_refused(rel):
    with pytest.raises(InvalidSpecError):
        parse_partition_path(rel, ["datestamp", "region"])


def test_manifest_round_trips_and_derives_locations():
    m = Manifest(write_id=new_write_id(), db="sales", table="orders",
                 location="hdfs://nn:8020/warehouse/orders", keys=["d"], mode="overwrite",
                 partitions=["d=1", "d=a%2Fb"], set_done="d=1", revision=3, store_mark=42,
                 catalog_table=None)
    back = Manifest.from_json(m.to_json())
    assert back == m
    assert back.specs() == [{"d": "1"}, {"d": "a/b"}]
    assert back.locations() == ["hdfs://nn:8020/warehouse/orders/d=1",
                                "hdfs://nn:8020/warehouse/orders/d=a%2Fb"]
    assert back.staging == f"hdfs://nn:8020/warehouse/orders/_pn_staging/{m.write_id}"
    with pytest.raises(ValueError, match="version"):
        Manifest.from_json(m.to_json().replace(b'"version":1', b'"version":9'))


def test_attempt_numbers_are_positive_ints_and_differ_per_write():
    ids = {new_write_id() for _ in range(200)}
    attempts = {attempt_for(i) for i in ids}
    assert len(attempts) == 200
    assert all(0 < a < 2**31 for a in attempts)


def test_sql_string_literal_and_identifier_quoting():
    assert sql_string("us") == "'us'"
    assert sql_string("it's\\") == "'it\\u0027s\\u005c'"
    assert sql_string("\u00e9\U0001f600") == "'\\u00e9\\ud83d\\ude00'"
    assert quote_identifier("db.t`x") == "`db`.`t``x`"


def test_glob_escape_leaves_no_live_metacharacters():
    assert glob_escape("/data/{a}[b]*?\\") == "/data/\\{a\\}\\[b\\]\\*\\?\\\\"
