"""Reading a followed table's head and commits through its format's reader, under a
deadline (:mod:`.bounded`): what the follower and ``register --format`` share."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from partition_notify.writers.lakehouse.bounded import BoundedReads
from partition_notify.writers.lakehouse.commits import Commit
from partition_notify.writers.lakehouse.iceberg import Catalogs
from partition_notify.writers.lakehouse.schema import BEFORE_FIRST

from partition_notify.core.errors import ConfigurationError, PartitionNotifyError
from partition_notify.settings import Settings

#: The longest one read of a table (pyiceberg, delta-rs) may take: the default of
#: ``PN_LAKEHOUSE_READ_TIMEOUT_SECONDS``.
READ_TIMEOUT_SECONDS: float = Settings.model_fields["lakehouse_read_timeout_seconds"].default
#: Characters of a writer's text a log line quotes at most.
LOGGED_CHARS = 300


class Reader(Protocol):
    def head(self) -> int | None: ...

    def table_uuid(self) -> str | None: ...

    def uuid_at(self, cursor: int) -> str | None: ...

    def check_keys(self) -> None: ...

    def commits_after(self, cursor: int, uuid: str | None = None) -> Iterator[Commit]: ...


def clip(text: str) -> str:
    """``text`` cut to LOGGED_CHARS for a log line, saying how long it was."""
    return text if len(text) <= LOGGED_CHARS else f"{text[:LOGGED_CHARS]}… ({len(text)} chars)"


def head_of(
    fmt: str,
    *,
    catalog: str | None,
    identifier: str | None,
    location: str | None,
    keys: list[str],
    catalogs: Catalogs | None = None,
    timeout: float = READ_TIMEOUT_SECONDS,
) -> int:
    """The table's current commit; BEFORE_FIRST while it has none or does not exist.

    Raises TableReadTimeout when the catalog or log does not answer in ``timeout`` s,
    ConfigurationError when it answers with an error (an unknown filesystem scheme, a
    catalog database or server that cannot be reached)."""
    where = identifier or location or "?"
    try:
        head = BoundedReads(timeout).run(
            where,
            lambda: _checked_head(
                reader_for(fmt, catalog, identifier, location, keys, catalogs or Catalogs())
            ),
            f"{fmt} table {where}",
        )
    except PartitionNotifyError:
        raise
    except Exception as exc:  # the driver's (pyarrow, SQLAlchemy, requests): one line
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ConfigurationError(
            f"{fmt} table {where} cannot be read: {type(exc).__name__}: {clip(first)}"
        ) from exc
    return BEFORE_FIRST if head is None else head


def head_and_uuid(reader: Reader) -> tuple[int | None, str | None]:
    return reader.head(), reader.table_uuid()


def _checked_head(reader: Reader) -> int | None:
    reader.check_keys()
    return reader.head()


def reader_for(
    fmt: str,
    catalog: str | None,
    identifier: str | None,
    location: str | None,
    keys: list[str],
    catalogs: Catalogs,
) -> Reader:
    if fmt == "iceberg":
        from partition_notify.writers.lakehouse.iceberg import IcebergReader

        assert catalog is not None and identifier is not None
        return IcebergReader(catalogs.get(catalog), identifier, keys)
    from partition_notify.writers.lakehouse.delta import DeltaReader

    assert location is not None
    return DeltaReader(location, keys)
