"""The table a writer writes: a path table or a Spark catalog table.

Both end up as the same thing: a location on some Hadoop filesystem, the
partition keys in directory order and a file format. A catalog table takes
all three from the catalog and, after each write, learns its new partitions
through ``ALTER TABLE ... ADD PARTITION ... LOCATION`` (what ``insertInto``
and ``saveAsTable`` do; cheaper than ``MSCK REPAIR``, which lists the table).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from partition_notify.store import TableInfo

from partition_notify.contract import names
from partition_notify.core.errors import ConfigurationError, ValidationError
from partition_notify.core.limits import relative_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Partitions per ALTER TABLE statement: keeps each statement's SQL text small.
ADD_PARTITION_BATCH = 500


@dataclass(frozen=True)
class Target:
    info: TableInfo
    location: str
    keys: tuple[str, ...]
    format: str
    options: Mapping[str, str] = field(default_factory=dict)
    catalog_table: str | None = None
    #: Catalog tables: every column in table order (partition keys last).
    columns: tuple[str, ...] | None = None

    def prepare(self, df: DataFrame) -> DataFrame:
        """Check the DataFrame fits the table and name its columns as the table does."""
        by_lower: dict[str, str] = {}
        for c in df.columns:
            if c.lower() in by_lower:
                raise ValidationError(
                    f"DataFrame columns {by_lower[c.lower()]!r} and {c!r} differ only in case"
                )
            by_lower[c.lower()] = c
        missing = [k for k in self.keys if k not in by_lower]
        if missing:
            raise ValidationError(
                f"DataFrame for {self.info.qualified} lacks partition column(s) {missing}; "
                f"it has {df.columns}"
            )
        if self.columns is not None:
            wanted = [c.lower() for c in self.columns]
            extra = [c for c in df.columns if c.lower() not in wanted]
            absent = [c for c in self.columns if c.lower() not in by_lower]
            if extra or absent:
                raise ValidationError(
                    f"DataFrame does not match catalog table {self.catalog_table}: "
                    f"missing {absent}, unexpected {extra}"
                )
            return df.select(*[df[by_lower[c.lower()]].alias(c) for c in self.columns])
        if len(df.columns) == len(self.keys):
            raise ValidationError(
                f"DataFrame for {self.info.qualified} has only partition columns {self.keys}; "
                "Spark needs at least one data column"
            )
        renames = {by_lower[k]: k for k in self.keys if by_lower[k] != k}
        return df.withColumnsRenamed(renames) if renames else df


def quote_identifier(name: str) -> str:
    """``db.table`` -> ```db`.`table```."""
    return ".".join("`" + part.replace("`", "``") + "`" for part in name.split("."))


def sql_string(value: str) -> str:
    """A Spark SQL string literal; everything but plain characters as ``\\uXXXX``."""
    out = []
    for c in value:
        if c.isascii() and (c.isalnum() or c in "-_.:/=+ "):
            out.append(c)
        else:
            out.extend(f"\\u{unit:04x}" for unit in _utf16_units(c))
    return "'" + "".join(out) + "'"


def _utf16_units(c: str) -> list[int]:
    raw = c.encode("utf-16-be")
    return [int.from_bytes(raw[i:i + 2], "big") for i in range(0, len(raw), 2)]


def catalog_metadata(spark: SparkSession, table: str,
                     ) -> tuple[str, tuple[str, ...], tuple[str, ...], str]:
    """(location, partition keys, all columns, provider) of a catalog table."""
    if not spark.catalog.tableExists(table):
        raise ConfigurationError(f"catalog table {table} does not exist")
    cols = spark.catalog.listColumns(table)
    keys = tuple(c.name for c in cols if c.isPartition)
    if not keys:
        raise ConfigurationError(f"catalog table {table} is not partitioned")
    for k in keys:
        # Directory names carry the column name as written; ours are lower-case.
        if names.partition_key(k) != k:
            raise ConfigurationError(
                f"catalog table {table}: partition column {k!r} must be a lower-case name"
            )
    data = [c.name for c in cols if not c.isPartition]
    columns = (*data, *keys)
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {quote_identifier(table)}").collect()
    detail = {str(r[0]).strip(): str(r[1]).strip() for r in rows if r[0] and r[1] is not None}
    location, provider = detail.get("Location"), detail.get("Provider", "").lower()
    if not location:
        raise ConfigurationError(f"catalog table {table} has no location")
    if provider in ("", "hive"):
        raise ConfigurationError(
            f"catalog table {table} is a Hive SerDe table; partition-notify writes data "
            "source tables (USING parquet/orc/...)"
        )
    return location, keys, columns, provider


def check_absolute(location: object, table: str) -> None:
    """A path table's location must not depend on the driver's working directory:
    two jobs started in different directories would write the table in two places."""
    if isinstance(location, str) and relative_path(location):
        raise ValidationError(
            f"location of {table} must be an absolute path or a URI (file:, hdfs://, "
            f"s3a://...), got the relative path {location!r:.200}")


def check_keys(keys: Sequence[str], info: TableInfo, source: str) -> None:
    normalised = tuple(names.partition_keys(list(keys)))
    if normalised != info.partition_keys:
        raise ConfigurationError(
            f"{source} has partition keys {list(keys)} but {info.qualified} is registered "
            f"with {list(info.partition_keys)}"
        )


def add_catalog_partitions(spark: SparkSession, table: str, keys: Sequence[str],
                           specs: Sequence[Mapping[str, str]], locations: Sequence[str]) -> None:
    """Tell the catalog about partitions (idempotent: ``IF NOT EXISTS``)."""
    name = quote_identifier(table)
    for start in range(0, len(specs), ADD_PARTITION_BATCH):
        clauses = []
        for s, loc in zip(specs[start:start + ADD_PARTITION_BATCH],
                          locations[start:start + ADD_PARTITION_BATCH], strict=True):
            values = ", ".join(f"`{k}` = {sql_string(s[k])}" for k in keys)
            clauses.append(f"PARTITION ({values}) LOCATION {sql_string(loc)}")
        spark.sql(f"ALTER TABLE {name} ADD IF NOT EXISTS " + " ".join(clauses))
    spark.catalog.refreshTable(table)


def active_session() -> SparkSession:
    """The active SparkSession (a writer or job not given ``spark=``)."""
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        raise ConfigurationError("no active SparkSession; pass spark=")
    return session
