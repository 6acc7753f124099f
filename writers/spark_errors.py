"""Spark's refusals of a write, as partition-notify errors of one line.

Spark reports a refused write as a py4j error whose text is the JVM stack,
tens to hundreds of lines. The writers check what is cheap before Spark runs
(the format, that the location can be written) and guard the partition
directory names inside the job; whatever else Spark refuses becomes a
:class:`SparkWriteError` carrying Spark's own message and its root cause,
never the stack. Spark's exception stays the ``__cause__``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from partition_notify.contract import spec
from partition_notify.core.errors import (
    ConfigurationError,
    InvalidSpecError,
    PartitionNotifyError,
    SparkWriteError,
    ValidationError,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Bytes in one path component: the name limit of ext4, XFS, APFS and HDFS
#: (``dfs.namenode.fs-limits.max-component-length``). A ``key=value``
#: directory longer than this fails the job on those, and S3 keys made of
#: such names cannot be copied to them.
NAME_MAX = 255
#: Characters of a refused value an error message shows.
SHOWN = 40
#: Formats Spark ships; the message lists them as what was expected.
BUILTIN_FORMATS = ("parquet", "orc", "json", "csv", "text")
#: What the in-job guard raises; the driver finds it in Spark's error text.
_TOO_LONG = "PN_PARTITION_NAME_TOO_LONG"
_TOO_LONG_FOUND = re.compile(_TOO_LONG + r":(\w+):(\d+):([0-9A-F]*):")
#: A Java regex class of the characters Spark escapes in a directory name (as
#: %XX, 3 bytes each): the very ones spec.escape_value escapes.
_ESCAPED_CLASS = (
    "[" + "".join(f"\\x{c:02x}" for c in range(128) if spec.escape_value(chr(c)) != chr(c)) + "]"
)
#: The Java class of the commit protocol's refusals (writers/jvm: CommitRefused.java).
_COMMIT_REFUSED = "io.partitionnotify.spark.CommitRefused"
_PART = 300  # characters of each part of Spark's reason
_TRACEBACK = "Traceback (most recent call last)"


def check_format(spark: SparkSession, fmt: object, table: str) -> None:
    """Refuse a format Spark has no data source for, with one JVM call, before Spark runs."""
    if not isinstance(fmt, str) or not fmt.strip():
        raise ValidationError(
            f"format of {table} must be the name of a Spark data source, "
            f"e.g. 'parquet', got {fmt!r:.80}"
        )
    try:
        jvm: Any = spark.sparkContext._jvm
        jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            fmt, spark._jsparkSession.sessionState().conf()
        )
    except Exception as exc:
        if _java(exc) is None:  # not the JVM's answer (its internals moved): save() says it
            return
        raise ValidationError(
            f"format {fmt!r:.80} of {table}: Spark has no such data source "
            f"({spark_reason(exc)}); expected one of {', '.join(BUILTIN_FORMATS)}, or a data "
            "source on the classpath"
        ) from exc


def guard_partition_names(frame: DataFrame, keys: Sequence[str]) -> DataFrame:
    """``frame`` whose job fails on a row whose ``key=value`` directory would not fit
    a path component, naming key, size and value, before that directory is made.

    The values are known only as the job runs, and the file system's own refusal
    names neither (or, on S3, never comes). The test costs a length per row; the
    escapes are counted only for values long enough to need it.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    types = {f.name: f.dataType for f in frame.schema.fields}
    guarded = {}
    for key in keys:
        if not isinstance(types.get(key), StringType):
            continue  # numbers and dates print short
        value = F.col(f"`{key}`")
        budget = NAME_MAX - len(key) - 1
        escapes = F.length(value) - F.length(F.regexp_replace(value, _ESCAPED_CLASS, ""))
        size = F.octet_length(value) + escapes * 2
        message = F.concat(
            F.lit(f"{_TOO_LONG}:{key}:"),
            size.cast("string"),
            F.lit(":"),
            F.hex(F.substring(value, 1, SHOWN)),
            F.lit(":"),
        )
        too_long = (F.octet_length(value) * 3 > budget) & (size > budget)
        guarded[key] = F.when(too_long, F.raise_error(message)).otherwise(value)
    return frame.withColumns(guarded) if guarded else frame


@contextmanager
def spark_failures(what: str) -> Iterator[None]:
    """Spark's failure of the write of ``what`` as our error, Spark's as its cause."""
    try:
        yield
    except Exception as exc:
        if not is_spark_error(exc):
            raise
        found = _TOO_LONG_FOUND.search(str(exc))
        if found is not None:
            raise _too_long(*found.groups()) from exc
        raise SparkWriteError(
            f"Spark failed the write of {what}; nothing was published: {spark_reason(exc)}"
        ) from exc


@contextmanager
def writable_location(location: str, table: str) -> Iterator[None]:
    """The first file a write creates, in its location: a refusal names the location."""
    try:
        yield
    except Exception as exc:
        if not is_spark_error(exc):
            raise
        raise ConfigurationError(
            f"location {location!r:.200} of {table} cannot be written ({spark_reason(exc)}); "
            "expected a directory this process may create and write files in"
        ) from exc


@contextmanager
def commit_protocol_errors() -> Iterator[None]:
    """A write the Spark commit protocol refused (a setting it cannot use, a spool it
    cannot write) as our :class:`ConfigurationError` with the protocol's one-line
    message; PySpark's error stays the ``__cause__``. Anything else passes through."""
    try:
        yield
    except Exception as exc:
        message = _commit_refused(exc)
        if message is None:
            raise
        raise ConfigurationError(message) from exc


def _commit_refused(exc: BaseException) -> str | None:
    """The message of the protocol's refusal behind ``exc`` (or in its causes), if any."""
    java = _java(exc)
    try:
        for _ in range(32):  # a cycle-safe walk down the causes
            if java is None:
                return None
            if str(java.getClass().getName()) == _COMMIT_REFUSED:
                return str(java.getMessage())
            java = java.getCause()
    except Exception:  # the gateway is gone: not something we can name
        return None
    return None


def is_spark_error(exc: BaseException) -> bool:
    """Raised by Spark or through py4j (ours are not)."""
    if isinstance(exc, PartitionNotifyError):
        return False
    # py4j's (Py4JJavaError, a lost gateway) and PySpark's own (AnalysisException, ...).
    return any(c.__module__.split(".")[0] in ("py4j", "pyspark") for c in type(exc).__mro__)


def spark_reason(exc: BaseException) -> str:
    """Spark's message and its root cause, one line each part, without the JVM stack."""
    java = _java(exc)
    if java is None:
        return _line(str(exc))
    try:
        top = _line(str(java.getMessage() or ""), java)
        root, depth = java, 0
        while root.getCause() is not None and depth < 32:  # a cycle-safe walk down
            root, depth = root.getCause(), depth + 1
        if depth == 0:
            return top
        cause = _line(str(root.getMessage() or ""), root)
        return f"{top} (cause: {root.getClass().getSimpleName()}: {cause})"
    except Exception:  # the gateway is gone: Python's view of it is all there is
        return _line(str(exc))


def _java(exc: BaseException) -> Any:
    """The Java exception behind a py4j or PySpark error, None if there is none."""
    return getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)


def _line(message: str, java: Any = None) -> str:
    # Spark's error classes end their message with a line of its SQLSTATE.
    lines = [
        line.strip()
        for line in message.splitlines()
        if line.strip() and not line.strip().startswith("SQLSTATE:")
    ]
    if not lines:
        text = str(java.getClass().getName()) if java is not None else "no message"
    elif _TRACEBACK in message:
        # A Python worker's: the traceback's last line says what failed.
        text = f"{lines[0].split(_TRACEBACK)[0]}{lines[-1]}".strip()
    else:
        text = lines[0]
    return text if len(text) <= _PART else text[:_PART] + "…"


def _too_long(key: str, size: str, shown: str) -> InvalidSpecError:
    value = bytes.fromhex(shown).decode("utf-8", "replace")  # hex: Spark's base64 wraps
    return InvalidSpecError(
        f"partition value of {key!r} is too long for a directory name: {key}={value!r}… is "
        f"{len(key) + 1 + int(size)} bytes as a path component (escaped, UTF-8); expected at "
        f"most {NAME_MAX} (the file systems' name limit): shorten the value"
    )
