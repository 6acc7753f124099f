"""The publisher: validate, log in one transaction, hand to the transport."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from partition_notify.publisher import idempotent, tables, validate, withdrawals
from partition_notify.publisher.build import with_cached_table
from partition_notify.publisher.drops import Dropped, SpecLike, drop_drafts
from partition_notify.publisher.marks import (
    DEFAULT_EXIT_TIMEOUT_SECONDS,
    DEFAULT_FLUSH_INTERVAL_SECONDS,
    DEFAULT_MAX_BATCH,
    MarkBatcher,
)
from partition_notify.publisher.message_ids import message_id
from partition_notify.publisher.templates import MAX_TEMPLATES, PartitionTemplate, SetDoneTemplate
from partition_notify.publisher.undelivered import saved_but_undelivered
from partition_notify.store import EventDraft, Logged, Store, TableInfo
from partition_notify.store.provider import InTxn
from partition_notify.transports import Transport

from partition_notify.contract import (
    AddPartitionMessage,
    AnyMessage,
    PartitionWithdrawnMessage,
    SetDoneMessage,
    TopicPolicy,
    names,
    spec,
    to_envelope,
    topic_for,
)
from partition_notify.contract.messages import DEFAULT_MAX_MESSAGE_BYTES
from partition_notify.core import limits
from partition_notify.core.errors import TransportError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PublisherConfig:
    server: str = "partition-notify"
    service_principal: str = ""
    topic_prefix: str = "hcat"
    topic_policy: TopicPolicy = TopicPolicy.PER_TABLE
    default_retention_seconds: int = limits.DEFAULT_RETENTION_SECONDS
    publish_timeout_seconds: float = 10.0
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    #: Marks of broker-confirmed events are written in batches this often (and
    #: at ``mark_max_batch`` and on close); 0 marks each publish in its own commit.
    mark_flush_interval_seconds: float = DEFAULT_FLUSH_INTERVAL_SECONDS
    mark_max_batch: int = DEFAULT_MAX_BATCH
    #: A writer that ends without close() flushes its pending marks at interpreter
    #: exit, within this many seconds (App: PN_CLOSE_TIMEOUT_SECONDS).
    mark_exit_timeout_seconds: float = DEFAULT_EXIT_TIMEOUT_SECONDS
    #: How long an ``idempotency_key`` of a write is remembered.
    idempotency_ttl_seconds: float = idempotent.DEFAULT_TTL_SECONDS


class Publisher:
    """Registers tables, announces partitions and sends mark-set-done messages.

    Every call validates first (nothing is stored on bad input), writes the
    event log and retention rows in one transaction, then returns only when
    the transport holds the messages durably. If the transport fails after
    the commit, the messages stay in the log for the relay and the caller
    gets a :class:`PublishError` naming the logged event ids.

    That the broker took them is recorded lazily, in batches (see :mod:`.marks`):
    one durable commit per publish. :meth:`close` writes what is pending.
    """

    def __init__(self, store: Store, transport: Transport, config: PublisherConfig) -> None:
        self.store = store
        self.transport = transport
        self.config = config
        self.marks = MarkBatcher(
            store.log.mark_published,
            interval=config.mark_flush_interval_seconds,
            max_batch=config.mark_max_batch,
            exit_timeout=config.mark_exit_timeout_seconds,
        )
        #: Set-done templates by (table, revision): one validation per table, not per publish.
        self._done_templates: dict[tuple[TableInfo, int | None], SetDoneTemplate] = {}

    def flush_marks(self) -> None:
        """Record now that every event the broker confirmed so far was published."""
        self.marks.flush()

    def close(self, timeout: float) -> bool:
        """Write pending marks within ``timeout`` seconds; True when none is left."""
        return self.marks.close(timeout)

    # -- tables ---------------------------------------------------------------
    def register_table(
        self, db: str, table: str, partition_keys: Sequence[str], *,
        retention_seconds: int | None = None, topic: str | None = None,
        location: str | None = None,
    ) -> TableInfo:
        """Register a table; registering it again applies ``retention_seconds`` and
        ``location`` when given (:func:`.tables.register`)."""
        return self.register_table_created(
            db, table, partition_keys, retention_seconds=retention_seconds, topic=topic,
            location=location)[0]

    def register_table_created(
        self, db: str, table: str, partition_keys: Sequence[str], *,
        retention_seconds: int | None = None, topic: str | None = None,
        location: str | None = None, change_existing: bool = True,
    ) -> tuple[TableInfo, bool]:
        """:meth:`register_table`, and whether this call created the table: of concurrent
        registrations of one new table exactly one did (the catalog decides under its
        write lock; a check before the call cannot). ``change_existing=False`` returns
        an existing table as stored, for the caller to compare with what it asked."""
        return tables.register(
            self.store, self.config, db, table, partition_keys,
            retention_seconds=retention_seconds, topic=topic, location=location,
            change_existing=change_existing)

    def alter_table(
        self, db: str, table: str, *, partition_keys: Sequence[str] | None = None,
        topic: str | None = None, location: str | None = None,
        retention_seconds: int | None = None,
    ) -> TableInfo:
        """Change a registered table's keys, topic, location ("" clears it) or retention.

        Keys change only while the table has no partition and no retained
        set-done (else :class:`ConflictError`). A new topic and retention apply to
        what is logged from now on; what was logged before keeps its own."""
        db_n, table_n = names.db_name(db), names.table_name(table)
        what = f"{db_n}.{table_n}"
        keys = None if partition_keys is None else names.partition_keys(
            partition_keys if isinstance(partition_keys, str) else list(partition_keys))
        if retention_seconds is not None:
            limits.retention_seconds(retention_seconds, what=what)
        if location is not None:
            location = limits.location(location, field=f"location of {what}")
        new_topic = None if topic is None else (topic_for(
            db_n, table_n, prefix=self.config.topic_prefix, policy=self.config.topic_policy,
            override=topic), topic)
        return self.store.catalog.alter_table(
            db_n, table_n, keys=keys, topic=new_topic, location=location,
            retention_seconds=retention_seconds)

    def unregister_table(self, db: str, table: str) -> tuple[TableInfo, int, int]:
        """Remove a table, its partitions and set-done rows: (table, partitions, set-dones).

        Logged events stay: the relay delivers them, housekeeping purges them."""
        return self.store.catalog.unregister_table(names.db_name(db), names.table_name(table))

    def table(self, db: str, table: str) -> TableInfo:
        return self.store.catalog.get_table(names.db_name(db), names.table_name(table))

    # -- messages -------------------------------------------------------------
    def announce_partitions(
        self,
        db: str,
        table: str,
        partitions: Iterable[SpecLike],
        *,
        locations: Sequence[str | None] | None = None,
        revision: int | None = None,
        replace: bool = False,
        in_txn: InTxn | None = None,
        idempotency_key: str | None = None,
    ) -> list[AddPartitionMessage]:
        """Announce new partitions, one add-partition message each; returns those sent.

        Partitions already announced are skipped, unless ``replace`` (an
        overwrite: announced again, flagged ``replace``, with the new revision).
        Returns the messages sent. ``in_txn`` runs inside the logging transaction
        (the HTTP API stores its idempotency key there). With ``idempotency_key``
        a retry returns the first call's messages and logs nothing
        (:mod:`partition_notify.publisher.idempotent`).
        """
        info = self.table(db, table)
        revision = limits.revision(revision)
        drafts = self._partition_drafts(info, partitions, locations, revision, replace)
        request = ["announce", info.qualified, [d.partition_spec for d in drafts],
                   [d.location for d in drafts], revision, replace]
        logged = self._append_once(drafts, idempotency_key, request, replace, in_txn)
        return [m for m in logged if isinstance(m, AddPartitionMessage)]

    def send_mark_set_done(
        self,
        db: str,
        table: str,
        partial_spec: SpecLike,
        *,
        revision: int | None = None,
        in_txn: InTxn | None = None,
        idempotency_key: str | None = None,
    ) -> SetDoneMessage:
        """Tell consumers that every partition matching ``partial_spec`` is complete.

        With ``idempotency_key`` a retry returns the first call's message and
        logs nothing (:mod:`partition_notify.publisher.idempotent`).
        """
        revision = limits.revision(revision)
        return with_cached_table(
            self.store.catalog, names.db_name(db), names.table_name(table),
            lambda info, version: self._set_done(info, version, partial_spec, revision,
                                                 in_txn, idempotency_key))

    def _set_done(self, info: TableInfo, version: int | None, partial_spec: SpecLike,
                  revision: int | None, in_txn: InTxn | None,
                  idempotency_key: str | None) -> SetDoneMessage:
        done, canon = validate.set_done_canon(info, partial_spec)
        draft, size = self._set_done_sized(info, done, revision, canon)
        draft.catalog_version = version
        if size > self.config.max_message_bytes:  # its text made only when it is refused
            self._refuse_over(draft, size, f"set-done {canon!r}", None)
        request = (None if idempotency_key is None
                   else ["set-done", info.qualified, canon, revision])
        logged = self._append_once([draft], idempotency_key, request, False, in_txn)
        msg = logged[0]
        assert isinstance(msg, SetDoneMessage)
        return msg

    def withdraw(
        self, db: str, table: str, partial_spec: SpecLike, *, reason: str,
        revision: int | None = None, in_txn: InTxn | None = None,
        idempotency_key: str | None = None,
    ) -> PartitionWithdrawnMessage:
        """Take a partition or a set back (:mod:`.withdrawals`): its partitions are removed,
        set-dones sharing a partition no longer count, rules retract what they derived."""
        info = self.table(db, table)
        s = self.validate_set_done(info, partial_spec)
        why = withdrawals.reason_text(reason, info.qualified)
        revision = limits.revision(revision)
        request = ["withdraw", info.qualified, spec.canonical(s), why, revision]
        msg = self._append_once([withdrawals.draft(self, info, s, why, revision)],
                                idempotency_key, request, False, in_txn)[0]
        assert isinstance(msg, PartitionWithdrawnMessage)
        return msg

    def announce_commit(
        self,
        db: str,
        table: str,
        partitions: Sequence[SpecLike],
        *,
        locations: Sequence[str | None],
        replace: bool = False,
        set_done: SpecLike | None = None,
        revision: int | None = None,
        in_txn: InTxn | None = None,
        dropped: Sequence[Dropped] = (),
    ) -> list[AnyMessage]:
        """A committed write in one transaction: the partitions it removed (``dropped``:
        spec, last location, reason), its add-partitions, its set-done.
        ``in_txn`` runs inside it (the Spark commit protocol records the job there)."""
        info = self.table(db, table)
        revision = limits.revision(revision)
        # The same checks as announce_partitions and send_mark_set_done: one path.
        drafts = drop_drafts(self, info, dropped, revision=revision)
        drafts += self._partition_drafts(info, partitions, locations, revision, replace)
        if set_done is not None:
            done = self.validate_set_done(info, set_done)
            draft, size = self._set_done_sized(info, done, revision)
            self._refuse_over(draft, size, f"set-done {spec.canonical(done)!r}", None)
            drafts.append(draft)
        return self.append_and_deliver(drafts, replace=replace, in_txn=in_txn)

    def _partition_drafts(self, info: TableInfo, partitions: Iterable[SpecLike],
                          locations: Sequence[str | None] | None,
                          revision: int | None, replace: bool = False) -> list[EventDraft]:
        """Validated add-partition drafts: specs, locations (text rules) and size."""
        replace = limits.flag(replace, field="replace")  # "no" is truthy: an overwrite
        specs, canons = validate.partitions_canon(info, partitions)
        locs = validate.locations(locations, len(specs), info.qualified)
        template = self._partition_template(info, revision)
        template.reserve_ids(len(specs))
        drafts = []
        for i, (s, canon, loc) in enumerate(zip(specs, canons, locs, strict=True)):
            d, size = template.draft(canon, s, loc, replace)
            if size > self.config.max_message_bytes:  # the texts only for a refusal
                self._refuse_over(d, size, f"partition #{i} ({d.partition_spec})",
                                  f"locations[{i}]")
            drafts.append(d)
        return drafts

    # -- validation (also used by writers before any data is written) ---------
    validate_partitions = staticmethod(validate.partitions)
    validate_set_done = staticmethod(validate.set_done)

    def append_and_deliver(
        self,
        drafts: Sequence[EventDraft],
        *,
        replace: bool = False,
        in_txn: InTxn | None = None,
    ) -> list[AnyMessage]:
        """Log ``drafts`` in one transaction, then hand them to the transport."""
        logged = self.store.log.append(
            drafts,
            replace_partitions=replace,
            published=self.transport.uses_store_log,
            in_txn=in_txn,
        )
        self._deliver(logged)
        return logged

    def _append_once(
        self, drafts: Sequence[EventDraft], key: str | None, request: object, replace: bool,
        in_txn: InTxn | None,
    ) -> list[AnyMessage]:
        if key is None:
            return self.append_and_deliver(drafts, replace=replace, in_txn=in_txn)
        return idempotent.once(
            self.store, key, request,
            lambda hook: self.append_and_deliver(drafts, replace=replace, in_txn=hook),
            ttl_seconds=self.config.idempotency_ttl_seconds, in_txn=in_txn,
        )

    def common_fields(
        self, info: TableInfo, event_id: int, seq: int, now: float, revision: int | None = None
    ) -> dict[str, object]:
        """The envelope fields every message of ``info`` carries."""
        return {
            "server": self.config.server,
            "servicePrincipal": self.config.service_principal,
            "db": info.db,
            "table": info.name,
            "timestamp": int(now),
            "timestampMs": int(now * 1000),
            "messageId": message_id(),
            "eventId": event_id,
            "topic": info.topic,
            "topicSeq": seq,
            "revision": revision,
        }

    def _fixed(self, info: TableInfo, revision: int | None) -> dict[str, object]:
        """The fields of ``_common`` that every build of one draft shares."""
        return {"server": self.config.server, "servicePrincipal": self.config.service_principal,
                "db": info.db, "table": info.name, "topic": info.topic, "revision": revision}

    def _partition_template(self, info: TableInfo, revision: int | None) -> PartitionTemplate:
        return PartitionTemplate(info, {**self._fixed(info, revision),
                                        "partitionKeys": list(info.partition_keys)})

    def _partition_draft(self, info: TableInfo, s: spec.Spec, location: str | None,
                         revision: int | None, canon: str | None = None) -> EventDraft:
        ordered = spec.in_key_order(s, info.partition_keys)
        return self._partition_template(info, revision).draft(
            spec.canonical(s) if canon is None else canon, ordered, location)[0]

    def _set_done_draft(self, info: TableInfo, s: spec.Spec, revision: int | None,
                        canon: str | None = None) -> EventDraft:
        return self._set_done_sized(info, s, revision, canon)[0]

    def _set_done_sized(self, info: TableInfo, s: spec.Spec, revision: int | None,
                        canon: str | None = None) -> tuple[EventDraft, int]:
        """A set-done's draft and its size with the widest ids, from its table's template."""
        template = self._done_templates.get((info, revision))
        if template is None:
            if len(self._done_templates) >= MAX_TEMPLATES:
                self._done_templates.clear()
            template = SetDoneTemplate(info, self._fixed(info, revision))
            self._done_templates[(info, revision)] = template
        return template.draft(s, spec.canonical(s) if canon is None else canon)

    def _refuse_over(self, draft: EventDraft, size: int, what: str,
                     location_field: str | None) -> None:
        if size > self.config.max_message_bytes:
            validate.refuse_size(draft, size, self.config.max_message_bytes, what, location_field)

    def _deliver(self, messages: Sequence[AnyMessage]) -> None:
        if not messages or self.transport.uses_store_log:
            return
        # The envelopes the append encoded for the log; a retry answered from the
        # idempotency record brings messages only.
        envelopes = (messages.envelopes if isinstance(messages, Logged)
                     else [to_envelope(m) for m in messages])
        try:
            self.transport.publish(envelopes, timeout=self.config.publish_timeout_seconds)
        except TransportError as exc:
            raise saved_but_undelivered(exc, messages) from exc
        self.marks.add([m.event_id for m in messages])

