"""The composition root: the one place settings, store, transport and jobs are wired."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from partition_notify.contract import names
from partition_notify.core.errors import ConflictError
from partition_notify.publisher import Publisher, PublisherConfig
from partition_notify.publisher.relay import Relay
from partition_notify.revisions import RevisionManager
from partition_notify.revisions.datasets import SnapshotDatasets
from partition_notify.settings import Settings, load_settings, with_overrides
from partition_notify.store import Store, TableInfo
from partition_notify.subscriber import Subscriber
from partition_notify.subscriber.subscriber import OnGap
from partition_notify.transports import Transport, create_transport

if TYPE_CHECKING:
    from partition_notify.deadlines.api import Deadlines
    from partition_notify.rules.api import Rules


@dataclass
class App:
    """What :func:`build_app` wired; callers take parts from here instead of building them."""

    settings: Settings
    store: Store
    transport: Transport
    publisher: Publisher
    #: Revisions, write transactions and snapshots, on the store's clock.
    revisions: RevisionManager = field(init=False)
    #: SNAPSHOT datasets (their Spark side:
    #: :class:`partition_notify.writers.snapshot_dataset.SnapshotDataset`).
    datasets: SnapshotDatasets = field(init=False)

    def __post_init__(self) -> None:
        self.revisions = RevisionManager(self.store, clock=self.store.clock)
        self.datasets = SnapshotDatasets(self.revisions)

    @cached_property
    def relay(self) -> Relay:
        """The outbox relay ``serve`` runs, configured from the settings."""
        s = self.settings
        return Relay(
            self.store,
            self.transport,
            batch_size=s.relay_batch_size,
            publish_timeout=s.publish_timeout_seconds,
            lease_seconds=s.relay_lease_seconds,
            writer_grace_seconds=s.relay_writer_grace_seconds,
            max_backoff_seconds=s.relay_max_backoff_seconds,
            max_attempts=s.relay_max_attempts,
        )

    def subscriber(self, on_gap: OnGap | None = None) -> Subscriber:
        return Subscriber(
            self.store,
            self.transport,
            timeout_seconds=self.settings.connect_timeout_seconds,
            on_gap=on_gap,
            foreign_messages=self.settings.foreign_messages,
        )

    @cached_property
    def deadlines(self) -> Deadlines:
        """Expectations and deadline checks (partition_notify.deadlines), built on first use."""
        from partition_notify.deadlines.api import Deadlines

        return Deadlines(self.store, self.publisher, self.subscriber,
                         lookback_seconds=self.settings.deadline_lookback_seconds)

    @cached_property
    def rules(self) -> Rules:
        """Completeness rules (partition_notify.rules), built on first use."""
        from partition_notify.rules.api import Rules

        return Rules(self.store, self.publisher)

    def unregister_table(self, db: str, table: str) -> tuple[TableInfo, int, int]:
        """:meth:`Publisher.unregister_table`, refused for a table serve follows
        or another table's completeness rule reads.

        A followed Iceberg/Delta table keeps its follower's cursor, which would
        announce again into a table that no longer exists. A rule whose input is
        gone fails at every evaluation and never fires; the table's own rules go
        with it.
        """
        from partition_notify.writers.lakehouse.store import LakehouseTables

        info = self.publisher.table(db, table)
        followed = LakehouseTables(self.store).get(info.id)
        if followed is not None:
            raise ConflictError(
                f"table {info.qualified} is followed as "
                f"{'an Iceberg' if followed.format == 'iceberg' else 'a Delta'} table "
                "(register --format); unregistering a followed table is not supported")
        readers = [f"{r.table}:{r.name}" for r in self.rules.rules()
                   if r.table != info.qualified and info.qualified in _inputs(r.params)]
        if readers:
            raise ConflictError(
                f"table {info.qualified} is an input of rule(s) {', '.join(readers)}; "
                "remove them first (partition-notify rule remove TABLE NAME)")
        return self.publisher.unregister_table(db, table)

    def alter_table(
        self, db: str, table: str, *, partition_keys: Sequence[str] | None = None,
        topic: str | None = None, location: str | None = None,
        retention_seconds: int | None = None,
    ) -> TableInfo:
        """:meth:`Publisher.alter_table`, its keys refused while a completeness rule names
        the table (its own rule, or another table's reading it as input): the rule names
        keys the table would no longer have and would fail at every evaluation, holding
        the log. Remove the rule, alter, add it again."""
        if partition_keys is not None:
            info = self.publisher.table(db, table)
            wanted = names.partition_keys(
                partition_keys if isinstance(partition_keys, str) else list(partition_keys))
            users = [f"{r.table}:{r.name}" for r in self.rules.rules()
                     if r.table == info.qualified or info.qualified in _inputs(r.params)]
            if wanted != info.partition_keys and users:
                raise ConflictError(
                    f"table {info.qualified}: its keys cannot change while rule(s) "
                    f"{', '.join(users)} use it; remove them first (partition-notify rule "
                    "remove TABLE NAME), then add them again with the new keys")
            if wanted != info.partition_keys:
                self._check_followed_keys(info, list(wanted))
        self.check_followed_location(db, table, location)
        return self.publisher.alter_table(
            db, table, partition_keys=partition_keys, topic=topic, location=location,
            retention_seconds=retention_seconds)

    def _check_followed_keys(self, info: TableInfo, keys: list[str]) -> None:
        """New keys of a table serve follows (register --format) are checked against the
        table as register checks them: keys its commits cannot give would stop the
        follower at the next commit."""
        from partition_notify.writers.lakehouse.follower import head_of
        from partition_notify.writers.lakehouse.store import LakehouseTables

        f = LakehouseTables(self.store).get(info.id)
        if f is not None:
            head_of(f.format, catalog=f.catalog, identifier=f.identifier,
                    location=f.location, keys=keys)

    def check_followed_location(self, db: str, table: str, location: str | None) -> None:
        """A table followed as Delta is read from its location: a new one would change
        the table's location but not the follower's, which kept the old _delta_log."""
        from partition_notify.writers.lakehouse.store import LakehouseTables

        if location is None:
            return
        info = self.publisher.table(db, table)
        f = LakehouseTables(self.store).get(info.id)
        if f is not None and f.format == "delta" and location != f.location:
            raise ConflictError(
                f"table {info.qualified} is followed as a Delta table at {f.location}; its "
                "location cannot change (register the new location as a new table)")

    def close(self) -> None:
        # Pending marks first: they need the store, which closes last.
        self.publisher.close(self.settings.close_timeout_seconds)
        self.transport.close(self.settings.close_timeout_seconds)
        self.store.close()

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def build_transport(settings: Settings, store: Store) -> Transport:
    password = settings.broker_password.get_secret_value() if settings.broker_password else None
    return create_transport(
        settings.transport_url,
        store=store,
        poll_interval_seconds=settings.poll_interval_seconds,
        cross_process_wakeups=settings.cross_process_wakeups,
        username=settings.broker_username,
        password=password,
        connect_timeout=settings.connect_timeout_seconds,
        heartbeat_ms=settings.heartbeat_ms,
        client_id=settings.server_name,
    )


def build_app(
    settings: Settings | None = None, *, clock: Callable[[], float] = time.time,
    **overrides: object,
) -> App:
    """Wire everything from ``settings`` (default: the environment) plus ``overrides``.

    ``clock`` is the store's "now" (epoch seconds): tests and the soak inject
    one to live through simulated days.
    """
    if settings is None:
        settings = load_settings(**overrides)
    elif overrides:
        settings = with_overrides(settings, **overrides)
    store = Store.open(
        settings.store_url,
        clock=clock,
        connect_timeout_seconds=settings.connect_timeout_seconds,
        sqlite_synchronous=settings.sqlite_synchronous,
        store_reply_timeout_seconds=settings.store_reply_timeout_seconds,
    )
    try:
        transport = build_transport(settings, store)
    except BaseException:
        store.close()
        raise
    publisher = Publisher(
        store,
        transport,
        PublisherConfig(
            server=settings.server_name,
            service_principal=settings.service_principal,
            topic_prefix=settings.topic_prefix,
            topic_policy=settings.topic_policy,
            default_retention_seconds=settings.default_retention_seconds,
            publish_timeout_seconds=settings.publish_timeout_seconds,
            max_message_bytes=settings.max_message_bytes,
            mark_exit_timeout_seconds=settings.close_timeout_seconds,
            idempotency_ttl_seconds=settings.http_idempotency_ttl_seconds,
        ),
    )
    return App(settings, store, transport, publisher)


def _inputs(params: dict[str, object]) -> list[object]:
    inputs = params.get("inputs")
    return list(inputs) if isinstance(inputs, list) else []
